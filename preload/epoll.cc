// See preload/epoll.h.
#include "preload/epoll.h"

#include <errno.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/connection.h"
#include "core/cpu_relax.h"
#include "core/env.h"
#include "core/log.h"
#include "core/spin_backoff.h"
#include "core/sys.h"
#include "preload/fd_table.h"

namespace smcr::preload {

FdTable& fd_table();

namespace {

// Epoll sets and registered fds are followed up to this number; beyond it
// epoll calls pass straight through (the connection is armed as usual).
constexpr int kMaxTracked = 1 << 16;

// How long epoll_wait watches parked connections before sleeping:
// SMCR_EPOLL_SPIN_US (0: never), default kDefaultSpinUs.
constexpr int kDefaultSpinUs = 50;
int64_t spin_budget_ns() {
  static const int64_t ns = int64_t{1000} * env_long("SMCR_EPOLL_SPIN_US", kDefaultSpinUs, 0, 10000);
  return ns;
}

// SMCR_EPOLL_DEFER=0 turns parking off (connections armed as before).
bool deferral_enabled() {
  static const bool on = env_long("SMCR_EPOLL_DEFER", 1, 0, 1) != 0;
  return on;
}

// Parked connections per epoll set at a time (see EpollGroup::park).
constexpr size_t kMaxParked = 64;

bool eligible(uint32_t events) {
  return (events & EPOLLIN) && !(events & (EPOLLONESHOT | EPOLLEXCLUSIVE));
}

class EpollGroup final : public ReadinessDeferral {
 public:
  explicit EpollGroup(int epfd) : epfd_(epfd), generation_(process_generation()) {}

  bool current() const { return generation_ == process_generation(); }

  bool park(Connection* c, int key) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (sleepers_ > 0 || disabled_) return false;
    auto it = regs_.find(key);
    if (it == regs_.end() || it->second.conn != c) return false;
    if (!it->second.listed) {
      // Every wait looks at each parked connection: a bounded few, the
      // most recently active; the rest are armed as usual.
      if (parked_.size() >= kMaxParked) return false;
      it->second.listed = true;
      parked_.push_back(key);
      has_parked_.store(true, std::memory_order_relaxed);
    }
    return true;
  }

  // Takes a reference of `c` (the caller's).
  void add(int fd, Connection* c, const epoll_event& ev) {
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      if (disabled_) {
        c->unref();
        return;
      }
      auto [it, fresh] = regs_.try_emplace(fd);
      if (!fresh) {  // the number was reused without our seeing the close
        c->unref();
        return;
      }
      it->second.conn = c;
      it->second.events = ev.events;
      it->second.data = ev.data.u64;
    }
    if (!c->set_deferral(this, fd)) {
      // In another epoll set too: neither parks it.
      c->forbid_deferral();
      remove(fd);
    }
  }

