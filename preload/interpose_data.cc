// The shim's data calls: read/write, recv*/send*, readv/writev, their
// _FORTIFY_SOURCE forms, sendfile, splice, recvmmsg/sendmmsg. On an SMC-R
// connection they move the bytes through its RMBs (core/connection.h); on
// any other descriptor they are libc's.

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "core/connection.h"
#include "core/sys.h"
#include "preload/epoll.h"
#include "preload/exec_inherit.h"
#include "preload/fd_table.h"
#include "preload/interpose_internal.h"
#include "preload/takeover.h"

// The helpers every interposer file shares (interpose_internal.h).
using namespace smcr::preload::interpose;

namespace {

ssize_t smc_recv(Connection* c, void* buf, size_t len, int flags) {
  iovec iov{buf, len};
  return c->recvv(&iov, 1, flags);
}

ssize_t smc_send(Connection* c, const void* buf, size_t len, int flags) {
  iovec iov{const_cast<void*>(buf), len};
  return c->sendv(&iov, 1, flags);
}

// Descriptors sent to another process (SCM_RIGHTS) may be waited on there,
// past this process's epoll interposition; an SMC-R connection among them
// is left for the receiver to take over (a child of ours with the shim) or
// relayed first (the receiver gets its readiness socket, a plain stream
// from then on): preload/exec_inherit.h, relay_passed.
void fds_passed(int via, const struct msghdr* m) {
  for (cmsghdr* h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR(const_cast<msghdr*>(m), h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* data = CMSG_DATA(h);
    int passed[64];
    size_t smc = 0;
    for (size_t i = 0; i < n; ++i) {
      int fd;
      memcpy(&fd, data + i * sizeof(int), sizeof fd);
      smcr::preload::epoll_fd_polled(fd);
      if (fd_table().kind(fd) == smcr::preload::kFdAccepting) {  // its handshake ends first
        int ignored;
        if (Connection* c = smcr::preload::await_accepting(fd, smcr::preload::kNotIo, &ignored)) c->unref();
      }
      if (fd_table().has_conn(fd) && smc < std::size(passed)) passed[smc++] = fd;
    }
    if (smc > 0) smcr::preload::exec_inherit::relay_passed(passed, smc, via);
  }
}

// Descriptors received over SCM_RIGHTS: a stream another process relays for
// an SMC-R connection gets that connection's TCP socket to answer for it
// (preload/exec_inherit.h, adopt_received).
void fds_received(int via, const struct msghdr* m) {
  for (cmsghdr* h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR(const_cast<msghdr*>(m), h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* data = CMSG_DATA(h);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      memcpy(&fd, data + i * sizeof(int), sizeof fd);
      smcr::preload::exec_inherit::adopt_received(via, fd);
    }
  }
}

}  // namespace

extern "C" {
// The interposed libc entry points: the only symbols the shim exports
// (preload/exports.map; everything else is compiled hidden).
#pragma GCC visibility push(default)

ssize_t read(int fd, void* buf, size_t n) {
  REAL(read);
  ConnRef c(fd, 0);
  if (c.refuse()) return -1;
  if (!c) return real_read(fd, buf, n);
  return smc_recv(c.c, buf, n, 0);
}

ssize_t write(int fd, const void* buf, size_t n) {
  REAL(write);
  iovec v{const_cast<void*>(buf), n};
  if (ssize_t r; early_write(fd, &v, 1, 0, &r)) return r;
  ConnRef c(fd, 0, false, true);
  if (c.refuse()) return -1;
  if (!c) return real_write(fd, buf, n);
  return smc_send(c.c, buf, n, 0);
}

ssize_t readv(int fd, const struct iovec* iov, int cnt) {
  REAL(readv);
  ConnRef c(fd, 0);
  if (c.refuse()) return -1;
  if (!c) return real_readv(fd, iov, cnt);
  if (cnt < 0 || cnt > IOV_MAX) {
    errno = EINVAL;
    return -1;
  }
  return c->recvv(iov, cnt, 0);
}

ssize_t writev(int fd, const struct iovec* iov, int cnt) {
  REAL(writev);
  if (ssize_t r; early_write(fd, iov, cnt, 0, &r)) return r;
  ConnRef c(fd, 0, false, true);
  if (c.refuse()) return -1;
  if (!c) return real_writev(fd, iov, cnt);
  if (cnt < 0 || cnt > IOV_MAX) {
    errno = EINVAL;
    return -1;
  }
  return c->sendv(iov, cnt, 0);
}

ssize_t recv(int fd, void* buf, size_t n, int flags) {
  REAL(recv);
  ConnRef c(fd, flags);
  if (c.refuse()) return -1;
  if (!c) return real_recv(fd, buf, n, flags);
  return smc_recv(c.c, buf, n, flags);
}

ssize_t send(int fd, const void* buf, size_t n, int flags) {
  REAL(send);
  iovec v{const_cast<void*>(buf), n};
  if (ssize_t r; early_write(fd, &v, 1, flags, &r)) return r;
  ConnRef c(fd, flags, false, true);
  if (c.refuse()) return -1;
  if (!c) return real_send(fd, buf, n, flags);
  return smc_send(c.c, buf, n, flags);
}

ssize_t recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* addr, socklen_t* alen) {
  REAL(recvfrom);
  ConnRef c(fd, flags);
  if (c.refuse()) return -1;
  if (!c) return real_recvfrom(fd, buf, n, flags, addr, alen);
  ssize_t r = smc_recv(c.c, buf, n, flags);
  if (r >= 0 && alen) *alen = 0;  // TCP reports no source address
  return r;
}

ssize_t sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* addr, socklen_t alen) {
  REAL(sendto);
  iovec v{const_cast<void*>(buf), n};
  if (ssize_t r; early_write(fd, &v, 1, flags, &r)) return r;
  ConnRef c(fd, flags, false, true);
  if (c.refuse()) return -1;
  if (!c) return real_sendto(fd, buf, n, flags, addr, alen);
  return smc_send(c.c, buf, n, flags);  // a connected TCP socket ignores the address
}

