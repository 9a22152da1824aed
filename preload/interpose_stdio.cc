// --- stdio. A FILE that glibc makes on a descriptor (fdopen) reads, writes
// and closes through glibc's internal calls, past this shim, and so do
// dprintf/vdprintf: on an SMC-R fd they would read the readiness socket's
// doorbell bytes and write into it, and fclose() would leave the connection
// open. fdopen therefore returns, for a descriptor the shim looks after, a
// cookie stream (fopencookie) whose read, write, seek and close are the
// interposed calls, with _fileno set to the descriptor so that fileno()
// works (fopencookie sets -2; glibc's close path tests only for -1, and
// closes through the cookie exactly once, then sets -1). dprintf formats
// into a buffer and writes it through the shim.

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <new>
#include <vector>

#include "core/sys.h"
#include "preload/fd_table.h"
#include "preload/interpose_internal.h"

// The helpers every interposer file shares (interpose_internal.h).
using namespace smcr::preload::interpose;

namespace {

struct StreamCookie {
  int fd;
  FILE* file;
};

std::mutex& streams_mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<StreamCookie*>& streams() {  // under streams_mu; never destroyed (read at exit)
  static auto* v = new std::vector<StreamCookie*>;
  return *v;
}

// The shim's calls are needed under the descriptor: an SMC-R connection, an
// accept whose Confirm may be pending, a late connect that may owe a
// Decline.
bool needs_shim_io(int fd) {
  if (fd_table().has_conn(fd)) return true;
  uint8_t k = fd_table().kind(fd);
  return k == smcr::preload::kFdAccepting || k == smcr::preload::kFdLateConnect;
}

// For a stream: also a TCP socket not connected yet (fdopen, then connect:
// it may become SMC-R). A connected one that is not SMC-R stays TCP.
bool stream_needs_shim(int fd) {
  if (needs_shim_io(fd)) return true;
  if (fd_table().kind(fd) != smcr::preload::kFdTcp) return false;
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  return smcr::sys::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 && errno == ENOTCONN;
}

ssize_t stream_read(void* cookie, char* buf, size_t n) { return read(static_cast<StreamCookie*>(cookie)->fd, buf, n); }

// As glibc's file streams: everything, or up to the first error.
ssize_t stream_write(void* cookie, const char* buf, size_t n) {
  int fd = static_cast<StreamCookie*>(cookie)->fd;
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, buf + done, n - done);
    if (w < 0) break;
    done += static_cast<size_t>(w);
  }
  return static_cast<ssize_t>(done);
}

int stream_seek(void* cookie, off64_t* off, int whence) {  // ESPIPE, as a socket's
  off64_t r = lseek64(static_cast<StreamCookie*>(cookie)->fd, *off, whence);
  if (r < 0) return -1;
  *off = r;
  return 0;
}

int stream_close(void* cookie) {
  auto* ck = static_cast<StreamCookie*>(cookie);
  {
    std::lock_guard<std::mutex> lock(streams_mu());
    auto& v = streams();
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i] == ck) {
        v[i] = v.back();
        v.pop_back();
        break;
      }
  }
  int fd = ck->fd;
  delete ck;
  return close(fd);
}

using VdprintfChkFn = int (*)(int, int, const char*, va_list);
extern "C" int __vsnprintf_chk(char*, size_t, int, size_t, const char*, va_list);

// dprintf on a descriptor the shim looks after: formatted here (the
// fortified variant keeps its checks), then written whole, or -1.
int dprintf_through_shim(int fd, int chk_flag, const char* fmt, va_list ap) {
  char stack[1024];
  va_list again;
  va_copy(again, ap);
  auto format = [&](char* buf, size_t size, va_list a) {
    return chk_flag < 0 ? vsnprintf(buf, size, fmt, a) : __vsnprintf_chk(buf, size, chk_flag, size, fmt, a);
  };
  int n = format(stack, sizeof stack, ap);
  char* buf = stack;
  char* heap = nullptr;
  if (n >= 0 && static_cast<size_t>(n) >= sizeof stack) {
    heap = static_cast<char*>(malloc(static_cast<size_t>(n) + 1));
    if (!heap) {
      errno = ENOMEM;
      n = -1;
    } else {
      format(heap, static_cast<size_t>(n) + 1, again);
      buf = heap;
    }
  }
  va_end(again);
  for (size_t done = 0; n > 0 && done < static_cast<size_t>(n);) {
    ssize_t w = write(fd, buf + done, static_cast<size_t>(n) - done);
    if (w < 0) n = -1;
    else done += static_cast<size_t>(w);
  }
  free(heap);
  return n;
}

}  // namespace