  // Registered before the accepted connection was installed (the client's
  // Confirm not read yet): added once it is.
  void add_pending(int fd, const epoll_event& ev) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (disabled_) return;
    pending_.emplace_back(fd, ev);
    has_pending_.store(true, std::memory_order_relaxed);
  }

  void resolve_pending() {
    if (!has_pending_.load(std::memory_order_relaxed)) return;
    std::vector<std::pair<int, epoll_event>> ready;
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      auto keep = std::remove_if(pending_.begin(), pending_.end(), [&](const auto& p) {
        if (fd_table().has_conn(p.first)) {
          ready.push_back(p);
          return true;
        }
        return fd_table().kind(p.first) != kFdAccepting;  // fell back, or closed
      });
      pending_.erase(keep, pending_.end());
      has_pending_.store(!pending_.empty(), std::memory_order_relaxed);
    }
    for (auto& [fd, ev] : ready) {
      Connection* c = fd_table().get(fd);
      if (!c) continue;
      if (c->deferrable()) add(fd, c, ev);
      else c->unref();
    }
  }

  // Every SMC-R fd registered in this set, by its registration's data, so
  // that a hang-up the kernel reports can be completed with EPOLLERR.
  void note_smc(int op, int fd, const epoll_event* ev) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    // Both directions are kept so that a registration costs a lookup, not a
    // scan of every SMC-R fd in the set (a thousand connections registered
    // one by one were a million steps).
    if (auto old = smc_data_of_fd_.find(fd); old != smc_data_of_fd_.end()) {
      auto d = smc_data_.find(old->second);
      if (d != smc_data_.end() && d->second == fd) smc_data_.erase(d);
      smc_data_of_fd_.erase(old);
    }
    if (op != EPOLL_CTL_DEL && ev) {
      // Two fds registered with the same data: the latest is the one a
      // hang-up with that data is completed for, as before.
      smc_data_[ev->data.u64] = fd;
      smc_data_of_fd_[fd] = ev->data.u64;
    }
    has_smc_.store(!smc_data_.empty(), std::memory_order_relaxed);
  }
  void add_errors(epoll_event* events, int n) {
    if (!has_smc_.load(std::memory_order_relaxed)) return;
    for (int i = 0; i < n; ++i) {
      if (!(events[i].events & EPOLLHUP) || (events[i].events & EPOLLERR)) continue;
      int fd;
      {
        std::lock_guard<std::recursive_mutex> lock(mu_);
        auto it = smc_data_.find(events[i].data.u64);
        if (it == smc_data_.end()) continue;
        fd = it->second;
      }
      if (Connection* c = fd_table().get(fd)) {
        if (c->socket_error_pending()) events[i].events |= EPOLLERR;
        c->unref();
      }
    }
  }

  // EPOLL_CTL_MOD of a registered fd; false if it is not registered here.
  bool modify(int fd, const epoll_event& ev) {
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      for (auto& p : pending_)
        if (p.first == fd) p.second = ev;
      auto it = regs_.find(fd);
      if (it == regs_.end()) return false;
      if (eligible(ev.events)) {
        it->second.events = ev.events;
        it->second.data = ev.data.u64;
        return true;
      }
    }
    remove(fd);
    return true;
  }

  void remove(int fd) {
    Connection* c = nullptr;
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [&](const auto& p) { return p.first == fd; }),
                     pending_.end());
      auto it = regs_.find(fd);
      if (it == regs_.end()) return;
      c = it->second.conn;
      if (it->second.listed) parked_.erase(std::find(parked_.begin(), parked_.end(), fd));
      regs_.erase(it);
    }
    c->set_deferral(nullptr, -1);
    c->unref();
  }

  // The epoll set was closed: everything forgotten, the group reusable.
  void reset() {
    std::vector<Connection*> conns;
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      for (auto& [fd, reg] : regs_) {
        conns.push_back(reg.conn);
        forget_registration(fd);
      }
      for (auto& p : pending_) forget_registration(p.first);
      regs_.clear();
      parked_.clear();
      pending_.clear();
      smc_data_.clear();
      smc_data_of_fd_.clear();
      has_smc_.store(false);
      has_parked_.store(false);
      has_pending_.store(false);
      disabled_ = false;
      spin_.reset();
      probe_.reset();
    }
    for (Connection* c : conns) {
      c->set_deferral(nullptr, -1);
      c->unref();
    }
  }

  // Something may sleep on this epoll set without asking us (nested in
  // another, or polled): nothing is parked in it again.
  void disable() {
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      if (disabled_) return;
      disabled_ = true;
      pending_.clear();
      has_pending_.store(false);
    }
    arm_parked();
  }

  // Events of parked connections that have data, into out[0..max). Round
  // robin, as the kernel's ready list (an fd it reports goes to the back):
  // each call starts after the last connection the previous one reported,
  // so busy connections beyond `max` are not starved by the first ones.
  int collect(epoll_event* out, int max) {
    if (!has_parked_.load(std::memory_order_relaxed)) return 0;
    std::lock_guard<std::recursive_mutex> lock(mu_);
    int n = 0;
    bool dropped = false;
    const size_t count = parked_.size();
    const size_t start = count ? rotation_ % count : 0;
    for (size_t k = 0; k < count; ++k) {
      const size_t i = (start + k) % count;
      auto it = regs_.find(parked_[i]);
      if (it == regs_.end()) continue;
      Registration& reg = it->second;
      bool writable = false;
      uint64_t mark = 0;
      switch (reg.conn->poll_parked(this, &writable, &mark)) {
        case Connection::Parked::kGone:
          reg.listed = false;
          dropped = true;
          break;
        case Connection::Parked::kReadable:
          // Edge-triggered: each arrival once, as the kernel reports it.
          if ((reg.events & EPOLLET) && reg.reported && reg.reported_mark == mark) break;
          if (n < max) {
            reg.reported = true;
            reg.reported_mark = mark;
            out[n].events = (reg.events & (EPOLLIN | EPOLLRDNORM)) |
                            (writable ? reg.events & (EPOLLOUT | EPOLLWRNORM) : 0);
            out[n].data.u64 = reg.data;
            ++n;
            rotation_ = i + 1;
          }
          break;
        case Connection::Parked::kBusy:
        case Connection::Parked::kEmpty:
          break;
      }
    }
    if (dropped) {
      parked_.erase(std::remove_if(parked_.begin(), parked_.end(),
                                   [&](int fd) {
                                     auto it = regs_.find(fd);
                                     return it == regs_.end() || !it->second.listed;
                                   }),
                    parked_.end());
      has_parked_.store(!parked_.empty(), std::memory_order_relaxed);
    }
    if (n) counters().epoll_from_memory.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    return n;
  }

  bool has_parked() const { return has_parked_.load(std::memory_order_relaxed); }

  // With room for one event only, whether this call looks at the kernel's
  // set before the parked connections: every fourth call after events came
  // from memory, so that fds the kernel reports (a listener, a pipe, an
  // armed connection) are not starved by parked ones that always have data.
  // (A hint kept without the mutex, on every epoll_wait's path: threads
  // sharing the set may miscount a turn, never starve the kernel's fds.)
  bool kernel_turn() {
    if (memory_streak_.load(std::memory_order_relaxed) < 3) return false;
    memory_streak_.store(0, std::memory_order_relaxed);
    return true;
  }
  void returned(bool from_memory) {
    if (from_memory) memory_streak_.fetch_add(1, std::memory_order_relaxed);
    else memory_streak_.store(0, std::memory_order_relaxed);
  }

  // A thread is about to sleep in the kernel: no connection stays parked.
  void before_sleep() {
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      ++sleepers_;
    }
    arm_parked();
  }
  void after_sleep() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    --sleepers_;
  }

  // Adaptive, as a blocking read's spin.
  SpinBackoff& spin() { return spin_; }
  // Whether a look at the kernel before a sleep (no spin) finds anything.
  SpinBackoff& probe() { return probe_; }

 private:
  struct Registration {
    Connection* conn = nullptr;  // referenced
    uint32_t events = 0;
    uint64_t data = 0;
    bool listed = false;  // in parked_
    // EPOLLET: the data mark (Connection::poll_parked) last reported.
    bool reported = false;
    uint64_t reported_mark = 0;
  };

  // The fd is in no followed epoll set any more (its set was closed).
  void forget_registration(int fd);

  void arm_parked() {
    std::vector<Connection*> conns;
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      for (int fd : parked_) {
        auto it = regs_.find(fd);
        if (it == regs_.end()) continue;
        it->second.listed = false;
        it->second.conn->ref();
        conns.push_back(it->second.conn);
      }
      parked_.clear();
      has_parked_.store(false, std::memory_order_relaxed);
    }
    for (Connection* c : conns) {
      c->arm_deferred(this);
      c->unref();
    }
  }

  int epfd_;
  uint64_t generation_;
  // Recursive: a connection examined under it (collect) may process a CDC
  // that parks it again.
  std::recursive_mutex mu_;
  std::unordered_map<int, Registration> regs_;
  std::vector<int> parked_;
  std::vector<std::pair<int, epoll_event>> pending_;
  std::unordered_map<uint64_t, int> smc_data_;  // note_smc
  std::unordered_map<int, uint64_t> smc_data_of_fd_;
  std::atomic<bool> has_parked_{false}, has_pending_{false}, has_smc_{false};
  int sleepers_ = 0;
  bool disabled_ = false;
  size_t rotation_ = 0;           // collect: where the next call starts in parked_
  std::atomic<uint32_t> memory_streak_{0};  // kernel_turn: calls answered from memory alone
  SpinBackoff spin_, probe_;
};

