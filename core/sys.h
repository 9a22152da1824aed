// Raw system calls for the engine's own I/O. The engine is linked into the
// LD_PRELOAD library, which exports read/write/close/... itself: a plain call
// to ::read from here would re-enter the interposer. raw_syscall (the kernel
// entry itself, core/raw_syscall.h) bypasses both the interposer and libc,
// so engine I/O never recurses; libc's syscall() would not, as the shim
// exports one too.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "core/raw_syscall.h"
#include <cstdint>
#include <cstdlib>

namespace smcr::sys {

// The shim's own descriptors (sys::hide_fd, sys::dup_hidden, and those
// that sit below the hidden range when there is no room up there), one bit
// each. The application never received these numbers: its close(),
// fcntl(), dup() and epoll_ctl() on one answer EBADF, as they would without
// the shim, and its close_range()/closefrom() leaves them open. Cleared by
// sys::close (or when the application's dup2() takes the number).
constexpr int kOwnFdBits = 1 << 21;
extern std::atomic<uint64_t> g_own_fds[kOwnFdBits / 64];
inline void note_own_fd(int fd) {
  if (static_cast<unsigned>(fd) < static_cast<unsigned>(kOwnFdBits))
    g_own_fds[fd >> 6].fetch_or(uint64_t{1} << (fd & 63), std::memory_order_relaxed);
}
inline void forget_own_fd(int fd) {
  if (static_cast<unsigned>(fd) >= static_cast<unsigned>(kOwnFdBits)) return;
  uint64_t bit = uint64_t{1} << (fd & 63);
  if (g_own_fds[fd >> 6].load(std::memory_order_relaxed) & bit)
    g_own_fds[fd >> 6].fetch_and(~bit, std::memory_order_relaxed);
}
inline bool is_own_fd(int fd) {
  return static_cast<unsigned>(fd) < static_cast<unsigned>(kOwnFdBits) &&
         (g_own_fds[fd >> 6].load(std::memory_order_relaxed) & (uint64_t{1} << (fd & 63)));
}

inline ssize_t read(int fd, void* buf, size_t n) { return raw_syscall(SYS_read, fd, buf, n); }
inline ssize_t write(int fd, const void* buf, size_t n) { return raw_syscall(SYS_write, fd, buf, n); }
inline int close(int fd) {
  forget_own_fd(fd);
  return static_cast<int>(raw_syscall(SYS_close, fd));
}
// Closes *fd if open and marks it closed (-1).
inline void close_reset(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}
inline ssize_t send(int fd, const void* buf, size_t n, int flags) {
  return raw_syscall(SYS_sendto, fd, buf, n, flags, nullptr, 0);
}
inline ssize_t recv(int fd, void* buf, size_t n, int flags) {
  return raw_syscall(SYS_recvfrom, fd, buf, n, flags, nullptr, nullptr);
}
inline ssize_t sendmsg(int fd, const struct msghdr* m, int flags) { return raw_syscall(SYS_sendmsg, fd, m, flags); }
inline ssize_t recvmsg(int fd, struct msghdr* m, int flags) { return raw_syscall(SYS_recvmsg, fd, m, flags); }
inline int recvmmsg(int fd, struct mmsghdr* v, unsigned n, int flags) {
  return static_cast<int>(raw_syscall(SYS_recvmmsg, fd, v, n, flags, nullptr));
}
// ppoll: the one every architecture has (aarch64 has no poll system call).
inline int poll(struct pollfd* fds, nfds_t n, int timeout_ms) {
  struct timespec ts, *limit = nullptr;
  if (timeout_ms >= 0) {
    ts.tv_sec = timeout_ms / 1000;
    ts.tv_nsec = static_cast<long>(timeout_ms % 1000) * 1000000L;
    limit = &ts;
  }
  return static_cast<int>(raw_syscall(SYS_ppoll, fds, n, limit, nullptr, 0));
}
inline int socket(int domain, int type, int proto) { return static_cast<int>(raw_syscall(SYS_socket, domain, type, proto)); }
inline int socketpair(int domain, int type, int proto, int sv[2]) {
  return static_cast<int>(raw_syscall(SYS_socketpair, domain, type, proto, sv));
}
inline int connect(int fd, const struct sockaddr* a, socklen_t l) { return static_cast<int>(raw_syscall(SYS_connect, fd, a, l)); }
inline int bind(int fd, const struct sockaddr* a, socklen_t l) { return static_cast<int>(raw_syscall(SYS_bind, fd, a, l)); }
inline int listen(int fd, int backlog) { return static_cast<int>(raw_syscall(SYS_listen, fd, backlog)); }
inline int accept4(int fd, struct sockaddr* a, socklen_t* l, int flags) {
  return static_cast<int>(raw_syscall(SYS_accept4, fd, a, l, flags));
}
inline int shutdown(int fd, int how) { return static_cast<int>(raw_syscall(SYS_shutdown, fd, how)); }
inline int getsockopt(int fd, int level, int name, void* v, socklen_t* l) {
  return static_cast<int>(raw_syscall(SYS_getsockopt, fd, level, name, v, l));
}
inline int setsockopt(int fd, int level, int name, const void* v, socklen_t l) {
  return static_cast<int>(raw_syscall(SYS_setsockopt, fd, level, name, v, l));
}
inline int getsockname(int fd, struct sockaddr* a, socklen_t* l) { return static_cast<int>(raw_syscall(SYS_getsockname, fd, a, l)); }
inline int getpeername(int fd, struct sockaddr* a, socklen_t* l) { return static_cast<int>(raw_syscall(SYS_getpeername, fd, a, l)); }
// One message with descriptors attached (SCM_RIGHTS, at most kMaxPassedFds),
// sent with `flags` (MSG_NOSIGNAL always).
inline constexpr size_t kMaxPassedFds = 8;
inline ssize_t sendmsg_with_fds(int sock, const void* data, size_t len, const int* fds, size_t count, int flags) {
  iovec iov{const_cast<void*>(data), len};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  if (count > kMaxPassedFds) {
    errno = EINVAL;
    return -1;
  }
  if (count > 0) {
    m.msg_control = cbuf;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * count);
    __builtin_memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
  }
  return sys::sendmsg(sock, &m, flags | MSG_NOSIGNAL);
}
// One message with at most one descriptor attached.
inline ssize_t sendmsg_with_fd(int sock, const void* data, size_t len, int fd_to_pass, int flags) {
  return sendmsg_with_fds(sock, data, len, &fd_to_pass, fd_to_pass >= 0 ? 1 : 0, flags);
}
int hide_fd(int fd);
// The descriptors a received message carried (SCM_RIGHTS), each moved to
// the hidden range at once: the kernel installs a received descriptor at
// the lowest free number, which an application thread may be about to take
// (TCP would have given it that number). The first `max` go to fds_out
// (their count returned), the rest are closed.
inline size_t take_passed_fds(const msghdr& m, int* fds_out, size_t max) {
  size_t count = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&m), c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; ++i) {
      int fd;
      __builtin_memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (count < max) fds_out[count++] = hide_fd(fd);
      else sys::close(fd);
    }
  }
  return count;
}
// One message and the descriptors passed with it, close-on-exec, into
// fds_out[0..*count) (extra ones are closed), received with `flags`. A
// truncated message or control part is an error (EPROTO), its fds closed.
inline ssize_t recv_with_fds(int sock, void* buf, size_t len, int* fds_out, size_t max, size_t* count, int flags) {
  *count = 0;
  iovec iov{buf, len};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  m.msg_control = cbuf;
  m.msg_controllen = sizeof cbuf;
  ssize_t n = sys::recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  *count = take_passed_fds(m, fds_out, max);
  if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {  // not the message that was sent
    for (size_t i = 0; i < *count; ++i) sys::close(fds_out[i]);
    *count = 0;
    errno = EPROTO;
    return -1;
  }
  return n;
}
// One message and at most one passed descriptor into *fd_out (-1 if none).
inline ssize_t recv_with_fd(int sock, void* buf, size_t len, int* fd_out, int flags = MSG_DONTWAIT) {
  size_t count = 0;
  ssize_t n = recv_with_fds(sock, buf, len, fd_out, 1, &count, flags);
  if (count == 0) *fd_out = -1;
  return n;
}
// Calls fn(name) for each entry of the directory at `path` but . and ..
// (getdents64: no allocation, usable in a vfork child), until fn returns
// false; `dir_fd` (if given) gets the directory's own descriptor number.
template <typename Fn>
bool for_each_dir_entry(const char* path, Fn fn, int* dir_fd = nullptr) {
  int dir = static_cast<int>(raw_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir < 0) return false;
  if (dir_fd) *dir_fd = dir;
  alignas(8) char buf[4096];
  for (bool more = true; more;) {
    long n = raw_syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n && more;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + off);
      off += d->d_reclen;
      if (d->d_name[0] == '.') continue;
      more = fn(static_cast<const char*>(d->d_name));
    }
  }
  raw_syscall(SYS_close, dir);
  return true;
}
// Calls fn(fd) for each descriptor open in this process (/proc/self/fd).
template <typename Fn>
void for_each_open_fd(Fn fn) {
  int dir = -1;
  for_each_dir_entry(
      "/proc/self/fd",
      [&](const char* name) {
        char* end = nullptr;
        long fd = std::strtol(name, &end, 10);
        if (end != name && !*end && fd != dir) fn(static_cast<int>(fd));
        return true;
      },
      &dir);
}
inline int fcntl(int fd, int cmd, long arg = 0) { return static_cast<int>(raw_syscall(SYS_fcntl, fd, cmd, arg)); }
inline int ioctl(int fd, unsigned long req, void* arg) { return static_cast<int>(raw_syscall(SYS_ioctl, fd, req, arg)); }
inline int epoll_ctl(int epfd, int op, int fd, struct epoll_event* ev) {
  return static_cast<int>(raw_syscall(SYS_epoll_ctl, epfd, op, fd, ev));
}
// epoll_pwait with no mask: the one every architecture has (aarch64 has no
// epoll_wait system call).
inline int epoll_wait(int epfd, struct epoll_event* events, int max, int timeout_ms) {
  return static_cast<int>(raw_syscall(SYS_epoll_pwait, epfd, events, max, timeout_ms, nullptr, 0));
}
inline int dup3(int oldfd, int newfd, int flags) { return static_cast<int>(raw_syscall(SYS_dup3, oldfd, newfd, flags)); }
inline int fstat(int fd, struct stat* st) { return static_cast<int>(raw_syscall(SYS_fstat, fd, st)); }

