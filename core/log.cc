#include "core/log.h"

#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <new>

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/env.h"
#include "core/sys.h"

namespace smcr {

std::atomic<uint64_t> sys::g_own_fds[sys::kOwnFdBits / 64];

int sys::hidden_fd_base() {
  static const int base = [] {
    rlimit64 r{};
    if (smcr::sys::raw_syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, nullptr, &r) != 0) return 0;
    // Below 2048 there is no upper half worth keeping apart.
    return r.rlim_cur >= 2048 ? static_cast<int>(std::min<rlim64_t>(r.rlim_cur / 2, 1 << 20)) : 0;
  }();
  return base;
}

int sys::dup_hidden(int fd) {
  int base = hidden_fd_base();
  if (base > 0) {
    int high = fcntl(fd, F_DUPFD_CLOEXEC, base);
    if (high >= 0) {
      note_own_fd(high);
      return high;
    }
  }
  int low = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (low >= 0) note_own_fd(low);
  return low;
}

int sys::hide_fd(int fd) {
  if (fd < 0) return fd;
  int base = hidden_fd_base();
  int high = base > 0 && fd < base ? fcntl(fd, F_DUPFD_CLOEXEC, base) : -1;
  if (high < 0) {
    note_own_fd(fd);
    return fd;
  }
  close(fd);
  note_own_fd(high);
  return high;
}

int64_t sys::now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t sys::now_ms() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

int log_level() {
  static const int level = [] {
    const char* v = env("SMCR_DEBUG");
    return v ? atoi(v) : 0;
  }();
  return level;
}

void log_write(int, const char* fmt, ...) {
  char buf[512];
  int n = snprintf(buf, sizeof buf, "smcr[%d]: ", static_cast<int>(getpid()));
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
  va_end(ap);
  size_t len = static_cast<size_t>(n) + (m < 0 ? 0 : std::min<size_t>(m, sizeof buf - n - 2));
  buf[len++] = '\n';
  sys::write(2, buf, len);
}

const char* fallback_name(Fallback f) {
  switch (f) {
    case Fallback::kBpfNotLoaded: return "bpf_not_loaded";
    case Fallback::kPeerNoOption: return "peer_no_option";
    case Fallback::kPeerDeclined: return "peer_declined";
    case Fallback::kPeerNotClc: return "peer_not_clc";
    case Fallback::kProtocolError: return "protocol_error";
    case Fallback::kReservedValue: return "reserved_value";
    case Fallback::kNoFabric: return "no_fabric";
    case Fallback::kTimeout: return "timeout";
    case Fallback::kResources: return "resources";
    case Fallback::kInternal: return "internal";
    case Fallback::kPolicy: return "policy";
    case Fallback::kOptionUndecided: return "option_undecided";
    case Fallback::kShortFlow: return "short_flow";
    case Fallback::kOwnListener: return "own_listener";
    case Fallback::kLateConnect: return "late_connect";
    case Fallback::kCount: break;
  }
  return "unknown";
}

namespace {
// One writer at a time (the engine's refresh and the exit's final write use
// the same temporary name); a forked child starts unlocked (counters()).
std::atomic<bool> g_stats_writing{false};
// What the last write put in the file (under the lock); never destroyed:
// written at exit.
std::string& stats_last() {
  static auto* s = new std::string;
  return *s;
}
std::atomic<int64_t> g_stats_checked_ms{0};
std::atomic<bool> g_stats_error_said{false};
}  // namespace

Counters& counters() {
  static Counters* c = [] {
    // A forked child counts its own connections from zero (its stats file
    // must not repeat the parent's).
    pthread_atfork(nullptr, nullptr, [] {
      new (&counters()) Counters();
      g_stats_writing.store(false);
      stats_last().clear();
      g_stats_checked_ms.store(0);
    });
    return new Counters();  // never destroyed: read at exit
  }();
  return *c;
}

void count_fallback(Fallback f) { counters().fallback[static_cast<int>(f)].fetch_add(1, std::memory_order_relaxed); }

