// Raw-syscall client of the pinned smcr maps. See option.h.
#include "option.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "core/raw_syscall.h"
#include "smcr_abi.h"

static_assert(smcr::bpfopt::kWeSentSynOpt == SMCR_R_WE_SENT_SYN_OPT);
static_assert(smcr::bpfopt::kPeerSynAckHadOpt == SMCR_R_PEER_SYNACK_HAD_OPT);
static_assert(smcr::bpfopt::kPeerSynHadOpt == SMCR_R_PEER_SYN_HAD_OPT);
static_assert(smcr::bpfopt::kWeSentSynAckOpt == SMCR_R_WE_SENT_SYNACK_OPT);
static_assert(smcr::bpfopt::kSmcOk == SMCR_R_SMC_OK);
static_assert(smcr::bpfopt::kActive == SMCR_R_ACTIVE);
static_assert(smcr::bpfopt::kPassive == SMCR_R_PASSIVE);
static_assert(smcr::bpfopt::kDone == SMCR_R_DONE);
static_assert(smcr::bpfopt::kListener == SMCR_R_LISTENER);
static_assert(smcr::bpfopt::kSynAckFailed == SMCR_R_SYNACK_FAILED);

namespace smcr::bpfopt {
namespace {

constexpr std::size_t kPathMax = 512;

long sys_bpf(int cmd, union bpf_attr* attr) { return smcr::sys::raw_syscall(SYS_bpf, cmd, attr, sizeof(*attr)); }

std::atomic<void (*)(int)> g_forget_fd{nullptr};

void sys_close(int fd) {
  int saved = errno;
  if (auto forget = g_forget_fd.load(std::memory_order_acquire)) forget(fd);
  smcr::sys::raw_syscall(SYS_close, fd);
  errno = saved;
}

// <pin dir>/<name> into buf without malloc. False (ENAMETOOLONG) if too long.
bool build_path(char* buf, const char* name) {
  const char* dir = getenv(SMCR_PIN_DIR_ENV);
  if (!dir || !*dir) dir = SMCR_PIN_DIR_DEFAULT;
  std::size_t dl = strlen(dir), nl = strlen(name);
  if (dl + 1 + nl + 1 > kPathMax) {
    errno = ENAMETOOLONG;
    return false;
  }
  memcpy(buf, dir, dl);
  buf[dl] = '/';
  memcpy(buf + dl + 1, name, nl + 1);
  return true;
}

// A cached map fd: (low 32 bits of the pin's inode << 32) | (fd + 1); 0 = none.
// bpffs inode numbers come from get_next_ino() (never reused in practice), so a
// new pin at the same path (program reloaded) has a different inode.
struct CachedMap {
  const char* name;
  std::uint32_t file_flags;
  std::atomic<std::uint64_t> v{0};
};

CachedMap g_optin{SMCR_PIN_OPTIN, 0, {}};
CachedMap g_result{SMCR_PIN_RESULT, BPF_F_RDONLY, {}};

std::atomic<int (*)(int)> g_place_fd{nullptr};

int fd_of(std::uint64_t v) { return static_cast<int>(v & 0xffffffffu) - 1; }

// Close an fd we cached earlier, but only if it still is one of our maps (the
// application might have closed it and reused the number).
void close_if_ours(int fd) {
  struct bpf_map_info info;
  memset(&info, 0, sizeof(info));
  union bpf_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.info.bpf_fd = static_cast<std::uint32_t>(fd);
  attr.info.info_len = sizeof(info);
  attr.info.info = reinterpret_cast<std::uint64_t>(&info);
  if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &attr) != 0) return;
  if (info.type != BPF_MAP_TYPE_SK_STORAGE || strncmp(info.name, "smcr_", 5) != 0) return;
  sys_close(fd);
}

// Forget the cached fd (if it is still `seen`), closing it if requested.
void drop(CachedMap& c, std::uint64_t seen, bool close_it) {
  if (seen && c.v.compare_exchange_strong(seen, 0) && close_it) close_if_ours(fd_of(seen));
}

