// What the shim's interposer files share (preload/interpose*.cc), and
// nothing outside them includes. Everything here is compiled hidden; only
// the extern "C" entry points each file defines under
// `#pragma GCC visibility push(default)` are exported (preload/exports.map).
//
//   interpose.cc              the shared state below, load (resolve_all) and
//                             unload (at_exit) of the library
//   interpose_connect.cc      socket, connect, listen, accept*, close,
//                             shutdown; the CLC after the TCP handshake
//   interpose_data.cc         read/write, recv*/send*, readv/writev, the
//                             fortified __*_chk reads, sendfile, splice,
//                             recvmmsg/sendmmsg
//   interpose_options.cc      fcntl, ioctl, set/getsockopt, getsockname,
//                             getpeername, dup*, close_range, closefrom
//   interpose_process.cc      exec*, fork, posix_spawn*, system, popen, _exit
//   interpose_wait.cc         epoll_*, poll, ppoll, select, pselect (and the
//                             fortified poll forms)
//   interpose_stdio.cc        fdopen streams, the dprintf family
#pragma once

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>

#include "core/connection.h"
#include "core/sys.h"
#include "preload/exec_inherit.h"
#include "preload/fd_table.h"
#include "preload/late_connect.h"
#include "preload/takeover.h"

// glibc's _FORTIFY_SOURCE failure (the __*_chk entry points).
extern "C" void __chk_fail(void) __attribute__((__noreturn__));

namespace smcr::preload::interpose {

using smcr::Connection;
using smcr::preload::FdTable;
using smcr::preload::fd_table;
using smcr::preload::install;
using smcr::preload::kNotIo;
using smcr::preload::Reserved;

template <typename F>
F resolve(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p) {
    static const char msg[] = "smcr: cannot resolve libc symbol\n";
    smcr::sys::write(2, msg, sizeof msg - 1);
    abort();
  }
  return reinterpret_cast<F>(p);
}

// libc's own entry points, resolved once at load time (a constructor) so that
// no interposed call made later, e.g. from a signal handler, runs dlsym or a
// static-initialisation guard. A call that arrives before the constructor
// (another library's constructor) resolves lazily.
#define SMCR_INTERPOSED(X)                                                                     \
  X(socket) X(connect) X(listen) X(accept4) X(close) X(shutdown) X(read) X(write) X(readv)      \
  X(writev) X(recv) X(send) X(recvfrom) X(sendto) X(recvmsg) X(sendmsg) X(fcntl) X(ioctl)      \
  X(setsockopt) X(getsockopt) X(getsockname) X(getpeername) X(dup) X(dup3) X(sendfile) X(splice)      \
  X(recvmmsg) X(sendmmsg) X(execve) X(execvpe) X(fexecve) X(epoll_ctl) X(epoll_pwait) \
  X(poll) X(ppoll) X(select) X(pselect) X(fdopen) X(vdprintf) X(fork) X(posix_spawn) X(posix_spawnp) \
  X(system) X(popen) X(posix_spawn_file_actions_init) X(posix_spawn_file_actions_destroy)       \
  X(posix_spawn_file_actions_adddup2)

// libc marks some of these with attributes (nonnull, warn_unused_result) that
// do not belong to the pointer type; that is fine here.
#pragma GCC diagnostic ignored "-Wignored-attributes"
struct RealFunctions {
#define SMCR_DECLARE(name) std::atomic<decltype(&::name)> name{nullptr};
  SMCR_INTERPOSED(SMCR_DECLARE)
#undef SMCR_DECLARE
};
extern RealFunctions g_real;  // interpose.cc

template <typename F>
F real_function(std::atomic<F>& slot, const char* name) {
  F f = slot.load(std::memory_order_relaxed);
  if (!f) {
    f = resolve<F>(name);
    slot.store(f, std::memory_order_relaxed);
  }
  return f;
}

#define REAL(name) const auto real_##name = real_function(g_real.name, #name)

// Set when the library's constructor has resolved libc's entry points and
// made the fd table: before, an application's syscall() goes straight to the
// kernel (a memory allocator's own start-up reads files with syscall():
// jemalloc's, under varnishd, deadlocked in the interposer's first dlsym).
extern std::atomic<bool> g_interposers_ready;

// This process's pid, kept across fork() (interpose.cc).
extern std::atomic<pid_t> g_own_pid;
// A vfork() child leaves the fd table alone; asked only where the table
// knows the numbers (interpose.cc).
bool in_vfork_child();
bool table_knows(int fd);

// A number the shim holds for itself (sys::is_own_fd: the TCP socket behind
// an SMC-R fd, readiness ends, links, map descriptors) was never the
// application's: its close(), fcntl(), dup(), epoll_ctl() and socket calls
// (connect, listen, accept, shutdown, ioctl, get/setsockopt, getsockname,
// getpeername) there get EBADF, as without the shim, instead of closing or
// reaching ours (a daemon's close loop, a test's "surely unused" number, a
// scan for inherited sockets).
inline bool refuse_own_fd(int fd) {
  if (!smcr::sys::is_own_fd(fd)) [[likely]]
    return false;
  errno = EBADF;
  return true;
}

