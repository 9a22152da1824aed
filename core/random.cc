#include "core/random.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "core/raw_syscall.h"

namespace smcr {

bool random_bytes(void* buf, size_t len) {
  auto* p = static_cast<uint8_t*>(buf);
  size_t got = 0;
  while (got < len) {
    // The raw system call: libc's getrandom() may be missing (old glibc) or
    // interposed, and this must not allocate.
    long n = smcr::sys::raw_syscall(SYS_getrandom, p + got, len - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    int err = n < 0 ? errno : EIO;
    // A partial fill must not be mistaken for a value.
    std::memset(buf, 0, len);
    static std::atomic<bool> said{false};
    if (!said.exchange(true, std::memory_order_relaxed))
      log_write(0, "getrandom failed (%s): connections that need a secret stay on TCP", strerror(err));
    errno = err;
    return false;
  }
  return true;
}

}  // namespace smcr
