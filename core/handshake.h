// The CLC handshake (RFC 7609 3.2, 3.5) over the connection's own TCP
// socket, client and server side, choosing the fabric. It ends in one of:
//   - SMC-R: a Connection ready to carry data;
//   - fallback: the TCP stream carries the application's bytes untouched
//     from here (a Decline was exchanged, or the peer is not speaking CLC);
//   - terminate: a protocol error or timeout where RFC 7609 C.5/C.6 ends
//     the TCP connection (the caller resets it).
#pragma once

#include <sys/socket.h>

#include <cstdint>

#include "core/log.h"
#include "core/spin_backoff.h"

namespace smcr {

class Connection;

class PendingConfirm;
struct ClientContinuation;

struct HandshakeOutcome {
  // kPending (server, only when HandshakeRequest::may_defer_confirm): the
  // Accept is sent; `pending` finishes the handshake (finish_confirm).
  // kPendingClient (client, only when HandshakeRequest::answer_wait_ms >= 0):
  // the Proposal is sent and the server has not answered yet (its
  // application has not called accept()); `client_pending` finishes the
  // handshake (clc_client_finish).
  enum class Kind { kSmc, kFallback, kTerminate, kPending, kPendingClient } kind = Kind::kFallback;
  Connection* conn = nullptr;
  PendingConfirm* pending = nullptr;
  ClientContinuation* client_pending = nullptr;
  Fallback reason = Fallback::kInternal;
  uint32_t diagnosis = 0;  // the Decline code sent or received
  int error = 0;           // errno for kTerminate
};

struct HandshakeConfig {
  int timeout_ms = 6000;        // CLC (Linux: 6 s)
  int llc_timeout_ms = 5000;    // first-contact CONFIRM LINK (Linux: 5 s)
  uint32_t rmb_size = 256 * 1024;
  // Set by SMCR_RMB_SIZE: every connection gets rmb_size, however many.
  bool rmb_size_fixed = false;
  // Bytes our RMBs should fit in at rmb_size each; beyond, a new
  // connection's RMB is smaller (rmb::size_under_budget). SMCR_RMB_BUDGET_MB,
  // 0: no budget.
  size_t rmb_budget = size_t{32} << 20;
};
// From SMCR_CLC_TIMEOUT_MS, SMCR_RMB_SIZE, SMCR_RMB_BUDGET_MB (validated;
// logged when ignored).
const HandshakeConfig& handshake_config();

struct HandshakeRequest {
  // false: the caller could not reserve what an SMC-R connection needs (e.g.
  // fds); we Decline at once instead of committing (RFC C.1 allows a Decline
  // in place of any expected message) and both ends stay on TCP.
  bool have_resources = true;
  // Server only. false: the operator's policy keeps this peer on TCP; the
  // server answers the Proposal with a Decline.
  bool allowed = true;
  // Our RMB's size in bytes, rounded up to an RFC size (16 KiB..512 KiB), as
  // the application's SO_RCVBUF asked; 0: SMCR_RMB_SIZE or the default.
  uint32_t rmb_size = 0;
  // Server only. true: on a subsequent contact, return kPending once the
  // Accept is sent instead of waiting for the client's Confirm, so that
  // accept() does not hold the application for a round trip through the
  // client. Whoever finishes it can no longer fall back to TCP (the
  // application holds the readiness socket): a Confirm that does not come,
  // or a Decline in its place, ends in kTerminate.
  bool may_defer_confirm = false;
  // Client only. >= 0: once the Proposal is sent, wait this long for the
  // server's first answer, then return kPendingClient instead of waiting
  // for a server whose application has not called accept() yet (the server
  // half of the CLC runs in accept()); < 0: wait inline.
  int answer_wait_us = -1;
  // Client only: the address connect() was given (family 0: unknown), which
  // spares asking the kernel for the peer's (a system call per connection).
  sockaddr_storage peer{};
  // The engine end of the readiness socket the connection will have (-1:
  // none yet). On the shm fabric it is named in our RMB's control page
  // before our Accept or Confirm, so that the peer can fetch it for its
  // first wake-up of us (core/peer_fd.h) instead of waiting for it on the
  // link.
  int bell_fd = -1;
};

HandshakeOutcome clc_client(int tcp_fd, const HandshakeRequest& req = {});
HandshakeOutcome clc_server(int tcp_fd, const HandshakeRequest& req = {});
// Finishes a client handshake that returned kPendingClient (blocking, on any
// thread): the server's answer may come as late as its application calls
// accept(), within SMCR_CLC_ANSWER_WAIT_MS (default 300 s) while the TCP
// connection lives; from the answer on, the usual CLC deadline. `p` is gone.
HandshakeOutcome clc_client_finish(int tcp_fd, ClientContinuation* p);

// A deferred Confirm (HandshakeOutcome::kPending). Never blocks: reads the
// Confirm if the whole of it is queued on `tcp_fd` (the connection's TCP
// socket, wherever it sits now). Returns false while it is not and `now_ms`
// is before the CLC deadline; otherwise true with *out kSmc, kTerminate, or
// kFallback where the client declined the Accept (RFC 7609 C.3: both go on
// over TCP), and `p` is gone. One caller at a time.
bool finish_confirm(PendingConfirm* p, int tcp_fd, int64_t now_ms, HandshakeOutcome* out);
// The CLC deadline (sys::now_ms() clock) of a deferred Confirm.
int64_t confirm_deadline(const PendingConfirm* p);

// Server, before clc_server(): watches `tcp_fd` through the CLC spin
// (SMCR_CLC_SPIN_US) for the client's first bytes (or its end of stream);
// the client after its Proposal watches for the server's the same way.
// False when none came: a slow or hostile client, whose handshake the
// caller may run off the application's thread.
// `backoff`: skip the spin after spins that saw nothing (a wait that sleeps
// anyway); null: always spin (a decision taken on what the spin saw).
bool client_spoke(int tcp_fd, SpinBackoff* backoff = nullptr);

// Server, before clc_server(): whether the whole handshake may run in the
// application's accept() without waiting on the client more than a round
// trip. Watches `tcp_fd` through the CLC spin. True when the client's
// first message has come whole and is a Proposal for a live link group of
// ours (a subsequent contact: its Confirm is deferred), or is anything that
// ends the handshake at once (not CLC, not a Proposal, malformed, no fabric
// for it, end of stream). False for a client silent or only partly heard
// (slow, or hostile), and for a first contact, which waits for the client's
// Confirm and its CONFIRM LINK reply: the caller runs those off the
// application's thread, where a stalled client delays nobody else.
bool server_may_run_inline(int tcp_fd);

// A client that gave SMC-R up after its SYN carried the option (a
// non-blocking connect() whose TCP handshake outlasted the wait): a Decline
// in place of its Proposal (RFC 7609 C.1), so that the server falls back at
// once instead of waiting for the Proposal. Non-blocking, on a connection
// with nothing sent yet; false if it could not be sent whole.
bool decline_instead_of_proposal(int tcp_fd);

// The RMB size for a request: its own, else the configured one.
uint32_t rmb_size_for(const HandshakeRequest& req);

}  // namespace smcr
