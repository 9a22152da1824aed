// syscall(3): an application's raw system calls on descriptors. libuv (so
// Node.js, and everything else built on it) closes every descriptor with
// syscall(SYS_close, fd), to avoid close()'s cancellation point; past the
// shim, the number's SMC-R connection stayed in the table, and the next
// socket() that got the same number answered connect() with EISCONN from
// the dead connection. The calls the shim interposes are routed to their
// interposers; everything else goes to the kernel unchanged, and so do the
// descriptor calls on numbers the shim knows nothing of: a memory
// allocator reads its settings with syscall() while it holds its own locks
// (jemalloc, in varnishd), where the interposer must neither allocate nor
// resolve a libc symbol.
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/raw_syscall.h"
#include "core/sys.h"
#include "preload/interpose_internal.h"

using namespace smcr::preload::interpose;

namespace {

template <typename T>
T* ptr(long v) {
  return reinterpret_cast<T*>(v);
}

}  // namespace

extern "C" {
#pragma GCC visibility push(default)

// Not instrumented by ASan: the sixth argument is read from the caller's
// stack whether it passed one or not (as libc's own syscall() reads it),
// which ASan reports when an instrumented caller passed fewer.
__attribute__((no_sanitize("address"))) long syscall(long number, ...) {
  // Six arguments whatever the call takes, as libc's own syscall() reads its
  // registers and stack slot: the ones a call does not take are never used.
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (long& v : a) v = va_arg(ap, long);
  va_end(ap);
  const int fd = static_cast<int>(a[0]);
  if (!g_interposers_ready.load(std::memory_order_acquire)) [[unlikely]]
    return smcr::sys::raw_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
  switch (number) {
    // The calls on an existing descriptor: the shim's only where it knows
    // the number (a connection, a socket it follows, one of its own).
    case SYS_read:
    case SYS_write:
    case SYS_readv:
    case SYS_writev:
    case SYS_recvfrom:
    case SYS_sendto:
    case SYS_recvmsg:
    case SYS_sendmsg:
    case SYS_recvmmsg:
    case SYS_sendmmsg:
    case SYS_ioctl:
    case SYS_fcntl:
    case SYS_dup:
    case SYS_shutdown:
    case SYS_getsockname:
    case SYS_getpeername:
    case SYS_getsockopt:
    case SYS_setsockopt:
      if (!table_knows(fd) && !smcr::sys::is_own_fd(fd))
        return smcr::sys::raw_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
      break;
#ifdef SYS_dup2
    case SYS_dup2:
#endif
    case SYS_dup3: {
      // The target's too: a duplicate onto a connection's number closes it.
      const int target = static_cast<int>(a[1]);
      if (!table_knows(fd) && !smcr::sys::is_own_fd(fd) && !table_knows(target) && !smcr::sys::is_own_fd(target))
        return smcr::sys::raw_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
      break;
    }
    default:
      break;
  }
  switch (number) {
    case SYS_close:
      // The bare system call closes the number: no cancellation point.
      return close_number(fd, smcr::sys::close);
    case SYS_close_range:
      return close_range(static_cast<unsigned>(a[0]), static_cast<unsigned>(a[1]), static_cast<int>(a[2]));
    case SYS_dup:
      return dup(fd);
#ifdef SYS_dup2
    case SYS_dup2:
      return dup2(fd, static_cast<int>(a[1]));
#endif
    case SYS_dup3:
      return dup3(fd, static_cast<int>(a[1]), static_cast<int>(a[2]));
    case SYS_fcntl:
      return fcntl(fd, static_cast<int>(a[1]), a[2]);
    case SYS_ioctl:
      return ioctl(fd, static_cast<unsigned long>(a[1]), ptr<void>(a[2]));
    case SYS_read:
      return read(fd, ptr<void>(a[1]), static_cast<size_t>(a[2]));
    case SYS_write:
      return write(fd, ptr<const void>(a[1]), static_cast<size_t>(a[2]));
    case SYS_readv:
      return readv(fd, ptr<const iovec>(a[1]), static_cast<int>(a[2]));
    case SYS_writev:
      return writev(fd, ptr<const iovec>(a[1]), static_cast<int>(a[2]));
    case SYS_recvfrom:
      return recvfrom(fd, ptr<void>(a[1]), static_cast<size_t>(a[2]), static_cast<int>(a[3]), ptr<sockaddr>(a[4]),
                      ptr<socklen_t>(a[5]));
    case SYS_sendto:
      return sendto(fd, ptr<const void>(a[1]), static_cast<size_t>(a[2]), static_cast<int>(a[3]),
                    ptr<const sockaddr>(a[4]), static_cast<socklen_t>(a[5]));
    case SYS_recvmsg:
      return recvmsg(fd, ptr<msghdr>(a[1]), static_cast<int>(a[2]));
    case SYS_sendmsg:
      return sendmsg(fd, ptr<const msghdr>(a[1]), static_cast<int>(a[2]));
    case SYS_recvmmsg:
      return recvmmsg(fd, ptr<mmsghdr>(a[1]), static_cast<unsigned>(a[2]), static_cast<int>(a[3]),
                      ptr<timespec>(a[4]));
    case SYS_sendmmsg:
      return sendmmsg(fd, ptr<mmsghdr>(a[1]), static_cast<unsigned>(a[2]), static_cast<int>(a[3]));
    case SYS_socket:
      return socket(fd, static_cast<int>(a[1]), static_cast<int>(a[2]));
    case SYS_connect:
      return connect(fd, ptr<const sockaddr>(a[1]), static_cast<socklen_t>(a[2]));
    case SYS_listen:
      return listen(fd, static_cast<int>(a[1]));
#ifdef SYS_accept
    case SYS_accept:
      return accept(fd, ptr<sockaddr>(a[1]), ptr<socklen_t>(a[2]));
#endif
    case SYS_accept4:
      return accept4(fd, ptr<sockaddr>(a[1]), ptr<socklen_t>(a[2]), static_cast<int>(a[3]));
    case SYS_shutdown:
      return shutdown(fd, static_cast<int>(a[1]));
    case SYS_getsockname:
      return getsockname(fd, ptr<sockaddr>(a[1]), ptr<socklen_t>(a[2]));
    case SYS_getpeername:
      return getpeername(fd, ptr<sockaddr>(a[1]), ptr<socklen_t>(a[2]));
    case SYS_getsockopt:
      return getsockopt(fd, static_cast<int>(a[1]), static_cast<int>(a[2]), ptr<void>(a[3]), ptr<socklen_t>(a[4]));
    case SYS_setsockopt:
      return setsockopt(fd, static_cast<int>(a[1]), static_cast<int>(a[2]), ptr<const void>(a[3]),
                        static_cast<socklen_t>(a[4]));
    case SYS_epoll_ctl:
      return epoll_ctl(fd, static_cast<int>(a[1]), static_cast<int>(a[2]), ptr<epoll_event>(a[3]));
    default:
      return smcr::sys::raw_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
  }
}

#pragma GCC visibility pop
}  // extern "C"