// Never freed: a group is reused by the next epoll set with its number, so
// a stale pointer held by a racing call stays valid memory.
std::atomic<EpollGroup*> g_groups[kMaxTracked];
// epfd + 1 of the group an SMC-R fd is registered in (0: none).
std::atomic<int> g_registered_in[kMaxTracked];

bool tracked(int fd) { return fd >= 0 && fd < kMaxTracked; }

void EpollGroup::forget_registration(int fd) {
  int mine = epfd_ + 1;
  if (tracked(fd)) g_registered_in[fd].compare_exchange_strong(mine, 0, std::memory_order_relaxed);
}

EpollGroup* group_of(int epfd) {
  if (!tracked(epfd)) return nullptr;
  EpollGroup* g = g_groups[epfd].load(std::memory_order_acquire);
  return g && g->current() ? g : nullptr;
}

EpollGroup* group_for_add(int epfd) {
  if (EpollGroup* g = group_of(epfd)) return g;
  auto* fresh = new EpollGroup(epfd);
  EpollGroup* old = g_groups[epfd].load(std::memory_order_acquire);
  // A group inherited from the parent process is left alone (its
  // connections are the parent's); this process gets its own.
  if (old && old->current()) {
    delete fresh;
    return old;
  }
  if (!g_groups[epfd].compare_exchange_strong(old, fresh, std::memory_order_acq_rel)) {
    delete fresh;
    return old && old->current() ? old : nullptr;
  }
  return fresh;
}

