// The shim's calls on socket options and descriptors: fcntl, ioctl,
// setsockopt/getsockopt, getsockname/getpeername, dup/dup2/dup3,
// close_range/closefrom. An SMC-R connection answers for what it keeps
// itself (non-blocking mode, buffers, timeouts, TCP_NODELAY/TCP_CORK), the
// rest is its TCP socket's; a duplicate is one more descriptor of it.

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/connection.h"
#include "core/log.h"
#include "core/sys.h"
#include "preload/epoll.h"
#include "preload/exec_inherit.h"
#include "preload/fd_table.h"
#include "preload/interpose_internal.h"
#include "preload/late_connect.h"
#include "preload/own_listeners.h"
#include "preload/takeover.h"

// The helpers every interposer file shares (interpose_internal.h).
using namespace smcr::preload::interpose;

namespace {

// `fd`, a duplicate just made, is one more descriptor of `c` (dup, dup3,
// F_DUPFD): the table takes a reference of its own.
void share_connection(int fd, Connection* c) {
  c->ref();
  c->add_user_fd();
  if (Connection* old = fd_table().set(fd, c)) old->unref();
}

// `to`, a duplicate just made of `from` (no connection there), names the
// same socket: what the table knows of it goes with it. Without its kind a
// TCP socket connected through the duplicate never tried SMC-R.
void copy_fd_entry(int from, int to) {
  fd_table().set_kind(to, fd_table().kind(from));
  fd_table().set_buffers(to, fd_table().buffers(from));
  fd_table().add_flags(to, fd_table().flags(from) & smcr::preload::kFdDefaultOptions);
}

// The TCP socket of a connection this process inherited from its parent
// (fork), or -1.
int inherited_tcp_fd(int fd) {
  if (fd_table().kind(fd) == smcr::preload::kFdTakePending) smcr::preload::exec_inherit::settle_pending(fd);
  if (!fd_table().has_conn(fd)) {  // or an accept relayed after a late fallback, or inherited across exec
    uint8_t kind = fd_table().kind(fd);
    if (kind == smcr::preload::kFdAccepting) return smcr::preload::accepting_tcp_fd(fd);
    return kind == smcr::preload::kFdExecInherited ? smcr::preload::exec_inherit::tcp_fd(fd) : -1;
  }
  Connection* c = fd_table().get(fd);
  if (!c) return -1;
  int tcp = c->foreign() ? c->tcp_fd() : -1;
  c->unref();
  return tcp;
}

// TCP options kept with an SMC-R connection instead of set on its TCP
// socket (Connection::tcp_flag).
bool is_kept_tcp_flag(int level, int name) { return level == IPPROTO_TCP && (name == TCP_CORK || name == TCP_NODELAY); }

bool is_buffer_option(int name) {
  return name == SO_RCVBUF || name == SO_RCVBUFFORCE || name == SO_SNDBUF || name == SO_SNDBUFFORCE;
}

using CloseRangeFn = int (*)(unsigned int, unsigned int, int);

int raw_close_range(unsigned int first, unsigned int last, int flags) {
  return static_cast<int>(smcr::sys::raw_syscall(SYS_close_range, first, last, flags));
}

CloseRangeFn real_close_range() {
  static std::atomic<CloseRangeFn> slot{nullptr};
  CloseRangeFn f = slot.load(std::memory_order_relaxed);
  if (!f) {  // glibc 2.34+: looked up when first called
    f = reinterpret_cast<CloseRangeFn>(dlsym(RTLD_NEXT, "close_range"));
    if (!f) f = raw_close_range;
    slot.store(f, std::memory_order_relaxed);
  }
  return f;
}

// close_range(first, last, 0) as the application means it: its SMC-R
// connections (and whatever else the shim follows by number) are closed
// through close(), so that the peer sees the end; the shim's own
// descriptors stay open: those in the hidden upper half are left out
// (the range is clamped below it), those below (sys::is_own_fd) are
// skipped; the rest goes to the kernel in runs.
//
// Not in a vfork()ed child (CPython's subprocess, for one, calls
// close_range there): it shares our memory, so closing through close()
// would end the parent's connections; the kernel's close_range closes only
// the child's copies, as it did before the shim. Such a child ran no
// pthread_atfork handler, so its pid is not the one recorded.
std::atomic<pid_t> g_pid{getpid()};
[[maybe_unused]] const int g_pid_atfork = pthread_atfork(nullptr, nullptr, [] { g_pid.store(getpid()); });

// Without a hidden range the shim's own descriptors sit among the
// application's; looked for up to at least this number even where the
// limit was lowered after they were made.
constexpr rlim_t kOwnLowFdScan = 1 << 16;

int close_fd_range(unsigned int first, unsigned int last, int flags) {
  CloseRangeFn real = real_close_range();
  if (getpid() != g_pid.load(std::memory_order_relaxed)) return real(first, last, flags);
  int base = smcr::sys::hidden_fd_base();
  unsigned int top = last;
  if (base > 0) {
    if (first >= static_cast<unsigned int>(base)) return 0;  // only the shim's own up there
    top = std::min(last, static_cast<unsigned int>(base) - 1);
  }
  // Looked at one by one up to here; with no hidden range, anything above
  // the descriptor limit goes to the kernel in one piece.
  unsigned int scan_top = top;
  if (base == 0) {
    rlimit rl{};
    rlim_t lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    lim = std::max<rlim_t>(lim, kOwnLowFdScan);
    if (lim > static_cast<rlim_t>(FdTable::kMaxFd)) lim = FdTable::kMaxFd;
    scan_top = std::min<unsigned int>(top, static_cast<unsigned int>(lim) - 1);
  }
  int rc = 0, saved = 0;
  long run = -1;
  auto flush = [&](unsigned int end) {
    if (run < 0) return;
    if (real(static_cast<unsigned int>(run), end, flags) != 0 && rc == 0) {
      rc = -1;
      saved = errno;
    }
    run = -1;
  };
  for (unsigned int fd = first; fd <= scan_top; ++fd) {
    int n = static_cast<int>(fd);
    if (smcr::sys::is_own_fd(n)) {
      flush(fd - 1);
    } else if (fd_table().has_conn(n) || fd_table().kind(n) != smcr::preload::kFdUnknown) {
      flush(fd - 1);
      close(n);
    } else {
      smcr::preload::epoll_forget_fd(n);
      smcr::preload::own::forget(n);
      smcr::preload::late::forget(n);
      if (run < 0) run = fd;
    }
    if (fd == scan_top) break;  // no wrap at UINT_MAX
  }
  flush(scan_top);
  if (scan_top < top && real(scan_top + 1, top, flags) != 0 && rc == 0) {
    rc = -1;
    saved = errno;
  }
  if (rc) errno = saved;
  return rc;
}

}  // namespace

