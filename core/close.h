// The SMC-R connection close state machine, RFC 7609 section 4.8 (figures 22
// and 23). Pure: it maps (state, event) to the next state and the actions the
// connection must perform, so the whole table is unit-tested without a fabric.
#pragma once

#include <cstdint>

namespace smcr {

enum class CloseState : uint8_t {
  kActive,
  kPeerCloseWait1,   // we sent D or C, waiting for the peer's D/C
  kPeerCloseWait2,   // we sent D/C, peer sent D, waiting for its C
  kAppFinCloseWait,  // both sides done; waiting for the local close() to send C
  kAppCloseWait1,    // peer sent D or C first; local app still open
  kAppCloseWait2,    // ... and the local app did shutdown(WR): we sent D
  kPeerFinCloseWait, // we sent C after the peer's D; waiting for its C
  kPeerAbortWait,    // we sent A; waiting for the peer's A (or the timer)
  kClosed,
};
const char* to_string(CloseState s);

enum class CloseEvent : uint8_t {
  kAppShutdownWrite,  // shutdown(SHUT_WR)
  kAppClose,          // close() or shutdown(SHUT_RDWR)
  kAppAbort,          // abortive close (SO_LINGER 0, unread data at close)
  kPeerDone,          // CDC with D
  kPeerClosed,        // CDC with C
  kPeerAbort,         // CDC with A, TCP RST, or link failure
  kTimeout,           // PeerCloseWait / PeerAbortWait timer expired
};

// Actions, as bit flags: what the caller must do, in this order.
enum CloseAction : uint32_t {
  kActNone = 0,
  kActSendDone = 1u << 0,       // CDC with D
  kActSendClose = 1u << 1,      // CDC with C
  kActSendAbort = 1u << 2,      // CDC with A
  kActPurge = 1u << 3,          // discard unread and unsent data; fail calls with ECONNRESET
  kActWakeReaders = 1u << 4,    // EOF/reset visible to recv()
  kActResetTcp = 1u << 5,       // close the TCP socket abortively (RST)
  kActReleaseRmbe = 1u << 6,    // RMBE may be reused: peer will not write again
  kActStartTimer = 1u << 7,     // arm the PeerCloseWait / PeerAbortWait timer
};

struct CloseContext {
  bool unread_data = false;    // bytes remain in our RMBE (close() then aborts)
  bool pending_send = false;   // data not yet written to the peer (C then resets)
  bool app_closed = false;     // the application has already closed the socket
  bool peer_closed = false;    // the peer's C has already arrived
};

struct CloseTransition {
  CloseState next;
  uint32_t actions;
  bool valid;  // false: event not expected in this state (ignored, state kept)
};

CloseTransition close_transition(CloseState s, CloseEvent e, const CloseContext& ctx);

// True once we may no longer send data (our D, C or A has gone out).
bool local_write_closed(CloseState s);
// True once the peer will send no more data (its D, C or A arrived).
bool peer_write_closed(CloseState s);

}  // namespace smcr