int ms_of(long long ns) {
  if (ns < 0) return -1;
  long long ms = (ns + 999999) / 1000000;
  return ms > 0x7fffffff ? 0x7fffffff : static_cast<int>(ms);
}

}  // namespace

int epoll_ctl_hook(EpollCtlFn real, int epfd, int op, int fd, struct epoll_event* ev) {
  int rc = real(epfd, op, fd, ev);
  if (rc != 0 || !tracked(epfd) || !tracked(fd)) return rc;
  int saved = errno;
  if (op == EPOLL_CTL_ADD) {
    if (EpollGroup* inner = group_of(fd)) inner->disable();  // nested epoll set
  }
  if (fd_table().has_conn(fd) || fd_table().kind(fd) == kFdAccepting) {
    if (EpollGroup* g = op == EPOLL_CTL_DEL ? group_of(epfd) : group_for_add(epfd)) g->note_smc(op, fd, ev);
  }
  if (!deferral_enabled()) {
    errno = saved;
    return rc;
  }
  if (op == EPOLL_CTL_DEL) {
    if (g_registered_in[fd].load(std::memory_order_relaxed) == epfd + 1) {
      g_registered_in[fd].store(0, std::memory_order_relaxed);
      if (EpollGroup* g = group_of(epfd)) g->remove(fd);
    }
    errno = saved;
    return rc;
  }
  if (!ev) return rc;
  bool smc = fd_table().has_conn(fd);
  bool accepting = !smc && fd_table().kind(fd) == kFdAccepting;
  if (!smc && !accepting) return rc;
  if (op == EPOLL_CTL_MOD && g_registered_in[fd].load(std::memory_order_relaxed) == epfd + 1) {
    EpollGroup* g = group_of(epfd);
    if (g && g->modify(fd, *ev)) {
      if (!eligible(ev->events)) g_registered_in[fd].store(0, std::memory_order_relaxed);
      errno = saved;
      return rc;
    }
    g_registered_in[fd].store(0, std::memory_order_relaxed);
  }
  // A MOD of an fd not followed yet (it was not eligible) counts as an ADD.
  if (!eligible(ev->events)) return rc;
  int prev = g_registered_in[fd].load(std::memory_order_relaxed);
  if (prev != 0 && prev != epfd + 1) {
    // A second epoll set: nobody parks it.
    if (Connection* c = fd_table().get(fd)) {
      c->forbid_deferral();
      c->unref();
    }
    errno = saved;
    return rc;
  }
  EpollGroup* g = group_for_add(epfd);
  if (!g) return rc;
  g_registered_in[fd].store(epfd + 1, std::memory_order_relaxed);
  if (accepting) {
    g->add_pending(fd, *ev);
  } else if (Connection* c = fd_table().get(fd)) {
    if (c->deferrable()) g->add(fd, c, *ev);
    else c->unref();
  }
  errno = saved;
  return rc;
}