// What the shim follows about a number the application is about to lose
// (close(), or dup2/dup3 onto it): its epoll registrations, an own
// listener's, a late connect's, an inherited pair's.
void forget_number(int fd);
// The application's close(fd), with `real_close` for the number itself:
// libc's close() for close(), the bare system call for syscall(SYS_close),
// which is not a cancellation point (interpose_connect.cc).
int close_number(int fd, int (*real_close)(int));
// The kernel has just handed out `fd` (socket(), accept()): anything the
// table still kept for that number was closed where the shim could not see
// it (a raw system call, io_uring). Its connection ends as on close(), the
// number itself left alone.
void forget_stale_number(int fd);

// SMCR_ENABLE is not 0.
bool enabled();

// The fd whose client handshake this thread runs inside connect() (-1).
extern thread_local constinit int t_inline_clc_fd;
// Waits while another thread's connect() runs `fd`'s client CLC inline
// (interpose.cc).
void await_inline_clc(int fd);

// Holds a referenced connection for the duration of one call. A connection
// inherited from the parent and handed over to us (core/handoff.h) is none:
// the descriptor is a plain stream socket now.
// `io_flags`: a data call's MSG_* flags (smcr::preload::await_accepting);
// such a call returns -1 at once when refuse() says so.
struct ConnRef {
  Connection* c;
  int refused = 0;
  // `claim`: a call that uses the connection's stream (every data call:
  // io_flags given) claims an inherited connection its owner has let go
  // of, and waits for it (core/handoff.h); others leave it where it is.
  int outer_number = smcr::t_app_number;
  explicit ConnRef(int fd, int io_flags = kNotIo, bool claim = false, bool write = false) : c(fd_table().get(fd)) {
    smcr::t_app_number = fd;
    if (!c) {
      uint8_t kind = fd_table().kind(fd);
      if (kind == smcr::preload::kFdTcp && (fd_table().flags(fd) & smcr::preload::kFdClcInline)) {
        await_inline_clc(fd);
        c = fd_table().get(fd);
        kind = fd_table().kind(fd);
      }
      if (!c && kind == smcr::preload::kFdAccepting)
        c = smcr::preload::await_accepting(fd, io_flags, &refused, write);
      else if (!c && kind == smcr::preload::kFdLateConnect) smcr::preload::late::settle(fd);
      else if (!c && kind == smcr::preload::kFdTakePending) {
        smcr::preload::exec_inherit::settle_pending(fd);
        c = fd_table().get(fd);
      }
    }
    if (c && (claim || io_flags != kNotIo) && c->relaying_in_place()) {
      // Ours, relayed in place for another process: the number is the
      // relay's stream for a data call (its readiness bytes drained
      // first); the others answer as before (the addresses are the TCP
      // socket's).
      c->await_relay_stream();
      c->unref();
      c = nullptr;
    } else if (c && c->foreign()) {
      bool uses_stream = claim || io_flags != kNotIo;
      // Handed over (a stream now), or not ours and not claimed: the call
      // acts on the descriptor as the kernel sees it. A data call keeps a
      // connection it could not claim, and fails as such (EOPNOTSUPP).
      if (c->handed_over(uses_stream) || (!uses_stream && c->foreign())) {
        c->unref();
        c = nullptr;
      }
    }
  }
  ~ConnRef() {
    if (c) c->unref();
    smcr::t_app_number = outer_number;
  }
  explicit operator bool() const { return c != nullptr; }
  Connection* operator->() const { return c; }
  bool refuse() const {
    if (!refused) return false;
    errno = refused;
    return true;
  }
};

// A write on a number whose connect() handshake still runs on a thread
// (smcr::preload::accepting_write): true with *result when answered there.
// Any other number: two table loads.
inline bool early_write(int fd, const struct iovec* iov, int iovcnt, int flags, ssize_t* result) {
  if (fd_table().kind(fd) != smcr::preload::kFdAccepting || fd_table().has_conn(fd)) return false;
  return smcr::preload::accepting_write(fd, iov, iovcnt, flags, result);
}

// What a duplicate of `fd` refers to: its connection, also one inherited
// from the parent, handed over or not (the duplicate stays one of its
// descriptors: an exec inherits it with its TCP socket, preload/
// exec_inherit.h, or waits for its relay), else what ConnRef finds.
struct DupRef : ConnRef {
  explicit DupRef(int fd) : ConnRef(fd) {
    if (!c && fd_table().has_conn(fd)) c = fd_table().get(fd);
  }
};

// Flushes the stdio streams made on SMC-R connections (interpose_stdio.cc),
// from the library's destructor.
void flush_socket_streams_at_exit();

}  // namespace smcr::preload::interpose