extern "C" {
// The interposed libc entry points: the only symbols the shim exports
// (preload/exports.map; everything else is compiled hidden).
#pragma GCC visibility push(default)

int fcntl(int fd, int cmd, ...) {
  REAL(fcntl);
  if (refuse_own_fd(fd)) return -1;
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  // The status and descriptor flags of a number whose handshake still runs
  // are the readiness socket's (the connection takes O_NONBLOCK from it
  // when it is installed): no reason to wait for a server's accept().
  if (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC && !fd_table().has_conn(fd) &&
      fd_table().kind(fd) == smcr::preload::kFdAccepting) {
    int rc = real_fcntl(fd, cmd, arg);
    // The handshake may have installed the connection meanwhile, having
    // read the flags before this change: squid's O_NONBLOCK, set right
    // after accept() while the Confirm arrived, was lost, and its next
    // read blocked the whole server. (The installer reads them once more
    // after it; see conclude_locked.)
    if (rc == 0 && cmd == F_SETFL)
      if (Connection* c = fd_table().get(fd)) {  // not ConnRef: that would wait for the handshake
        c->set_nonblocking(reinterpret_cast<intptr_t>(arg) & O_NONBLOCK);
        c->unref();
      }
    return rc;
  }
  if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
    if (table_knows(fd) && in_vfork_child()) return real_fcntl(fd, cmd, arg);
    DupRef c(fd);
    int rc = real_fcntl(fd, cmd, arg);
    if (rc < 0) return rc;
    if (c) share_connection(rc, c.c);
    else copy_fd_entry(fd, rc);
    smcr::preload::epoll_fd_duplicated(fd);
    smcr::preload::exec_inherit::duplicated(fd, rc);
    return rc;
  }
  ConnRef c(fd);
  if (!c) return real_fcntl(fd, cmd, arg);
  int rc = real_fcntl(fd, cmd, arg);
  if (rc < 0) return rc;
  if (cmd == F_SETFL) c->set_nonblocking(reinterpret_cast<intptr_t>(arg) & O_NONBLOCK);
  // Signal-driven I/O waits for readiness without asking epoll.
  if (cmd == F_SETFL && (reinterpret_cast<intptr_t>(arg) & O_ASYNC)) c->forbid_deferral();
  return rc;
}