namespace {

template <typename WaitKernel>
int wait_with_deferral(EpollGroup* g, WaitKernel& wait_kernel, struct epoll_event* events, int maxevents,
                       long long timeout_ns) {
  g->resolve_pending();
  // The kernel's set gets a look whenever memory answers (below): with one
  // slot left for it, or, with room for one event only, on its turn.
  if (maxevents == 1 && g->has_parked() && g->kernel_turn()) {
    if (int k = wait_kernel(events, 1, 0); k != 0) return k;
  }
  int n = g->collect(events, maxevents > 1 ? maxevents - 1 : 1);
  if (n == maxevents) {
    g->returned(true);
    return n;
  }
  bool blocking = timeout_ns != 0;
  int64_t budget = 0;
  bool spin = false;
  if (n == 0 && blocking) {
    budget = spin_budget_ns();
    if (timeout_ns > 0) budget = std::min<int64_t>(budget, timeout_ns);
    // Watching pays only for connections whose data would not ring.
    spin = budget > 0 && g->has_parked() && g->spin().worth_trying();
  }
  // The kernel's events every time something is returned: other fds are
  // never starved. Before a sleep the look at the kernel only spares the
  // parked connections an arming when an event is already there: a set
  // where that look keeps finding nothing (one connection per process:
  // PostgreSQL's backends) sleeps at once.
  if (n > 0 || !blocking || spin || g->probe().worth_trying()) {
    int k = wait_kernel(events + n, maxevents - n, 0);
    if (k < 0) return n > 0 ? n : k;
    if (n == 0 && blocking && !spin) {
      if (k > 0) g->probe().hit();
      else g->probe().missed();
    }
    if (n + k > 0 || !blocking) {
      g->returned(k == 0 && n > 0);
      return n + k;
    }
  }
  int64_t start = sys::now_ns();
  if (spin) {
    int64_t deadline = start + budget;
    for (uint32_t i = 1;; ++i) {
      for (int p = 0; p < 8; ++p) cpu_relax();
      if (g->has_parked()) {
        n = g->collect(events, maxevents);
        if (n > 0) {
          g->spin().hit();
          return n;
        }
      }
      if ((i & 15) == 0) {
        int k = wait_kernel(events, maxevents, 0);
        if (k != 0) {
          if (k > 0) g->spin().hit();
          return k;
        }
        if (sys::now_ns() > deadline) break;
      }
    }
    g->spin().missed();
  }
  g->before_sleep();
  long long left = timeout_ns;
  if (left > 0) left = std::max<long long>(0, left - (sys::now_ns() - start));
  n = wait_kernel(events, maxevents, left);
  int saved = errno;
  g->after_sleep();
  errno = saved;
  return n;
}

}  // namespace

int epoll_wait_hook(EpollPwaitFn pwait, EpollPwait2Fn pwait2, int epfd, struct epoll_event* events,
                    int maxevents, long long timeout_ns, const sigset_t* mask) {
  auto wait_kernel = [&](epoll_event* out, int max, long long ns) {
    if (!pwait2) return pwait(epfd, out, max, ms_of(ns), mask);
    timespec ts{};
    if (ns >= 0) ts = timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    return pwait2(epfd, out, max, ns < 0 ? nullptr : &ts, mask);
  };
  EpollGroup* g = group_of(epfd);
  if (!g || maxevents <= 0) return wait_kernel(events, maxevents, timeout_ns);
  int got = wait_with_deferral(g, wait_kernel, events, maxevents, timeout_ns);
  if (got > 0) g->add_errors(events, got);
  return got;
}