// Returns a map fd for the pin, or -1 with errno (ENOENT: not loaded).
int get_fd(CachedMap& c) {
  char path[kPathMax];
  if (!build_path(path, c.name)) return -1;
  for (int attempt = 0; attempt < 4; ++attempt) {
    struct stat st;
    std::uint64_t cur = c.v.load(std::memory_order_acquire);
    if (smcr::sys::raw_syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) != 0) {
      int e = errno;
      if (e == ENOENT) drop(c, cur, true);  // unloaded: release the old map
      errno = e;
      return -1;
    }
    std::uint32_t ino = static_cast<std::uint32_t>(st.st_ino);
    if (cur && (cur >> 32) == ino) return fd_of(cur);

    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.pathname = reinterpret_cast<std::uint64_t>(path);
    attr.file_flags = c.file_flags;
    long fd = sys_bpf(BPF_OBJ_GET, &attr);  // bpf fds are always O_CLOEXEC
    if (fd < 0) return -1;
    if (auto place = g_place_fd.load(std::memory_order_acquire)) fd = place(static_cast<int>(fd));
    std::uint64_t nv = (static_cast<std::uint64_t>(ino) << 32) | static_cast<std::uint32_t>(fd + 1);
    if (c.v.compare_exchange_strong(cur, nv, std::memory_order_acq_rel)) {
      if (cur) close_if_ours(fd_of(cur));
      return static_cast<int>(fd);
    }
    sys_close(static_cast<int>(fd));  // lost a race: retry with the winner's fd
  }
  errno = EAGAIN;
  return -1;
}

// Runs op(fd); if the cached fd turned out to be gone (the application closed
// it: EBADF, or reused the number for something else: EINVAL), forget it
// without closing and retry once with a fresh one.
template <typename Op>
long with_map(CachedMap& c, Op op) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = get_fd(c);
    if (fd < 0) return -1;
    long r = op(fd);
    if (r == 0) return 0;
    int e = errno;
    if ((e == EBADF || e == EINVAL) && attempt == 0) {
      drop(c, c.v.load(std::memory_order_acquire), false);
      continue;
    }
    errno = e;
    return -1;
  }
  return -1;
}

}  // namespace

void set_fd_placer(int (*place)(int fd), void (*forget)(int fd)) {
  g_forget_fd.store(forget, std::memory_order_release);
  g_place_fd.store(place, std::memory_order_release);
}

bool opt_in(int sockfd) {
  if (sockfd < 0) {
    errno = EBADF;
    return false;
  }
  const int key = sockfd;
  const std::uint32_t val = SMCR_OPTIN_MAGIC;
  long r = with_map(g_optin, [&](int mapfd) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.map_fd = static_cast<std::uint32_t>(mapfd);
    attr.key = reinterpret_cast<std::uint64_t>(&key);
    attr.value = reinterpret_cast<std::uint64_t>(&val);
    attr.flags = BPF_ANY;
    return sys_bpf(BPF_MAP_UPDATE_ELEM, &attr);
  });
  return r == 0;
}

namespace {
long lookup_flags(int mapfd, int sockfd, std::uint32_t* val) {
  const int key = sockfd;
  union bpf_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.map_fd = static_cast<std::uint32_t>(mapfd);
  attr.key = reinterpret_cast<std::uint64_t>(&key);
  attr.value = reinterpret_cast<std::uint64_t>(val);
  return sys_bpf(BPF_MAP_LOOKUP_ELEM, &attr);
}
}  // namespace

bool read_flags(int sockfd, std::uint32_t* flags) {
  if (sockfd < 0) {
    errno = EBADF;
    return false;
  }
  std::uint32_t val = 0;
  long r = with_map(g_result, [&](int mapfd) { return lookup_flags(mapfd, sockfd, &val); });
  if (r != 0) return false;
  if (flags) *flags = val;
  return true;
}