// Programs built with _FILE_OFFSET_BITS=64 (redis, nginx and most of Debian)
// call fcntl64; without this their O_NONBLOCK never reached the connection.
// On 64-bit systems the two take the same arguments.
int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return fcntl(fd, cmd, arg);
}

int ioctl(int fd, unsigned long req, ...) {
  REAL(ioctl);
  if (refuse_own_fd(fd)) return -1;
  va_list ap;
  va_start(ap, req);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  ConnRef c(fd);
  if (!c) return real_ioctl(fd, req, arg);
  switch (req) {
    // Properties of the descriptor or its file, not of the TCP connection:
    // they belong to the fd number the application holds.
    case FIOCLEX:
    case FIONCLEX:
    case FIOASYNC:
    case FIOSETOWN:
    case FIOGETOWN:
    case SIOCSPGRP:
    case SIOCGPGRP:
      return real_ioctl(fd, req, arg);
    case FIONBIO: {
      int rc = real_ioctl(fd, req, arg);
      if (rc == 0 && arg) c->set_nonblocking(*static_cast<int*>(arg) != 0);
      return rc;
    }
    case FIONREAD:  // == SIOCINQ
      if (!arg) {
        errno = EFAULT;
        return -1;
      }
      *static_cast<int*>(arg) = static_cast<int>(c->bytes_readable());
      return 0;
    case SIOCATMARK:
      if (!arg) {
        errno = EFAULT;
        return -1;
      }
      *static_cast<int*>(arg) = c->at_urgent_mark() ? 1 : 0;
      return 0;
    case SIOCOUTQ:
    case SIOCOUTQNSD:
      if (!arg) {
        errno = EFAULT;
        return -1;
      }
      *static_cast<int*>(arg) = static_cast<int>(c->bytes_unsent());
      return 0;
    default:
      return real_ioctl(c->tcp_fd(), req, arg);
  }
}

int setsockopt(int fd, int level, int name, const void* val, socklen_t len) {
  REAL(setsockopt);
  if (refuse_own_fd(fd)) return -1;
  if (level == SOL_SOCKET && (name == SO_LINGER || name == SO_OOBINLINE || name == SO_RCVTIMEO || name == SO_SNDTIMEO ||
                              name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_NEW))
    fd_table().clear_flags(fd, smcr::preload::kFdDefaultOptions);
  // Still accepting (or relayed): options are the TCP socket's, set with
  // the handshake held (a linger set while it ends would otherwise be lost).
  if (int rc; fd_table().kind(fd) == smcr::preload::kFdAccepting && !fd_table().has_conn(fd) &&
              smcr::preload::accepting_setsockopt(fd, level, name, val, len, real_setsockopt, &rc))
    return rc;
  // Inherited from the parent (handed over or not): options are the TCP
  // socket's (TCP_NODELAY on the relayed stream socket would fail).
  if (int tcp = inherited_tcp_fd(fd); tcp >= 0) return real_setsockopt(tcp, level, name, val, len);
  ConnRef c(fd);
  if (!c) {
    int rc = real_setsockopt(fd, level, name, val, len);
    if (rc == 0 && level == SOL_SOCKET && is_buffer_option(name) && fd_table().kind(fd) != smcr::preload::kFdUnknown) {
      // Before the connection exists: SO_RCVBUF sizes its RMB, SO_SNDBUF
      // caps its send window (what the kernel granted, not what was asked).
      smcr::preload::FdTable::BufferRequest b = fd_table().buffers(fd);
      (name == SO_RCVBUF || name == SO_RCVBUFFORCE ? b.rcvbuf : b.sndbuf) = smcr::preload::granted_buffer(fd, name);
      fd_table().set_buffers(fd, b);
    }
    return rc;
  }
  if (is_kept_tcp_flag(level, name) && val && len >= sizeof(int)) {
    int v;
    memcpy(&v, val, sizeof v);
    c->tcp_flag(name == TCP_CORK).store(v != 0, std::memory_order_relaxed);
    return 0;
  }
  int rc = real_setsockopt(c->tcp_fd(), level, name, val, len);
  if (rc != 0 || level != SOL_SOCKET) return rc;
  // An RMB keeps its size for the connection's life (it would take a new
  // RMB and CONFIRM RKEY); the send window follows SO_SNDBUF at once.
  if (name == SO_SNDBUF || name == SO_SNDBUFFORCE) c->set_send_limit(smcr::preload::granted_buffer(c->tcp_fd(), name));
  if ((name == SO_RCVTIMEO || name == SO_SNDTIMEO) && len >= sizeof(timeval)) {
    const timeval* tv = static_cast<const timeval*>(val);
    long ms = tv->tv_sec * 1000 + tv->tv_usec / 1000;
    c->set_timeout(name == SO_RCVTIMEO, ms > 0 ? static_cast<int>(ms) : -1);
  } else if (name == SO_OOBINLINE && len >= sizeof(int)) {
    c->set_oob_inline(*static_cast<const int*>(val) != 0);
  } else if (name == SO_LINGER && len >= sizeof(linger)) {
    const linger* l = static_cast<const linger*>(val);
    c->set_linger_abort(l->l_onoff && l->l_linger == 0);
  }
  return rc;
}

