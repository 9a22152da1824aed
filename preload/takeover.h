// How an fd number becomes SMC-R (docs/ARCHITECTURE.md, "How a TCP socket
// becomes SMC-R"): what is reserved before the CLC handshake commits, how
// the readiness socket takes the number over, and the deferred accept: a
// server's accept() that returns once its Accept is sent, the client's
// Confirm being read off the application's thread.
#pragma once

#include <sys/uio.h>

#include <climits>

#include "core/connection.h"
#include "core/handshake.h"
#include "preload/fd_table.h"

namespace smcr::preload {

FdTable& fd_table();

// What taking over an fd needs, reserved before the CLC handshake commits to
// SMC-R: the readiness socketpair and a second number for the TCP socket.
// Without them (EMFILE) we Decline up front and stay on TCP.
struct Reserved {
  int app_end = -1, engine_end = -1, tcp = -1;
  bool ok() const { return tcp >= 0; }
  void release();
};
Reserved reserve(int fd);

// Replaces the TCP socket at `fd` with the readiness socket of `c`; the TCP
// socket lives on at the reserved number (it still carries FIN/RST).
// `accept_flags`: accept4()'s SOCK_NONBLOCK/SOCK_CLOEXEC when `fd` was just
// accepted (the application has not seen it: its flags are those), else -1.
// False (errno set) when the number could not be taken: `c` is closed
// abortively, and the TCP socket still at `fd` is the caller's to reset.
bool install(int fd, Connection* c, const Reserved& r, int accept_flags = -1);

// --- deferred accept (HandshakeRequest::may_defer_confirm)

// SMCR_DEFER_CONFIRM (default 1): whether accept() may return before the
// client's Confirm has arrived.
bool defer_confirm_enabled();

// accept() got kPending for `fd`: the readiness socket takes the number now
// (not readable, not writable), and the handshake finishes when the Confirm
// arrives: on the engine thread, or on an application thread that needs
// the connection first (await_accepting). `sndbuf`: Connection::set_send_limit.
// `accept_flags`: accept4()'s, as install()'s.
void start_accepting(int fd, PendingConfirm* handshake, const Reserved& r, uint32_t sndbuf, int accept_flags);

// accept() found the client silent through the CLC spin (client_spoke()
// false): the readiness socket takes `fd` now and the whole server
// handshake runs on a thread of its own. A fallback to TCP then relays
// between the TCP socket and the readiness socket, which becomes a plain
// byte stream. False (nothing done) when too many such handshakes run.
bool start_accepting_threaded(int fd, const Reserved& r, const HandshakeRequest& req, uint32_t sndbuf,
                              int accept_flags);

// connect() sent its Proposal and the server's application has not called
// accept() yet (HandshakeOutcome::kPendingClient): the readiness socket
// takes `fd` now (not readable, not writable) and the rest of the client
// handshake runs on a thread of its own, so that connect() returns as
// TCP's does; the connection is installed (and POLLOUT given) when the
// server answers, or relayed over TCP after a Decline. `short_flow`: the
// destination's key (core/short_flows.h), or 0. False (nothing done) when
// too many handshakes run on threads: the caller finishes it inline.
bool start_connecting_threaded(int fd, const Reserved& r, ClientContinuation* handshake, uint32_t sndbuf,
                               uint32_t short_flow);

// The TCP socket behind a relayed accept (above), or -1: addresses and
// socket options are its.
int relayed_tcp_fd(int fd);
// Whether `fd`'s handshake still runs. Once it has ended (installed,
// relayed or failed) the number's readiness socket has been made writable
// or hung up, so a select() or poll() may have woken: a second connect()
// must then say connected, never EALREADY.
bool accepting_in_progress(int fd);
// The TCP socket behind `fd` while its handshake runs or after it fell
// back to a relay (-1 otherwise): addresses and options are its, without
// waiting for the handshake.
int accepting_tcp_fd(int fd);

// A call on a number of kind kFdAccepting with no connection in the table.
// io_flags < 0 (kNotIo): not a data call; waits for the handshake's end,
// whatever O_NONBLOCK says. io_flags >= 0: a data call with these MSG_*
// flags; a non-blocking read does not wait, a non-blocking write (`write`)
// waits up to kNonblockingWriteWaitMs: a fresh TCP socket takes a first
// write at once (server-first protocols greet right after accept()), and
// the handshake's end is normally a matter of microseconds. Returns the
// referenced connection, or null: then *refused_errno is the call's errno
// (EAGAIN, or ECONNRESET once after a failed handshake), or 0 for "do the
// call on the socket at the number" (the handshake failed and its error
// was reported).
// A write on a number whose connect() handshake runs on a thread
// (start_connecting_threaded): as a TCP socket takes bytes once connect()
// has returned, up to kEarlyWriteMax bytes (the smallest RMBE RFC 7609
// allows, so they fit the new connection's first window; less under a
// smaller SO_SNDBUF) are kept and sent first when the handshake ends, over
// SMC-R or, after a fallback, over TCP. True with *result set when the
// call was answered here (bytes taken, or EAGAIN for a non-blocking one
// when the buffer is full: POLLOUT drops until the end); false for the
// usual path (a blocking write that does not fit waits there for the end).
inline constexpr size_t kEarlyWriteMax = 16384;
bool accepting_write(int fd, const iovec* iov, int iovcnt, int flags, ssize_t* result);
// shutdown(SHUT_WR) on such a number: done at the handshake's end, after
// the early bytes; true when taken here (it then returns 0 at once, as
// TCP's). Other `how`s wait for the end as before.
bool accepting_shutdown(int fd, int how);

constexpr int kNotIo = INT_MIN;
constexpr int kNonblockingWriteWaitMs = 20;
Connection* await_accepting(int fd, int io_flags, int* refused_errno, bool write = false);

// What a successful SO_RCVBUF/SO_SNDBUF(FORCE) gave `fd`: the kernel stores
// twice the granted size (after its rmem_max/wmem_max clamp) and reports that.
uint32_t granted_buffer(int fd, int name);

// setsockopt on a number still accepting (or relayed, or failed): set on
// its TCP socket with the handshake held, so that the handshake's end
// either comes first (false: the caller sets it on the connection) or
// reads the option back (linger, timeouts, OOBINLINE); SO_SNDBUF also caps
// the connection's send window. True with *rc set when it was done here.
bool accepting_setsockopt(int fd, int level, int name, const void* val, socklen_t len,
                          int (*real)(int, int, int, const void*, socklen_t), int* rc);

// close(), or dup2/dup3 onto it: true when `fd` was still accepting (the
// handshake is abandoned or its connection closed when it ends) and
// `close_number` has been called for it under the same lock.
bool close_accepting(int fd, int (*close_number)(int));

// fork() and exec: waits until no accept of this process is still waiting
// for its Confirm (a child could not finish them).
void settle_all_accepting();

// At process exit: the application's bytes already written to relayed
// connections still reach their peers, as the kernel sends a TCP socket's
// queued bytes after its process exits (the relay threads would otherwise
// die with it). Ends what the application still holds as if closed, then
// waits for the relays to finish sending, at most `timeout_ms`.
void flush_relays_at_exit(int timeout_ms);

}  // namespace smcr::preload