ssize_t recvmsg(int fd, struct msghdr* m, int flags) {
  REAL(recvmsg);
  ConnRef c(fd, flags);
  if (c.refuse()) return -1;
  if (!c) {
    ssize_t r = real_recvmsg(fd, m, flags);
    if (r >= 0 && m && m->msg_controllen) fds_received(fd, m);
    return r;
  }
  if (m->msg_iovlen > IOV_MAX) {
    errno = EMSGSIZE;
    return -1;
  }
  ssize_t r = c->recvv(m->msg_iov, static_cast<int>(m->msg_iovlen), flags);
  if (r >= 0) {
    m->msg_namelen = 0;
    m->msg_controllen = 0;
    m->msg_flags = 0;
  }
  return r;
}

ssize_t sendmsg(int fd, const struct msghdr* m, int flags) {
  REAL(sendmsg);
  if (m && m->msg_controllen) fds_passed(fd, m);
  if (ssize_t r; m && !m->msg_controllen && m->msg_iovlen <= IOV_MAX &&
                 early_write(fd, m->msg_iov, static_cast<int>(m->msg_iovlen), flags, &r))
    return r;
  ConnRef c(fd, flags, false, true);
  if (c.refuse()) return -1;
  if (!c) return real_sendmsg(fd, m, flags);
  if (m->msg_iovlen > IOV_MAX) {
    errno = EMSGSIZE;
    return -1;
  }
  return c->sendv(m->msg_iov, static_cast<int>(m->msg_iovlen), flags);
}

// --- glibc _FORTIFY_SOURCE entry points. A fortified program calls these
// instead of read/recv/recvfrom when the buffer size is known at compile
// time (Debian builds its packages that way); glibc's own versions go
// straight to the system call, past this shim. Same check, then the
// interposed call.

ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  if (n > buflen) __chk_fail();
  return read(fd, buf, n);
}

ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
  if (n > buflen) __chk_fail();
  return recv(fd, buf, n, flags);
}

ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags, struct sockaddr* addr,
                       socklen_t* alen) {
  if (n > buflen) __chk_fail();
  return recvfrom(fd, buf, n, flags, addr, alen);
}

// --- Zero-copy calls. The kernel would move the bytes into the readiness
// socket that sits at an SMC-R fd number, so they are done here by copying:
// never more is taken from the source than the connection accepts, so
// nothing is lost when a non-blocking send stops short.
namespace {
constexpr size_t kCopyChunk = 32 * 1024;
}

ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t count) {
  REAL(sendfile);
  ConnRef in(in_fd);
  if (in) {  // as for TCP: a socket cannot be sendfile's source
    errno = EINVAL;
    return -1;
  }
  ConnRef c(out_fd, 0, false, true);
  if (c.refuse()) return -1;
  if (!c) return real_sendfile(out_fd, in_fd, offset, count);
  char buf[kCopyChunk];
  size_t done = 0;
  off_t pos = offset ? *offset : 0;
  while (done < count) {
    size_t want = std::min(count - done, sizeof buf);
    // A non-blocking socket takes what fits now; read no more than that.
    if (uint32_t room = c->bytes_writable(); room > 0) want = std::min<size_t>(want, room);
    ssize_t n = offset ? ::pread(in_fd, buf, want, pos) : smcr::sys::read(in_fd, buf, want);
    if (n <= 0) {
      if (n < 0 && done == 0) return -1;
      break;
    }
    ssize_t s = smc_send(c.c, buf, static_cast<size_t>(n), 0);
    size_t sent = s > 0 ? static_cast<size_t>(s) : 0;
    // Bytes read but not sent go back to the file position.
    if (sent < static_cast<size_t>(n) && !offset) ::lseek(in_fd, -static_cast<off_t>(static_cast<size_t>(n) - sent), SEEK_CUR);
    done += sent;
    pos += static_cast<off_t>(sent);
    if (s < 0) {
      if (done == 0) return -1;
      break;
    }
    if (sent < static_cast<size_t>(n)) break;
  }
  if (offset) *offset = pos;
  return static_cast<ssize_t>(done);
}