int getsockopt(int fd, int level, int name, void* val, socklen_t* len) {
  REAL(getsockopt);
  if (refuse_own_fd(fd)) return -1;
  if (int tcp = inherited_tcp_fd(fd); tcp >= 0) return real_getsockopt(tcp, level, name, val, len);
  ConnRef c(fd);
  if (!c) return real_getsockopt(fd, level, name, val, len);
  if (is_kept_tcp_flag(level, name) && val && len && *len >= sizeof(int))
    if (int8_t v = c->tcp_flag(name == TCP_CORK).load(std::memory_order_relaxed); v >= 0) {
      int out = v;
      memcpy(val, &out, sizeof out);
      *len = sizeof out;
      return 0;
    }
  int rc = real_getsockopt(c->tcp_fd(), level, name, val, len);
  if (rc == 0 && level == SOL_SOCKET && name == SO_ERROR && val && len && *len >= sizeof(int)) {
    // One pending error, reported once by whichever of recv, send and
    // SO_ERROR comes first, as TCP's (the reading above cleared the TCP
    // socket's own).
    int tcp_error = 0;
    memcpy(&tcp_error, val, sizeof tcp_error);
    int e = c->take_socket_error(tcp_error);
    memcpy(val, &e, sizeof e);
  }
  if (rc == 0 && level == SOL_SOCKET && (name == SO_RCVBUF || name == SO_SNDBUF) && val && len) {
    // The buffers that really hold this connection's bytes: our RMB and the
    // send window in the peer's, doubled as the kernel reports buffers.
    int v = static_cast<int>(name == SO_RCVBUF ? c->reported_rcvbuf() : c->reported_sndbuf());
    memcpy(val, &v, std::min<size_t>(*len, sizeof v));
  }
  return rc;
}

// Addresses come from the TCP socket, for a connection handed over from the
// parent too (its relayed stream socket has AF_UNIX addresses).
static int tcp_fd_for_addresses(int fd) {
  if (fd_table().kind(fd) == smcr::preload::kFdTakePending) smcr::preload::exec_inherit::settle_pending(fd);
  Connection* c = fd_table().get(fd);  // no handover wait: the TCP socket's either way
  if (!c && fd_table().kind(fd) == smcr::preload::kFdExecInherited) {
    int tcp = smcr::preload::exec_inherit::tcp_fd(fd);
    return tcp >= 0 ? tcp : fd;
  }
  if (!c && fd_table().kind(fd) == smcr::preload::kFdAccepting) {
    // Still in its handshake, or relayed: the TCP socket's, without waiting.
    if (int tcp = smcr::preload::accepting_tcp_fd(fd); tcp >= 0) return tcp;
    int ignored;
    c = smcr::preload::await_accepting(fd, kNotIo, &ignored);
    if (!c) {  // relayed after a late fallback, or failed
      int tcp = smcr::preload::relayed_tcp_fd(fd);
      return tcp >= 0 ? tcp : fd;
    }
  }
  if (!c) return fd;
  int tcp = c->tcp_fd();
  c->unref();
  return tcp >= 0 ? tcp : fd;
}

