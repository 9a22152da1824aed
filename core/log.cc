#include "core/log.h"

#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <new>

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/env.h"
#include "core/sys.h"

namespace smcr {

namespace {
int hidden_fd_base() {
  static const int base = [] {
    rlimit64 r{};
    if (::syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, nullptr, &r) != 0) return 0;
    // Below 2048 there is no upper half worth keeping apart.
    return r.rlim_cur >= 2048 ? static_cast<int>(std::min<rlim64_t>(r.rlim_cur / 2, 1 << 20)) : 0;
  }();
  return base;
}
}  // namespace

int sys::dup_hidden(int fd) {
  int base = hidden_fd_base();
  if (base > 0) {
    int high = fcntl(fd, F_DUPFD_CLOEXEC, base);
    if (high >= 0) return high;
  }
  return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

int sys::hide_fd(int fd) {
  int base = hidden_fd_base();
  if (fd < 0 || base == 0 || fd >= base) return fd;
  int high = fcntl(fd, F_DUPFD_CLOEXEC, base);
  if (high < 0) return fd;
  close(fd);
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

Counters& counters() {
  static Counters* c = [] {
    // A forked child counts its own connections from zero (its stats file
    // must not repeat the parent's).
    pthread_atfork(nullptr, nullptr, [] { new (&counters()) Counters(); });
    return new Counters();  // never destroyed: read at exit
  }();
  return *c;
}

void count_fallback(Fallback f) { counters().fallback[static_cast<int>(f)].fetch_add(1, std::memory_order_relaxed); }

std::string format_counters() {
  Counters& c = counters();
  std::string out;
  char line[128];
  auto put = [&](const char* k, uint64_t v) {
    snprintf(line, sizeof line, "%s %llu\n", k, static_cast<unsigned long long>(v));
    out += line;
  };
  put("smc_active", c.smc_active.load());
  put("smc_passive", c.smc_passive.load());
  uint64_t total = 0;
  for (int i = 0; i < static_cast<int>(Fallback::kCount); ++i) total += c.fallback[i].load();
  put("fallback_total", total);
  for (int i = 0; i < static_cast<int>(Fallback::kCount); ++i) {
    std::string k = std::string("fallback.") + fallback_name(static_cast<Fallback>(i));
    put(k.c_str(), c.fallback[i].load());
  }
  put("tx_bytes", c.tx_bytes.load());
  put("rx_bytes", c.rx_bytes.load());
  put("cdc_sent", c.cdc_sent.load());
  put("cdc_in_memory", c.cdc_in_memory.load());
  put("bells_sent", c.bells_sent.load());
  put("bells_on_cdc", c.bells_on_cdc.load());
  put("epoll_from_memory", c.epoll_from_memory.load());
  put("cdc_received", c.cdc_received.load());
  put("link_failovers", c.link_failovers.load());
  put("conn_failovers", c.conn_failovers.load());
  put("links_added", c.links_added.load());
  put("add_link_rejected", c.add_link_rejected.load());
  put("llc_sent", c.llc_sent.load());
  put("llc_received", c.llc_received.load());
  put("lgr_created", c.lgr_created.load());
  put("lgr_reused", c.lgr_reused.load());
  put("rmb_pooled", c.rmb_pooled.load());
  put("rmb_reused", c.rmb_reused.load());
  put("confirm_deferred", c.confirm_deferred.load());
  put("confirm_waits", c.confirm_waits.load());
  put("clc_threaded", c.clc_threaded.load());
  put("aborts", c.aborts.load());
  put("handovers", c.handovers.load());
  put("link_send_errors", c.link_send_errors.load());
  put("last_link_send_errno", static_cast<uint64_t>(c.last_link_send_errno.load()));
  put("protocol_violations", c.protocol_violations.load());
  return out;
}

void write_stats_file() {
  const char* dir = env("SMCR_STATS_DIR");
  if (!dir || !*dir) return;
  Counters& c = counters();
  uint64_t activity = c.smc_active + c.smc_passive;
  for (auto& f : c.fallback) activity += f;
  if (activity == 0) return;  // e.g. a wrapper process that never used TCP
  char path[512];
  snprintf(path, sizeof path, "%s/smcr-%d.txt", dir, static_cast<int>(getpid()));
  char tmp[520];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int fd = static_cast<int>(::syscall(SYS_open, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd < 0) return;
  std::string s = format_counters();
  sys::write(fd, s.data(), s.size());
  sys::close(fd);
  rename(tmp, path);
}

}  // namespace smcr