namespace {

// Registrations of sockets not yet taken over (epoll_note_before_takeover):
// a handful at a time (sockets between socket() and the end of connect()),
// so one mutex and a map. g_early_count lets close() and the settling of a
// TCP connection skip the mutex when there are none.
std::mutex g_early_mu;
std::atomic<int> g_early_count{0};
std::unordered_map<int, EarlyRegistrations>& early_registry() {
  static auto* m = new std::unordered_map<int, EarlyRegistrations>();
  return *m;
}

// An epoll set's number is closed: its registrations went with it.
void forget_early_set(int epfd) {
  if (g_early_count.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lock(g_early_mu);
  for (auto& [fd, regs] : early_registry())
    regs.erase(std::remove_if(regs.begin(), regs.end(), [&](const auto& r) { return r.first == epfd; }),
               regs.end());
}

}  // namespace

void epoll_note_before_takeover(int epfd, int op, int fd, const struct epoll_event* ev) {
  std::lock_guard<std::mutex> lock(g_early_mu);
  auto& m = early_registry();
  auto it = m.find(fd);
  if (op == EPOLL_CTL_ADD && ev) {
    if (it == m.end()) {
      it = m.emplace(fd, EarlyRegistrations{}).first;
      g_early_count.fetch_add(1, std::memory_order_relaxed);
      fd_table().add_flags(fd, kFdEpollBeforeTakeover);
    }
    it->second.emplace_back(epfd, *ev);
    return;
  }
  if (it == m.end()) return;
  for (auto r = it->second.begin(); r != it->second.end(); ++r) {
    if (r->first != epfd) continue;
    if (op == EPOLL_CTL_MOD && ev) r->second = *ev;
    else if (op == EPOLL_CTL_DEL) it->second.erase(r);
    return;
  }
}

EarlyRegistrations epoll_unhook_before_takeover(int fd) {
  if (!(fd_table().clear_flags(fd, kFdEpollBeforeTakeover) & kFdEpollBeforeTakeover)) return {};
  EarlyRegistrations regs;
  {
    std::lock_guard<std::mutex> lock(g_early_mu);
    auto it = early_registry().find(fd);
    if (it == early_registry().end()) return {};
    regs = std::move(it->second);
    early_registry().erase(it);
    g_early_count.fetch_sub(1, std::memory_order_relaxed);
  }
  for (auto& r : regs) sys::epoll_ctl(r.first, EPOLL_CTL_DEL, fd, nullptr);
  return regs;
}

void epoll_rehook_after_takeover(EpollCtlFn real, int fd, const EarlyRegistrations& regs) {
  int saved = errno;
  for (const auto& r : regs) {
    epoll_event ev = r.second;
    if (epoll_ctl_hook(real, r.first, EPOLL_CTL_ADD, fd, &ev) != 0)
      SMCR_LOG(1, "fd %d: epoll set %d: registering the SMC-R socket again failed (errno %d)", fd, r.first, errno);
  }
  errno = saved;
}

void epoll_settled(int fd) {
  if (fd_table().kind(fd) == kFdTcp) fd_table().add_flags(fd, kFdSettledTcp);
  if (g_early_count.load(std::memory_order_relaxed) == 0) return;
  fd_table().clear_flags(fd, kFdEpollBeforeTakeover);
  std::lock_guard<std::mutex> lock(g_early_mu);
  if (early_registry().erase(fd)) g_early_count.fetch_sub(1, std::memory_order_relaxed);
}

void epoll_forget_fd(int fd) {
  forget_early_set(fd);
  if (!tracked(fd)) return;
  if (EpollGroup* g = g_groups[fd].load(std::memory_order_acquire)) {
    if (g->current()) g->reset();
    else g_groups[fd].store(nullptr, std::memory_order_release);  // the parent's: left to it
  }
  if (g_registered_in[fd].load(std::memory_order_relaxed) == 0) return;
  int in = g_registered_in[fd].exchange(0, std::memory_order_relaxed);
  if (in > 0)
    if (EpollGroup* g = group_of(in - 1)) g->remove(fd);
}

void poll_add_errors(struct pollfd* fds, nfds_t n) {
  for (nfds_t i = 0; i < n; ++i) {
    if (!(fds[i].revents & POLLHUP) || (fds[i].revents & POLLERR) || !fd_table().has_conn(fds[i].fd)) continue;
    if (Connection* c = fd_table().get(fds[i].fd)) {
      if (c->socket_error_pending()) fds[i].revents |= POLLERR;
      c->unref();
    }
  }
}

void epoll_fd_polled(int fd) {
  if (tracked(fd))
    if (EpollGroup* g = group_of(fd)) g->disable();
  if (!fd_table().has_conn(fd)) return;
  if (Connection* c = fd_table().get(fd)) {
    c->forbid_deferral();
    c->unref();
  }
}

}  // namespace smcr::preload