namespace {
// Appends to a fixed buffer without allocating (the _exit hook writes the
// counters from wherever _exit was called, a signal handler included).
struct FixedText {
  char* buf;
  size_t cap, len = 0;
  void add(const char* s) {
    while (*s && len + 1 < cap) buf[len++] = *s++;
  }
  void add(uint64_t v) {
    char digits[24];
    int n = 0;
    do digits[n++] = static_cast<char>('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0 && len + 1 < cap) buf[len++] = digits[--n];
  }
};
}  // namespace

namespace {
// Every counter with its name, in the file's order; fallback_total is
// derived. `f(name, atomic&)`.
template <typename F>
void for_each_counter(Counters& c, F&& f) {
  f("smc_active", c.smc_active);
  f("smc_passive", c.smc_passive);
  f("tx_bytes", c.tx_bytes);
  f("rx_bytes", c.rx_bytes);
  f("cdc_sent", c.cdc_sent);
  f("cdc_in_memory", c.cdc_in_memory);
  f("close_in_memory", c.close_in_memory);
  f("bells_sent", c.bells_sent);
  f("peer_doorbells", c.peer_doorbells);
  f("ready_set_marks", c.ready_set_marks);
  f("ready_set_wakes", c.ready_set_wakes);
  f("bells_on_cdc", c.bells_on_cdc);
  f("bells_fetched", c.bells_fetched);
  f("bell_fetch_failed", c.bell_fetch_failed);
  f("epoll_from_memory", c.epoll_from_memory);
  f("epoll_ctl_in_memory", c.epoll_ctl_in_memory);
  f("accept_unoffered", c.accept_unoffered);
  f("link_wakeups", c.link_wakeups);
  f("link_app_polled", c.link_app_polled);
  f("cdc_received", c.cdc_received);
  f("link_failovers", c.link_failovers);
  f("conn_failovers", c.conn_failovers);
  f("links_added", c.links_added);
  f("add_link_rejected", c.add_link_rejected);
  f("llc_sent", c.llc_sent);
  f("llc_received", c.llc_received);
  f("test_links_answered", c.test_links_answered);
  f("lgr_created", c.lgr_created);
  f("lgr_reused", c.lgr_reused);
  f("rmb_pooled", c.rmb_pooled);
  f("rmb_reused", c.rmb_reused);
  f("rmb_pool_evicted", c.rmb_pool_evicted);
  f("confirm_deferred", c.confirm_deferred);
  f("confirm_waits", c.confirm_waits);
  f("clc_threaded", c.clc_threaded);
  f("clc_connect_async", c.clc_connect_async);
  f("clc_early_bytes", c.clc_early_bytes);
  f("clc_abandoned", c.clc_abandoned);
  f("aborts", c.aborts);
  f("peer_vanished", c.peer_vanished);
  f("handovers", c.handovers);
  f("rehomed", c.rehomed);
  f("adopted", c.adopted);
  f("rehomed_peer", c.rehomed_peer);
  f("exec_carried", c.exec_carried);
  f("exec_adopted", c.exec_adopted);
  f("exec_pending", c.exec_pending);
  f("link_send_errors", c.link_send_errors);
  f("protocol_violations", c.protocol_violations);
}
}  // namespace

size_t format_counters_to(char* buf, size_t cap) {
  Counters& c = counters();
  FixedText out{buf, cap};
  auto put = [&](const char* k, uint64_t v) {
    out.add(k);
    out.add(" ");
    out.add(v);
    out.add("\n");
  };
  bool fallbacks_done = false;
  for_each_counter(c, [&](const char* name, std::atomic<uint64_t>& v) {
    if (!fallbacks_done && std::strcmp(name, "tx_bytes") == 0) {
      fallbacks_done = true;
      uint64_t total = 0;
      for (int i = 0; i < static_cast<int>(Fallback::kCount); ++i) total += c.fallback[i].load();
      put("fallback_total", total);
      for (int i = 0; i < static_cast<int>(Fallback::kCount); ++i) {
        out.add("fallback.");
        put(fallback_name(static_cast<Fallback>(i)), c.fallback[i].load());
      }
    }
    put(name, v.load());
    if (std::strcmp(name, "link_send_errors") == 0)
      put("last_link_send_errno", static_cast<uint64_t>(c.last_link_send_errno.load()));
  });
  if (cap > 0) buf[out.len] = 0;
  return out.len;
}

void add_counters(const char* text) {
  Counters& c = counters();
  for (const char* line = text; line && *line;) {
    const char* space = std::strchr(line, ' ');
    const char* eol = std::strchr(line, '\n');
    if (!space || (eol && space > eol)) break;
    std::string name(line, static_cast<size_t>(space - line));
    uint64_t v = std::strtoull(space + 1, nullptr, 10);
    bool found = false;
    for_each_counter(c, [&](const char* k, std::atomic<uint64_t>& a) {
      if (!found && name == k) {
        a.fetch_add(v, std::memory_order_relaxed);
        found = true;
      }
    });
    for (int i = 0; !found && i < static_cast<int>(Fallback::kCount); ++i)
      if (name == std::string("fallback.") + fallback_name(static_cast<Fallback>(i))) {
        c.fallback[i].fetch_add(v, std::memory_order_relaxed);
        found = true;
      }
    line = eol ? eol + 1 : nullptr;
  }
}

std::string format_counters() {
  char buf[4096];
  return std::string(buf, format_counters_to(buf, sizeof buf));
}


namespace {

// Whether this process has counters worth a file. A forked child that took
// connections over (adopted) made none itself.
bool had_tcp_activity() {
  Counters& c = counters();
  uint64_t activity = c.smc_active + c.smc_passive + c.adopted + c.exec_adopted + c.exec_pending;
  for (auto& f : c.fallback) activity += f;
  return activity != 0;
}

// `always`: write even if unchanged since the last write (at exit: the file
// may have been removed meanwhile).
void write_stats_locked(const char* dir, bool always) {
  if (!had_tcp_activity()) return;  // e.g. a wrapper process that never used TCP
  std::string s = format_counters();
  if (!always && s == stats_last()) return;
  char path[512];
  snprintf(path, sizeof path, "%s/smcr-%d.txt", dir, static_cast<int>(getpid()));
  char tmp[520];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int fd = static_cast<int>(smcr::sys::raw_syscall(SYS_openat, AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  int err = 0;
  if (fd < 0) {
    err = errno;
  } else {
    if (sys::write(fd, s.data(), s.size()) != static_cast<ssize_t>(s.size())) err = errno ? errno : EIO;
    sys::close(fd);
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) unlink(tmp);
  }
  if (err) {
    // Said once per process, whatever the log level: --stats asked for it.
    if (!g_stats_error_said.exchange(true)) log_write(0, "cannot write stats file %s: %s", path, strerror(err));
    return;
  }
  stats_last() = std::move(s);
}

const char* stats_dir() {  // the snapshot's (core/env.h): fixed for the process
  static const char* const dir = [] {
    const char* d = env("SMCR_STATS_DIR");
    return d && *d ? d : nullptr;
  }();
  return dir;
}
}  // namespace

void write_stats_file_from_exit() {
  const char* dir = stats_dir();
  if (!dir) return;
  if (!had_tcp_activity()) return;
  // Not waiting long: the holder may be the thread this call interrupted.
  for (int i = 0; g_stats_writing.exchange(true, std::memory_order_acquire); ++i) {
    if (i > 2000) return;
    timespec ts{0, 1000};
    nanosleep(&ts, nullptr);
  }
  char text[4096], path[512], tmp[520];
  size_t n = format_counters_to(text, sizeof text);
  FixedText p{path, sizeof path};
  p.add(dir);
  p.add("/smcr-");
  p.add(static_cast<uint64_t>(smcr::sys::raw_syscall(SYS_getpid)));
  p.add(".txt");
  path[p.len] = 0;
  FixedText t{tmp, sizeof tmp};
  t.add(path);
  t.add(".tmp");
  tmp[t.len] = 0;
  int fd = static_cast<int>(smcr::sys::raw_syscall(SYS_openat, AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd >= 0) {
    bool ok = sys::write(fd, text, n) == static_cast<ssize_t>(n);
    sys::close(fd);
    // The *at forms: aarch64 has no rename, unlink or open system calls.
    if (!ok || smcr::sys::raw_syscall(SYS_renameat2, AT_FDCWD, tmp, AT_FDCWD, path, 0) != 0) smcr::sys::raw_syscall(SYS_unlinkat, AT_FDCWD, tmp, 0);
  }
  g_stats_writing.store(false, std::memory_order_release);
}

bool stats_enabled() { return stats_dir() != nullptr; }

void write_stats_file() {
  const char* dir = stats_dir();
  if (!dir) return;
  // The engine's refresh takes a moment at most; a holder frozen by a
  // signal or a debugger must not hold the exit forever.
  for (int i = 0; g_stats_writing.exchange(true, std::memory_order_acquire); ++i) {
    if (i > 2000) return;
    timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
  }
  write_stats_locked(dir, true);
  g_stats_writing.store(false, std::memory_order_release);
}

int stats_refresh_ms() { return stats_dir() ? kStatsRefreshMs : -1; }

void refresh_stats_file(int64_t now_ms) {
  const char* dir = stats_dir();
  if (!dir) return;
  int64_t last = g_stats_checked_ms.load(std::memory_order_relaxed);
  if (now_ms - last < kStatsRefreshMs) return;
  g_stats_checked_ms.store(now_ms, std::memory_order_relaxed);
  if (g_stats_writing.exchange(true, std::memory_order_acquire)) return;
  write_stats_locked(dir, false);
  g_stats_writing.store(false, std::memory_order_release);
}

}  // namespace smcr