// Monotonic milliseconds, for handshake deadlines.
int64_t now_ms();
// Monotonic nanoseconds (vDSO, no system call), for bounded spins.
int64_t now_ns();

// The shim's own descriptors (the TCP socket behind an SMC-R fd, readiness
// socket ends, links, the engine's epoll) live in the upper half of
// RLIMIT_NOFILE, so the numbers the application gets are the ones it would
// get with TCP: programs that size tables by their connection count (wrk)
// or select() keep working. Moves `fd` there (close-on-exec) when there is
// room and returns the number to use; otherwise returns `fd` unchanged.
int hide_fd(int fd);
// Where the hidden range starts (half of RLIMIT_NOFILE at load, at most
// 2^20), or 0 when there is none (below 2048).
int hidden_fd_base();
// A close-on-exec duplicate of fd, in the upper half when there is room
// (one system call where dup and hide_fd take three).
int dup_hidden(int fd);

// A readiness socket's POLLOUT (docs/ARCHITECTURE.md, "fd model"): filling
// the application end's tiny send buffer takes it away; emptying the
// engine end (where those bytes arrive) gives it back, with an epoll edge.
inline void fill_socket(int fd) {
  static char junk[16384];
  while (smcr::sys::send(fd, junk, sizeof junk, MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {
  }
}
// TCP's own abort (RFC 793 ABORT; Linux: connect() with AF_UNSPEC runs
// tcp_disconnect): the peer gets a RST now, whatever was queued for us is
// thrown away, and the descriptor stays open (on a socket in CLOSE).
inline void disconnect_tcp(int fd) {
  sockaddr unspec{};
  unspec.sa_family = AF_UNSPEC;
  smcr::sys::connect(fd, &unspec, sizeof unspec);
}
// The same for a socket an application still reads: it then reads as one
// its peer reset, ECONNRESET once, then end of file (the shutdown, which
// answers ENOTCONN on the closed socket but marks it); writes fail with EPIPE.
inline void abort_tcp(int fd) {
  disconnect_tcp(fd);
  smcr::sys::shutdown(fd, SHUT_RDWR);
}
inline void empty_socket(int fd) {
  char buf[16384];
  while (smcr::sys::recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
}

}  // namespace smcr::sys