namespace {
Result result_of(std::uint32_t flags) { return (flags & SMCR_R_SMC_OK) ? Result::kSmcBoth : Result::kNotBoth; }

// read_flags through `mapfd`, which the caller has just had from get_fd (a
// pin check saved); a cached fd that went stale takes read_flags' way.
bool read_flags_via(int mapfd, int sockfd, std::uint32_t* flags) {
  if (sockfd < 0) {
    errno = EBADF;
    return false;
  }
  if (lookup_flags(mapfd, sockfd, flags) == 0) return true;
  if (errno != EBADF && errno != EINVAL) return false;
  return read_flags(sockfd, flags);
}
}  // namespace

namespace {
// The cached map fd without the pin check (-1 if none). A record found
// through it is the current program's: a replaced program's map gets no
// new records. A miss must be asked again through get_fd.
int cached_fd(CachedMap& c) {
  std::uint64_t v = c.v.load(std::memory_order_acquire);
  return v ? fd_of(v) : -1;
}
}  // namespace

Result read_result(int sockfd) {
  int saved = errno;
  std::uint32_t f = 0;
  if (int fast = cached_fd(g_result); fast >= 0 && sockfd >= 0 && lookup_flags(fast, sockfd, &f) == 0) {
    errno = saved;
    return result_of(f);
  }
  int mapfd = get_fd(g_result);
  if (mapfd < 0) {
    Result res = (errno == ENOENT || errno == ENOTDIR) ? Result::kNotLoaded : Result::kError;
    if (res == Result::kNotLoaded) errno = saved;
    return res;
  }
  if (!read_flags_via(mapfd, sockfd, &f)) {
    if (errno == ENOENT) {
      errno = saved;
      return Result::kNotOptedIn;
    }
    return Result::kError;
  }
  return result_of(f);
}

namespace {
// Whether the program registered this listener (its record says so): only
// then do its children get records.
bool registered_listener(int mapfd, int listener_fd) {
  std::uint32_t f = 0;
  return listener_fd >= 0 && read_flags_via(mapfd, listener_fd, &f) && (f & SMCR_R_LISTENER);
}
}  // namespace

Result read_accepted_result(int listener_fd, int sockfd, int timeout_ms) {
  int saved = errno;
  int mapfd = sockfd >= 0 ? cached_fd(g_result) : -1;
  bool checked = mapfd < 0;
  if (checked && (mapfd = get_fd(g_result)) < 0) return read_result(sockfd);
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    std::uint32_t f = 0;
    bool found = checked ? read_flags_via(mapfd, sockfd, &f) : lookup_flags(mapfd, sockfd, &f) == 0;
    if (!found && !checked) {
      checked = true;  // ask again through a checked fd
      if ((mapfd = get_fd(g_result)) < 0) return read_result(sockfd);
      continue;
    }
    if (found) {
      if (f & SMCR_R_DONE) {
        errno = saved;
        return result_of(f);  // the passive-established callback ran
      }
    } else if (errno != ENOENT) {
      return Result::kError;
    } else if (!registered_listener(mapfd, listener_fd)) {
      errno = saved;
      return Result::kNotOptedIn;  // no record will ever come
    }
    // The callback runs in the softirq that queued the child, right after
    // queueing it; only a stalled (virtual) CPU makes it late. Answering
    // "not both" here while the SYN-ACK did carry the option would leave the
    // client's CLC Proposal in the application's stream, so wait it out.
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    long waited_us = (now.tv_sec - start.tv_sec) * 1000000 + (now.tv_nsec - start.tv_nsec) / 1000;
    if (waited_us >= static_cast<long>(timeout_ms) * 1000) break;
    // 20 us (the softirq on the other CPU takes about that), then 1 ms.
    timespec pause{0, waited_us < 2000 ? 20000 : 1000000};
    nanosleep(&pause, nullptr);
  }
  errno = saved;
  return Result::kUndecided;
}