namespace smcr::preload::interpose {

void flush_socket_streams_at_exit() {
  std::lock_guard<std::mutex> lock(streams_mu());
  for (StreamCookie* ck : streams())
    if (ck->file && ftrylockfile(ck->file) == 0) {  // one held by another thread mid-call: left alone
      fflush_unlocked(ck->file);
      funlockfile(ck->file);
    }
}

}  // namespace smcr::preload::interpose

extern "C" {
// The interposed libc entry points: the only symbols the shim exports
// (preload/exports.map; everything else is compiled hidden).
#pragma GCC visibility push(default)

FILE* fdopen(int fd, const char* mode) {
  REAL(fdopen);
  if (!mode || !enabled() || !stream_needs_shim(fd)) return real_fdopen(fd, mode);
  // The mode as glibc's fdopen reads it: r, w or a, then '+' among the
  // next four characters.
  char m[3] = {0, 0, 0};
  if (mode[0] != 'r' && mode[0] != 'w' && mode[0] != 'a') {
    errno = EINVAL;
    return nullptr;
  }
  m[0] = mode[0];
  for (int i = 1; i < 5 && mode[i]; ++i)
    if (mode[i] == '+') {
      m[1] = '+';
      break;
    }
  int fl = smcr::sys::fcntl(fd, F_GETFL);
  if (fl < 0) return nullptr;
  if (((fl & O_ACCMODE) == O_RDONLY && (m[0] != 'r' || m[1])) || ((fl & O_ACCMODE) == O_WRONLY && (m[0] == 'r' || m[1]))) {
    errno = EINVAL;
    return nullptr;
  }
  // As glibc: "a" sets O_APPEND on the descriptor (meaningless on a socket).
  if (m[0] == 'a' && !(fl & O_APPEND) && smcr::sys::fcntl(fd, F_SETFL, fl | O_APPEND) < 0) return nullptr;
  auto* ck = new (std::nothrow) StreamCookie{fd, nullptr};
  if (!ck) {
    errno = ENOMEM;
    return nullptr;
  }
  FILE* f = fopencookie(ck, m, cookie_io_functions_t{stream_read, stream_write, stream_seek, stream_close});
  if (!f) {
    delete ck;
    return nullptr;
  }
  f->_fileno = fd;
  ck->file = f;
  std::lock_guard<std::mutex> lock(streams_mu());
  streams().push_back(ck);
  return f;
}

int vdprintf(int fd, const char* fmt, va_list ap) {
  REAL(vdprintf);
  if (!needs_shim_io(fd)) return real_vdprintf(fd, fmt, ap);
  return dprintf_through_shim(fd, -1, fmt, ap);
}

int dprintf(int fd, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vdprintf(fd, fmt, ap);
  va_end(ap);
  return n;
}

int __vdprintf_chk(int fd, int flag, const char* fmt, va_list ap) {
  if (!needs_shim_io(fd)) {
    static std::atomic<VdprintfChkFn> slot{nullptr};
    VdprintfChkFn real = slot.load(std::memory_order_relaxed);
    if (!real) {
      real = resolve<VdprintfChkFn>("__vdprintf_chk");
      slot.store(real, std::memory_order_relaxed);
    }
    return real(fd, flag, fmt, ap);
  }
  return dprintf_through_shim(fd, flag, fmt, ap);
}

int __dprintf_chk(int fd, int flag, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = __vdprintf_chk(fd, flag, fmt, ap);
  va_end(ap);
  return n;
}

#pragma GCC visibility pop
}  // extern "C"