ssize_t sendfile64(int out_fd, int in_fd, off64_t* offset, size_t count) {
  static_assert(sizeof(off_t) == sizeof(off64_t), "64-bit off_t");
  return sendfile(out_fd, in_fd, reinterpret_cast<off_t*>(offset), count);
}

ssize_t splice(int fd_in, loff_t* off_in, int fd_out, loff_t* off_out, size_t len, unsigned int flags) {
  REAL(splice);
  int io = (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0;
  ConnRef in(fd_in, io), out(fd_out, io);
  if (in.refuse() || out.refuse()) return -1;
  if (!in && !out) return real_splice(fd_in, off_in, fd_out, off_out, len, flags);
  if (in && out) {  // one end must be a pipe
    errno = EINVAL;
    return -1;
  }
  // As the kernel: an offset on the pipe side is ESPIPE, on the socket EINVAL.
  if ((in && off_out) || (out && off_in)) {
    errno = ESPIPE;
    return -1;
  }
  if ((in && off_in) || (out && off_out)) {
    errno = EINVAL;
    return -1;
  }
  if (len == 0) return 0;
  char buf[kCopyChunk];
  size_t want = std::min(len, sizeof buf);
  int pipe_flags = smcr::sys::fcntl(out ? fd_in : fd_out, F_GETFL);
  if (pipe_flags < 0) return -1;
  if (flags & SPLICE_F_NONBLOCK) smcr::sys::fcntl(out ? fd_in : fd_out, F_SETFL, pipe_flags | O_NONBLOCK);
  ssize_t result;
  if (out) {
    // pipe -> SMC-R: take from the pipe only what the connection accepts
    // now (a blocking one waits for room first, as the kernel would).
    if (uint32_t room = out->bytes_writable(); room > 0) want = std::min<size_t>(want, room);
    ssize_t n = smcr::sys::read(fd_in, buf, want);
    result = n <= 0 ? n : smc_send(out.c, buf, static_cast<size_t>(n), 0);
  } else {
    // SMC-R -> pipe: look, move what the pipe takes, consume only that.
    ssize_t n = smc_recv(in.c, buf, want, MSG_PEEK);
    result = n;
    if (n > 0) {
      ssize_t w = smcr::sys::write(fd_out, buf, static_cast<size_t>(n));
      result = w;
      if (w > 0) smc_recv(in.c, buf, static_cast<size_t>(w), MSG_DONTWAIT);
    }
  }
  int saved = errno;
  if (flags & SPLICE_F_NONBLOCK) smcr::sys::fcntl(out ? fd_in : fd_out, F_SETFL, pipe_flags);
  errno = saved;
  return result;
}

int recvmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen, int flags, struct timespec* timeout) {
  REAL(recvmmsg);
  ConnRef c(fd, flags);
  if (c.refuse()) return -1;
  if (!c) {
    int r = real_recvmmsg(fd, msgs, vlen, flags, timeout);
    for (int i = 0; i < r; ++i)
      if (msgs[i].msg_hdr.msg_controllen) fds_received(fd, &msgs[i].msg_hdr);
    return r;
  }
  // A stream socket fills one message after the other, as the kernel does
  // for TCP (the timeout is checked only between messages there too).
  unsigned int got = 0;
  for (; got < vlen; ++got) {
    int f = flags & ~MSG_WAITFORONE;
    if (got > 0 && (flags & MSG_WAITFORONE)) f |= MSG_DONTWAIT;
    ssize_t r = recvmsg(fd, &msgs[got].msg_hdr, f);
    if (r < 0) {
      if (got == 0) return -1;
      break;
    }
    msgs[got].msg_len = static_cast<unsigned int>(r);
  }
  return static_cast<int>(got);
}

int sendmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen, int flags) {
  REAL(sendmmsg);
  for (unsigned int i = 0; msgs && i < vlen; ++i)
    if (msgs[i].msg_hdr.msg_controllen) fds_passed(fd, &msgs[i].msg_hdr);
  ConnRef c(fd, flags, false, true);
  if (c.refuse()) return -1;
  if (!c) return real_sendmmsg(fd, msgs, vlen, flags);
  unsigned int sent = 0;
  for (; sent < vlen; ++sent) {
    ssize_t r = sendmsg(fd, &msgs[sent].msg_hdr, flags);
    if (r < 0) {
      if (sent == 0) return -1;
      break;
    }
    msgs[sent].msg_len = static_cast<unsigned int>(r);
  }
  return static_cast<int>(sent);
}

#pragma GCC visibility pop
}  // extern "C"