namespace {

// The loads whose "offers" map this process has mapped: a listener is
// registered by the load current when it opts in, and that load's map
// counts its SYN-ACKs for as long as the listener lives (a reload starts
// without it).
struct OffersMap {
  std::uint32_t ino = 0;
  const std::uint64_t* offered = nullptr;
};
constexpr int kOffersMaps = 8;
OffersMap g_offers[kOffersMaps];
std::atomic<int> g_offers_count{0};
std::atomic<bool> g_offers_lock{false};
constexpr std::size_t kOffersBytes = SMCR_OFFERS_PORTS * sizeof(std::uint64_t);

const OffersMap* offers_entry(std::uint32_t slot) {
  int i = static_cast<int>(slot >> 16) - 1;
  if (i < 0 || i >= g_offers_count.load(std::memory_order_acquire)) return nullptr;
  return &g_offers[i];
}

}  // namespace

std::uint32_t offer_slot(std::uint16_t port) {
  int saved = errno;
  char path[kPathMax];
  struct stat st;
  if (port == 0 || !build_path(path, SMCR_PIN_OFFERS) || smcr::sys::raw_syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) != 0) {
    errno = saved;
    return 0;  // an older program without the map
  }
  std::uint32_t ino = static_cast<std::uint32_t>(st.st_ino);
  while (g_offers_lock.exchange(true, std::memory_order_acquire)) {
  }
  int n = g_offers_count.load(std::memory_order_relaxed);
  int found = -1;
  for (int i = 0; i < n; ++i)
    if (g_offers[i].ino == ino) found = i;
  if (found < 0 && n < kOffersMaps) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.pathname = reinterpret_cast<std::uint64_t>(path);
    // Read-write open, read-only mapping: mmap() refuses a shared mapping
    // through a read-only descriptor; the map is frozen (smcr_ctl), so the
    // mapping cannot be made writable either.
    attr.file_flags = 0;
    long fd = sys_bpf(BPF_OBJ_GET, &attr);
    void* offered = MAP_FAILED;
    if (fd >= 0) {
      offered = mmap(nullptr, kOffersBytes, PROT_READ, MAP_SHARED, static_cast<int>(fd), 0);
      sys_close(static_cast<int>(fd));  // the mapping keeps the map
    }
    if (offered != MAP_FAILED) {
      g_offers[n] = OffersMap{ino, static_cast<const std::uint64_t*>(offered)};
      found = n;
      g_offers_count.store(n + 1, std::memory_order_release);
    }
  }
  g_offers_lock.store(false, std::memory_order_release);
  errno = saved;
  return found < 0 ? 0 : (static_cast<std::uint32_t>(found + 1) << 16) | port;
}

std::uint64_t offers_counted(std::uint32_t slot) {
  const OffersMap* m = offers_entry(slot);
  if (!m) return 0;
  // The program's increment for a child happened before the kernel queued
  // the child (its SYN-ACK went first), and our accept() took it from that
  // queue after: the queue's lock orders the two.
  return std::atomic_ref<const std::uint64_t>(m->offered[static_cast<std::uint16_t>(slot)])
      .load(std::memory_order_acquire);
}

bool offers_pending(std::uint32_t slot, std::uint64_t matched) {
  return !offers_entry(slot) || offers_counted(slot) != matched;
}

bool loaded() {
  int saved = errno;
  bool ok = get_fd(g_result) >= 0;
  if (ok) {
    char path[kPathMax];
    struct stat st;
    ok = build_path(path, SMCR_PIN_OPTIN) && smcr::sys::raw_syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) == 0;
  }
  errno = saved;
  return ok;
}

const char* to_string(Result r) {
  switch (r) {
    case Result::kNotLoaded: return "not-loaded";
    case Result::kNotOptedIn: return "not-opted-in";
    case Result::kSmcBoth: return "smc-both";
    case Result::kNotBoth: return "not-both";
    case Result::kError: return "error";
    case Result::kUndecided: return "undecided";
  }
  return "?";
}

}  // namespace smcr::bpfopt
