// The CLC handshake (RFC 7609 3.2, 3.5) over the connection's own TCP
// socket, client and server side, choosing the fabric. It ends in one of:
//   - SMC-R: a Connection ready to carry data;
//   - fallback: the TCP stream carries the application's bytes untouched
//     from here (a Decline was exchanged, or the peer is not speaking CLC);
//   - terminate: a protocol error or timeout where RFC 7609 C.5/C.6 ends
//     the TCP connection (the caller resets it).
#pragma once

#include <cstdint>

#include "core/log.h"

namespace smcr {

class Connection;

struct HandshakeOutcome {
  enum class Kind { kSmc, kFallback, kTerminate } kind = Kind::kFallback;
  Connection* conn = nullptr;
  Fallback reason = Fallback::kInternal;
  uint32_t diagnosis = 0;  // the Decline code sent or received
  int error = 0;           // errno for kTerminate
};

struct HandshakeConfig {
  int timeout_ms = 6000;        // CLC (Linux: 6 s)
  int llc_timeout_ms = 5000;    // first-contact CONFIRM LINK (Linux: 5 s)
  uint32_t rmb_size = 256 * 1024;
};
// From SMCR_CLC_TIMEOUT_MS, SMCR_RMB_SIZE (validated; logged when ignored).
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
};

HandshakeOutcome clc_client(int tcp_fd, const HandshakeRequest& req = {});
HandshakeOutcome clc_server(int tcp_fd, const HandshakeRequest& req = {});

// The RMB size for a request: its own, else the configured one.
uint32_t rmb_size_for(const HandshakeRequest& req);

}  // namespace smcr
