// A non-blocking connect() whose TCP handshake outlasts a short wait.
//
// connect() finishes the TCP handshake of an opted-in socket itself, so
// that the fd is SMC-R or TCP before the application uses it. For a
// non-blocking connect() that wait is bounded by kWaitMs: an event loop
// connecting to a slow or unreachable host must not stop for the CLC
// timeout. Past it, connect() returns EINPROGRESS as TCP's does and the
// connection stays plain TCP. Its SYN did carry the option, though: if the
// SYN-ACK carries it too, the server waits for a Proposal (and a server
// that speaks first would wait until its CLC deadline). So a Decline goes
// in the Proposal's place (RFC 7609 C.1) as soon as the handshake
// completes: sent by the engine thread, which watches the socket, or by
// the application's first call on the fd, whichever comes first, and
// always before any byte of the application's.
#pragma once

namespace smcr::preload::late {

inline constexpr int kWaitMs = 100;

// connect(fd) returns EINPROGRESS now; its SYN carried the option.
void start(int fd);
// An application call on `fd` (kFdLateConnect): the Decline first, if owed.
void settle(int fd);
// `fd` is being closed or replaced (dup2). Cheap when nothing is pending.
void forget(int fd);

}  // namespace smcr::preload::late
