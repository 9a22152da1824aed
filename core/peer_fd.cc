#include "core/peer_fd.h"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/env.h"
#include "core/log.h"
#include "core/process.h"
#include "core/sys.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

namespace smcr::peer_fd {

namespace {

std::atomic<bool> g_unsupported{false};

// A few peers' pidfds, so that a peer's every connection does not open and
// close one (two system calls). A try-lock, never waited for: a thread that
// finds it taken (or a forked child that inherited it taken) opens a pidfd
// of its own for the one fetch. Entries of another process generation are
// a forked child's inherited copies: closed and forgotten.
struct Entry {
  int pid = 0;
  int pidfd = -1;
  uint64_t generation = 0;
  uint64_t used = 0;
};
constexpr int kEntries = 16;
Entry g_entries[kEntries];
uint64_t g_clock = 0;
std::atomic_flag g_busy = ATOMIC_FLAG_INIT;

int open_pidfd(int pid) {
  int fd = static_cast<int>(smcr::sys::raw_syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    if (errno == ENOSYS) g_unsupported.store(true, std::memory_order_relaxed);
    return -1;
  }
  return sys::hide_fd(fd);
}

// Under g_busy: the cached pidfd of `pid` (opened now if new), or -1.
int cached_pidfd_locked(int pid) {
  uint64_t gen = process_generation();
  Entry* victim = &g_entries[0];
  for (Entry& e : g_entries) {
    if (e.pidfd >= 0 && e.generation != gen) {
      sys::close(e.pidfd);
      e = Entry{};
    }
    if (e.pidfd >= 0 && e.pid == pid) {
      e.used = ++g_clock;
      return e.pidfd;
    }
    if (e.pidfd < 0 || (victim->pidfd >= 0 && e.used < victim->used)) victim = &e;
  }
  int fd = open_pidfd(pid);
  if (fd < 0) return -1;
  if (victim->pidfd >= 0) sys::close(victim->pidfd);
  *victim = Entry{pid, fd, gen, ++g_clock};
  return fd;
}

void forget_locked(int pid) {
  for (Entry& e : g_entries)
    if (e.pidfd >= 0 && e.pid == pid && e.generation == process_generation()) {
      sys::close(e.pidfd);
      e = Entry{};
    }
}

}  // namespace

bool enabled() {
  static const bool on = env_long("SMCR_FETCH_BELL", 1, 0, 1) != 0;
  return on && !g_unsupported.load(std::memory_order_relaxed);
}

int fetch_socket(int pid, int fd, uint64_t ino, uint64_t* dev) {
  if (!enabled() || pid <= 0 || fd < 0 || ino == 0) return -1;
  int got = -1;
  if (!g_busy.test_and_set(std::memory_order_acquire)) {
    int pidfd = cached_pidfd_locked(pid);
    if (pidfd >= 0) {
      got = static_cast<int>(smcr::sys::raw_syscall(SYS_pidfd_getfd, pidfd, fd, 0));
      // The process is gone (a pid that may be reused): not kept.
      if (got < 0 && errno == ESRCH) forget_locked(pid);
    }
    g_busy.clear(std::memory_order_release);
  } else if (int pidfd = open_pidfd(pid); pidfd >= 0) {
    got = static_cast<int>(smcr::sys::raw_syscall(SYS_pidfd_getfd, pidfd, fd, 0));
    sys::close(pidfd);
  }
  if (got < 0) {
    if (errno == ENOSYS) g_unsupported.store(true, std::memory_order_relaxed);
    SMCR_LOG(2, "pidfd_getfd(%d, %d): %s", pid, fd, strerror(errno));
    return -1;
  }
  got = sys::hide_fd(got);
  struct stat st {};
  if (sys::fstat(got, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_ino != ino) {
    // The number names another file now: the connection is gone there.
    sys::close(got);
    return -1;
  }
  if (dev) *dev = st.st_dev;
  return got;
}

}  // namespace smcr::peer_fd