int getsockname(int fd, struct sockaddr* addr, socklen_t* len) {
  REAL(getsockname);
  if (refuse_own_fd(fd)) return -1;
  return real_getsockname(tcp_fd_for_addresses(fd), addr, len);
}

int getpeername(int fd, struct sockaddr* addr, socklen_t* len) {
  REAL(getpeername);
  if (refuse_own_fd(fd)) return -1;
  return real_getpeername(tcp_fd_for_addresses(fd), addr, len);
}

int dup(int fd) {
  REAL(dup);
  if (refuse_own_fd(fd)) return -1;
  if (table_knows(fd) && in_vfork_child()) return real_dup(fd);
  int rc = real_dup(fd);
  DupRef c(fd);
  if (c && rc >= 0) share_connection(rc, c.c);
  else if (rc >= 0) copy_fd_entry(fd, rc);
  if (rc >= 0) {
    smcr::preload::epoll_fd_duplicated(fd);
    smcr::preload::exec_inherit::duplicated(fd, rc);
  }
  return rc;
}

int dup3(int oldfd, int newfd, int flags) {
  REAL(dup3);
  if (oldfd == newfd) {
    errno = EINVAL;
    return -1;
  }
  if (refuse_own_fd(oldfd)) return -1;
  if (smcr::sys::is_own_fd(newfd)) {
    // The number is the application's to take (it is under its limit), so
    // the kernel closes what the shim kept there: say so, whatever the
    // log level, since that one of ours is gone.
    SMCR_LOG(0, "dup2/dup3 onto fd %d replaces a descriptor of the shim's own", newfd);
    smcr::sys::forget_own_fd(newfd);
  }
  if ((table_knows(oldfd) || table_knows(newfd)) && in_vfork_child()) return real_dup3(oldfd, newfd, flags);
  DupRef c(oldfd);
  forget_number(newfd);
  // dup2/dup3 over an SMC-R fd closes that connection's fd first.
  if (fd_table().kind(newfd) == smcr::preload::kFdAccepting)
    smcr::preload::close_accepting(newfd, [](int) { return 0; });  // dup3 below replaces it
  if (Connection* victim = fd_table().take(newfd)) {
    fd_table().set_kind(newfd, smcr::preload::kFdUnknown);
    if (victim->foreign()) {
      // Inherited: the owner's connection lives on (see close_smc_fd).
      if (victim->drop_user_fd()) victim->forget_in_child();
    } else if (victim->drop_user_fd()) {
      victim->app_close(false);
    } else {
      victim->unref();
    }
  }
  int rc = real_dup3(oldfd, newfd, flags);
  if (rc >= 0 && c) share_connection(rc, c.c);
  else if (rc >= 0) copy_fd_entry(oldfd, rc);
  if (rc >= 0) {
    smcr::preload::epoll_fd_duplicated(oldfd);
    smcr::preload::exec_inherit::duplicated(oldfd, rc);
  }
  return rc;
}

// glibc 2.34+; glibc's closefrom calls its own close_range, past the shim.
int close_range(unsigned int first, unsigned int last, int flags) {
  if (first > last || (flags & ~(CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE)) || (flags & CLOSE_RANGE_CLOEXEC))
    return real_close_range()(first, last, flags);  // errors, or only close-on-exec (the shim's already are)
  return close_fd_range(first, last, flags);
}

void closefrom(int lowfd) { close_fd_range(static_cast<unsigned int>(std::max(lowfd, 0)), ~0U, 0); }

int dup2(int oldfd, int newfd) {
  if (oldfd == newfd) {
    REAL(fcntl);
    if (refuse_own_fd(oldfd)) return -1;
    return real_fcntl(oldfd, F_GETFD) < 0 ? -1 : newfd;
  }
  return dup3(oldfd, newfd, 0);
}

#pragma GCC visibility pop
}  // extern "C"
