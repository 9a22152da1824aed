// See preload/epoll.h.
#include "preload/epoll.h"

#include <errno.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/connection.h"
#include "core/cpu_relax.h"
#include "core/env.h"
#include "core/link_group.h"
#include "core/random.h"
#include "core/ready_set.h"
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

// Parked connections per epoll set at a time without a ready set (see
// EpollGroup::park): each is looked at by every wait.
constexpr size_t kMaxParked = 64;

// How many times a wait that found events waits for a marked connection
// another thread holds and looks again (EpollGroup::collect).
constexpr int kHeldRetries = 4;

// SMCR_READY_SETS=0 parks without ready sets (as before them: at most
// kMaxParked per set, looked at by every wait).
bool ready_sets_enabled() {
  static const bool on = env_long("SMCR_READY_SETS", 1, 0, 1) != 0;
  return on;
}
// Ready sets per epoll set (one per peer link group); beyond, the next
// groups' connections park without one.
constexpr size_t kMaxRingsPerSet = 64;

// The registration data of a ready set's bell (EpollGroup::Ring): never
// returned to the application. Random per process, so that no
// application's own data is mistaken for it.
std::atomic<uint64_t> g_bell_data{0};
std::atomic<bool> g_any_bell{false};
uint64_t bell_data() {
  uint64_t v = g_bell_data.load(std::memory_order_relaxed);
  if (v) return v;
  uint64_t fresh = 0;
  if (!random_bytes(&fresh, sizeof fresh) || fresh == 0) fresh = 0x736d63722d62656cULL ^ reinterpret_cast<uintptr_t>(&g_bell_data);
  uint64_t none = 0;
  return g_bell_data.compare_exchange_strong(none, fresh) ? fresh : none;
}
// SMCR_EPOLL_VIRTUAL=0: every epoll_ctl of the application on an SMC-R fd
// reaches the kernel (no virtual registrations, below).
bool virtual_enabled() {
  static const bool on = env_long("SMCR_EPOLL_VIRTUAL", 1, 0, 1) != 0;
  return on;
}
// A virtual registration (EpollGroup::virtual_ctl): the application's
// interest is kept here, and the kernel's registration of the fd, made once,
// only wakes a sleeping wait for what the readiness socket itself shows (a
// ring, end-of-file, reset, urgent data, a window that opens): every edge,
// with the shim's own data, `virtual_tag(fd)`.
constexpr uint32_t kVirtualKernelEvents = EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDHUP | EPOLLET;
// What in a registration's events is not an event.
constexpr uint32_t kNotEvents = EPOLLET | EPOLLONESHOT | EPOLLWAKEUP | EPOLLEXCLUSIVE;
std::atomic<bool> g_any_tag{false};
std::atomic<int> g_virtual_regs{0};  // in this process, all sets
// Whether a kernel event can be the shim's own (a bell or a tag) at all.
bool shim_events_possible() {
  return g_any_bell.load(std::memory_order_relaxed) || g_any_tag.load(std::memory_order_relaxed);
}
// The upper half of every virtual tag: per process, and never the bell's.
uint64_t tag_prefix() { return (bell_data() ^ 0x5b1e7a9d00000000ULL) & 0xffffffff00000000ULL; }
uint64_t virtual_tag(int fd) { return tag_prefix() | static_cast<uint32_t>(fd); }
bool virtual_tag_fd(uint64_t data, int* fd) {
  if ((data & 0xffffffff00000000ULL) != tag_prefix()) return false;
  *fd = static_cast<int>(static_cast<uint32_t>(data));
  return true;
}

// Takes the shim's own events (the ready sets' bells, virtual registrations'
// wake-ups) out of what the kernel returned for a set this process does
// not follow (inherited from its parent).
int drop_shim_events(epoll_event* events, int n) {
  if (n <= 0 || !shim_events_possible()) return n;
  const uint64_t bell = g_bell_data.load(std::memory_order_relaxed);
  int k = 0, fd = 0;
  for (int i = 0; i < n; ++i)
    if (events[i].data.u64 != bell && !virtual_tag_fd(events[i].data.u64, &fd)) events[k++] = events[i];
  return k;
}

bool eligible(uint32_t events) {
  return (events & EPOLLIN) && !(events & (EPOLLONESHOT | EPOLLEXCLUSIVE));
}

class EpollGroup final : public ReadinessDeferral {
 public:
  explicit EpollGroup(int epfd) : epfd_(epfd), generation_(process_generation()) {}

  // The set was inherited from the parent process, which may wait on it
  // too: a wake-up with the shim's data could go to a process that does not
  // know it, so no registration of it is virtual.
  void set_shared_with_parent() { shared_with_parent_ = true; }

  bool current() const { return generation_ == process_generation(); }

  Parking park(Connection* c, int key, LinkGroup* group) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    Parking p;
    if (disabled_) return p;
    auto it = regs_.find(key);
    if (it == regs_.end() || it->second.conn != c) return p;
    Registration& reg = it->second;
    if (group && ready_sets_enabled()) {
      if (reg.ring && reg.ring->group_serial != group->serial()) release_slot(key, reg);
      if (!reg.ring) take_slot(key, reg, group);
      if (Ring* r = reg.ring) {
        // Armed for the ready set: any number of these, and a thread may
        // sleep while they are (the peer's writer wakes it).
        p.ok = true;
        p.page = r->page;
        p.where = cdcmem::ReadySetSlot{r->id, reg.slot};
        p.bell_fd = r->bell_send;
        if (!r->announced) {
          r->announced = true;
          p.announce_bell_fd = r->bell_send;
          p.announce_page_fd = r->memfd;
        }
        return p;
      }
    }
    if (sleepers_ > 0) return p;
    if (!reg.listed) {
      // Every wait looks at each parked connection: a bounded few, the
      // most recently active; the rest are armed as usual.
      if (parked_.size() >= kMaxParked) return p;
      reg.listed = true;
      parked_.push_back(key);
      has_parked_.store(true, std::memory_order_relaxed);
    }
    p.ok = true;
    return p;
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
      if (!fresh && !it->second.active && it->second.conn == c) {
        // Registered again after a DEL that kept it parked (deactivate).
        it->second.events = ev.events;
        it->second.data = ev.data.u64;
        reactivate_locked(fd, it->second);
        c->unref();
        return;
      }
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
      note_link(fd, c->pollable_link());
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
    smc_edge_.erase(fd);
    if (op != EPOLL_CTL_DEL && ev) {
      // Two fds registered with the same data: the latest is the one a
      // hang-up with that data is completed for, as before.
      smc_data_[ev->data.u64] = fd;
      smc_data_of_fd_[fd] = ev->data.u64;
      if ((ev->events & (EPOLLIN | EPOLLET)) == (EPOLLIN | EPOLLET)) smc_edge_.insert(fd);
    }
    has_smc_.store(!smc_data_.empty(), std::memory_order_relaxed);
    has_smc_edge_.store(!smc_edge_.empty(), std::memory_order_relaxed);
  }

  // Edge-triggered SMC-R registrations the kernel reported readable (their
  // readiness socket rang): the doorbell rings once per empty-to-not, so
  // data left unread would silence every later arrival, which over TCP is
  // an edge each (Connection::want_next_edge). Events found in memory are
  // told apart by their producer cursor already (examine_virtual_locked,
  // collect).
  void want_next_edges(const epoll_event* events, int n) {
    if (!has_smc_edge_.load(std::memory_order_relaxed)) return;
    thread_local std::vector<int> fds;
    thread_local std::vector<bool> from_memory;  // per event, as order_by_arrival indexes found()
    fds.clear();
    from_memory.assign(static_cast<size_t>(n), false);
    for (auto& [p, since] : found())
      if (ptrdiff_t i = p - events; i >= 0 && i < n) from_memory[static_cast<size_t>(i)] = true;
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      for (int i = 0; i < n; ++i) {
        if (!(events[i].events & EPOLLIN) || from_memory[static_cast<size_t>(i)]) continue;
        if (auto it = smc_data_.find(events[i].data.u64); it != smc_data_.end() && smc_edge_.count(it->second))
          fds.push_back(it->second);
      }
    }
    // Not under the set's mutex: a connection is taken before it, never after.
    for (int fd : fds)
      if (Connection* c = fd_table().get(fd)) {
        c->want_next_edge();
        c->unref();
      }
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

  // Events a collect of this wait found in memory, with their stamps
  // (poll_parked/poll_events give them under the connection's lock): the
  // ordering below needs no lookup for them.
  static std::vector<std::pair<const epoll_event*, uint64_t>>& found() {
    thread_local std::vector<std::pair<const epoll_event*, uint64_t>> v;
    return v;
  }

  // The SMC-R connections among `events` in the order their data came
  // (Connection::arrival_stamp): the kernel's ready list reports a TCP
  // socket's events in the order they happened, and programs rely on it
  // across connections (a client's command on one connection, then its
  // command on another, are handled in that order: redis' own test suite
  // blocks a client on one and wakes it from another). Events found in
  // memory, on readiness sockets and on ready sets come from different
  // places and would otherwise come in the order looked at. Other fds'
  // events keep their places; an SMC-R event without a stamp (end of file,
  // writable only) comes after the stamped ones.
  void order_by_arrival(epoll_event* events, int n) {
    if (n < 2 || !has_smc_.load(std::memory_order_relaxed)) return;
    constexpr uint64_t kUnknown = 0, kLast = UINT64_MAX;
    thread_local std::vector<uint64_t> stamp;  // per event: kUnknown, a stamp, or kLast
    thread_local std::vector<std::pair<int, uint64_t>> smc;  // (index, stamp)
    thread_local std::vector<epoll_event> moved;
    stamp.assign(static_cast<size_t>(n), kUnknown);
    bool unknown = false;
    for (auto& [p, since] : found()) {
      ptrdiff_t i = p - events;
      if (i >= 0 && i < n) stamp[static_cast<size_t>(i)] = since ? since : kLast;
    }
    for (int i = 0; i < n && !unknown; ++i) unknown = stamp[static_cast<size_t>(i)] == kUnknown;
    smc.clear();
    if (unknown) {
      // From the kernel: a readiness socket rung (or another fd's event).
      thread_local std::vector<std::pair<int, int>> asked;  // (index, fd)
      asked.clear();
      {
        std::lock_guard<std::recursive_mutex> lock(mu_);
        for (int i = 0; i < n; ++i)
          if (stamp[static_cast<size_t>(i)] == kUnknown)
            if (auto it = smc_data_.find(events[i].data.u64); it != smc_data_.end()) asked.emplace_back(i, it->second);
      }
      for (auto [i, fd] : asked) {
        uint64_t v = 0;
        if (events[i].events & EPOLLIN) {
          if (Connection* c = fd_table().get(fd)) {
            v = c->arrival_stamp();
            c->unref();
          }
        }
        stamp[static_cast<size_t>(i)] = v ? v : kLast;
      }
    }
    bool in_order = true;
    uint64_t last = 0;
    for (int i = 0; i < n; ++i) {
      uint64_t v = stamp[static_cast<size_t>(i)];
      if (v == kUnknown) continue;  // not SMC-R: keeps its place
      smc.emplace_back(i, v);
      in_order = in_order && v >= last;
      last = v;
    }
    if (smc.size() < 2) return;
    if (in_order) return;
    moved.clear();
    for (auto& [i, stamp] : smc) moved.push_back(events[i]);
    std::vector<size_t> order(smc.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return smc[a].second < smc[b].second; });
    for (size_t k = 0; k < order.size(); ++k) events[smc[k].first] = moved[order[k]];
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
        Registration& reg = it->second;
        reg.events = ev.events;
        reg.data = ev.data.u64;
        if (!reg.active) reactivate_locked(fd, reg);
        return true;
      }
    }
    deactivate(fd, (ev.events & EPOLLIN) != 0);
    return true;
  }

  // EPOLL_CTL_DEL, or a MOD without EPOLLIN: an event loop that takes the
  // fd out for each request and puts it back for the reply (redis's ae)
  // would otherwise unpark and re-park it every time, and a reply that came
  // in between would ring the readiness socket. A registration with a
  // ready set stays, inactive and parked (its marks are dropped), until
  // it is registered again here (add, modify), the fd is closed or
  // registered elsewhere (remove), or the set goes. True if kept. Not
  // kept when the application still waits for reads (`wants_reads`: a MOD
  // to EPOLLIN with EPOLLONESHOT or EPOLLEXCLUSIVE, which the kernel then
  // watches): its marks would be dropped, and nothing would ring.
  bool deactivate(int fd, bool wants_reads = false) {
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      auto it = regs_.find(fd);
      if (it == regs_.end()) return false;
      if (it->second.ring && !disabled_ && !wants_reads) {
        it->second.active = false;
        return true;
      }
    }
    remove(fd);
    return false;
  }
  bool inactive(int fd) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    auto it = regs_.find(fd);
    return it != regs_.end() && !it->second.active;
  }

  // The application's epoll_ctl(op, fd, ev) on this set, answered in memory
  // when `fd`'s registration here is virtual, or becomes so now: a
  // registration with a ready set that the application deletes, modifies,
  // or adds again after a delete (an event loop that changes its interest
  // around every request: redis-benchmark made five epoll_ctl per request,
  // each a system call). The kernel's registration of the fd is then made
  // once with the shim's data (kVirtualKernelEvents), and the application's
  // interest lives here: a wait reports from memory what the connection
  // shows (Connection::poll_events), level- or edge-triggered or once, as
  // the kernel would. True if answered (*rc and errno as the kernel's);
  // false: the caller asks the kernel.
  bool virtual_ctl(int op, int fd, struct epoll_event* ev, int* rc) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (disabled_ || shared_with_parent_ || !virtual_enabled()) return false;
    auto it = regs_.find(fd);
    if (it == regs_.end()) return false;
    Registration& reg = it->second;
    if (!reg.virt) {
      const bool wanted = op == EPOLL_CTL_ADD ? !reg.active : (op == EPOLL_CTL_DEL || op == EPOLL_CTL_MOD) && reg.active;
      if (!wanted || !reg.ring || !ev_ok(op, ev)) return false;
      epoll_event kev{};
      kev.events = kVirtualKernelEvents;
      kev.data.u64 = virtual_tag(fd);
      g_any_tag.store(true, std::memory_order_relaxed);
      // An inactive registration's was deleted from the kernel (deactivate).
      if (sys::epoll_ctl(epfd_, reg.active ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &kev) != 0) return false;
      reg.virt = true;
      reg.fired = false;
      ++virtual_regs_;
      has_virtual_.store(true, std::memory_order_relaxed);
      g_virtual_regs.fetch_add(1, std::memory_order_relaxed);
    }
    auto answer = [&](int err) {
      *rc = err ? -1 : 0;
      if (err) errno = err;
      counters().epoll_ctl_in_memory.fetch_add(1, std::memory_order_relaxed);
      return true;
    };
    switch (op) {
      case EPOLL_CTL_ADD:
        if (reg.active) return answer(EEXIST);
        if (!ev) return answer(EFAULT);
        if (ev->events & EPOLLEXCLUSIVE) {
          // Exclusive wake-ups are the kernel's to give: registered there.
          devirtualize_locked(fd, reg);
          return false;
        }
        reg.active = true;
        break;
      case EPOLL_CTL_MOD:
        if (!reg.active) return answer(ENOENT);
        if (!ev) return answer(EFAULT);
        if (ev->events & EPOLLEXCLUSIVE) return answer(EINVAL);
        break;
      case EPOLL_CTL_DEL:
        if (!reg.active) return answer(ENOENT);
        reg.active = false;
        return answer(0);
      default:
        return answer(EINVAL);
    }
    reg.events = ev->events;
    reg.data = ev->data.u64;
    reg.fired = false;
    reg.reported = false;
    reg.edge = true;  // as the kernel's ADD and MOD look at the fd at once
    queue_locked(fd, reg);
    // A thread of this set asleep in the kernel is woken to look (the
    // kernel's ADD wakes it when the fd is ready).
    if (sleepers_ > 0) ring_own_bell_locked();
    return answer(0);
  }

  // The kernel's events of a wait on this set: a ready set's bell is
  // dropped (the bells emptied now and then), a virtual registration's
  // wake-up queues it, edge-flagged (*queued: the caller collects it in the
  // same wait); the rest are the application's. Returns how many are left.
  int take_kernel_events(epoll_event* events, int n, bool* queued) {
    *queued = false;
    if (n <= 0 || !shim_events_possible()) return n;
    const uint64_t bell = g_bell_data.load(std::memory_order_relaxed);
    int k = 0, fd = 0;
    bool rang = false;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == bell) {
        rang = true;
      } else if (virtual_tag_fd(events[i].data.u64, &fd)) {
        std::lock_guard<std::recursive_mutex> lock(mu_);
        if (auto it = regs_.find(fd); it != regs_.end() && it->second.virt && it->second.active) {
          it->second.edge = true;
          queue_locked(fd, it->second);
          *queued = true;
        }
      } else {
        events[k++] = events[i];
      }
    }
    if (rang) {
      drain_bells();
      // A ready set was marked: what it holds may be older than the
      // kernel's events, and is reported with them (order_by_arrival).
      *queued = true;
    }
    return k;
  }

  // Every registration back in the kernel as the application made it (an
  // exec: the new program would get the shim's data; a set that something
  // may wait on without asking us). Virtual again at its next epoll_ctl.
  void devirtualize_all() {
    std::vector<int> unpark;
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      if (virtual_regs_ == 0) return;
      for (auto& [fd, reg] : regs_)
        if (reg.virt && devirtualize_locked(fd, reg)) unpark.push_back(fd);
    }
    // Not under the mutex: a connection is taken before it, never after.
    for (int fd : unpark) {
      remove(fd);
      forget_registration(fd);
    }
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
      devirtualize_locked(fd, it->second);
      if (it->second.listed) parked_.erase(std::find(parked_.begin(), parked_.end(), fd));
      if (it->second.queued) ready_.erase(std::find(ready_.begin(), ready_.end(), fd));
      if (it->second.ring) release_slot(fd, it->second);
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
        // The set is gone with the kernel's registrations (a duplicate of
        // its number, or a process it was sent to, disabled it first).
        if (reg.virt) g_virtual_regs.fetch_sub(1, std::memory_order_relaxed);
      }
      virtual_regs_ = 0;
      has_virtual_.store(false);
      for (auto& p : pending_) forget_registration(p.first);
      regs_.clear();
      parked_.clear();
      ready_.clear();
      pending_.clear();
      smc_data_.clear();
      smc_data_of_fd_.clear();
      smc_edge_.clear();
      has_smc_.store(false);
      has_smc_edge_.store(false);
      has_parked_.store(false);
      has_pending_.store(false);
      disabled_ = false;
      shared_with_parent_ = false;
      spin_.reset();
      probe_.reset();
    }
    for (Connection* c : conns) {
      c->set_deferral(nullptr, -1);
      c->unref();
    }
    // Only now: no connection names a page or the eventfd any more.
    std::lock_guard<std::recursive_mutex> lock(mu_);
    free_rings();
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
    devirtualize_all();
    arm_parked();
    // And those armed for a ready set: a thread that sleeps without asking
    // us would not be woken by a mark.
    std::vector<Connection*> conns;
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      for (auto& [fd, reg] : regs_) {
        if (!reg.ring) continue;
        reg.conn->ref();
        conns.push_back(reg.conn);
      }
    }
    for (Connection* c : conns) {
      c->arm_deferred(this);
      c->unref();
    }
  }

  // Events of parked connections that have data, into out[0..max). Round
  // robin, as the kernel's ready list (an fd it reports goes to the back):
  // each call starts after the last connection the previous one reported,
  // so busy connections beyond `max` are not starved by the first ones.
  // `call`: the epoll_wait this is for (g_wait_calls); a registration it
  // already reported is not reported twice by it.
  int collect(epoll_event* out, int max, uint64_t call) {
    // A ready set may be marked after its last registration left (a
    // stale arming): drained all the same, or a sleep would never come.
    if (!has_parked() && !has_rings_.load(std::memory_order_relaxed)) return 0;
    std::unique_lock<std::recursive_mutex> lock(mu_);
    int n = collect_ready_locked(out, max, call);
    // A marked connection held by another thread (our engine, taking a
    // link message for it: a new connection's first data, whose sender
    // also marked it) may have data older than what was found: reported by
    // a later call, it would come after newer data of others
    // (order_by_arrival sorts one call's events only). Its holder is
    // waited for, outside the set's lock, as arrival_stamp does.
    for (int tries = 0; !held_conns_.empty() && n > 0 && n < max && tries < kHeldRetries; ++tries) {
      std::vector<Connection*> held;
      held.swap(held_conns_);
      lock.unlock();
      for (Connection* c : held) {
        c->wait_until_released();
        c->unref();
      }
      lock.lock();
      n += collect_ready_locked(out + n, max - n, call);
    }
    for (Connection* c : held_conns_) c->unref();
    held_conns_.clear();
    if (!has_parked_.load(std::memory_order_relaxed) || n >= max) {
      if (n) counters().epoll_from_memory.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
      return n;
    }
    bool dropped = false;
    const size_t count = parked_.size();
    const size_t start = count ? rotation_ % count : 0;
    for (size_t k = 0; k < count; ++k) {
      const size_t i = (start + k) % count;
      auto it = regs_.find(parked_[i]);
      if (it == regs_.end()) continue;
      Registration& reg = it->second;
      if (reg.reported_call == call) continue;
      if (reg.virt) {
        bool keep = false;
        uint64_t since = 0;
        if (n < max && examine_virtual_locked(parked_[i], reg, &out[n], &keep, &since)) {
          found().emplace_back(&out[n], since);
          reg.reported_call = call;
          ++n;
          rotation_ = i + 1;
        }
        continue;
      }
      bool writable = false;
      uint64_t mark = 0, since = 0;
      switch (reg.conn->poll_parked(this, &writable, &mark, &since)) {
        case Connection::Parked::kGone:
          reg.listed = false;
          dropped = true;
          break;
        case Connection::Parked::kReadable:
          // Edge-triggered: each arrival once, as the kernel reports it.
          if ((reg.events & EPOLLET) && reg.reported && reg.reported_mark == mark) break;
          if (n < max) {
            reg.reported = true;
            reg.reported_call = call;
            reg.reported_mark = mark;
            out[n].events = (reg.events & (EPOLLIN | EPOLLRDNORM)) |
                            (writable ? reg.events & (EPOLLOUT | EPOLLWRNORM) : 0);
            out[n].data.u64 = reg.data;
            found().emplace_back(&out[n], since);
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

  bool has_parked() const {
    return has_parked_.load(std::memory_order_relaxed) || has_ring_regs_.load(std::memory_order_relaxed) ||
           has_virtual_.load(std::memory_order_relaxed);
  }

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

  // A thread is about to sleep in the kernel: no connection stays parked
  // without a ready set, and the ready sets are told to wake it. False if
  // a ready set has marks already (collect instead); after_sleep() either
  // way. *nap: the sleep must be short, a marked connection was held by
  // another thread when last looked at (it is not marked again).
  bool before_sleep(bool* nap) {
    bool quiet = true;
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      *nap = busy_ && !ready_.empty();
      ++sleepers_;
      for (auto& r : rings_) readyset::set_sleeping(r->page, true);
      for (auto& r : rings_)
        if (readyset::pending(r->page)) quiet = false;
      // Added, modified or woken since the last look (another thread's).
      if (virtual_regs_ > 0)
        for (int fd : ready_)
          if (auto it = regs_.find(fd); it != regs_.end() && it->second.virt && it->second.edge) quiet = false;
    }
    arm_parked();
    return quiet;
  }
  void after_sleep() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    // A writer that found the flag set cleared it (and rang); threads still
    // asleep want it set for the next.
    if (--sleepers_ == 0)
      for (auto& r : rings_) readyset::set_sleeping(r->page, false);
    else
      for (auto& r : rings_) readyset::set_sleeping(r->page, true);
  }

  // Verbs links of this set's connections (one connection's fd per link,
  // a few links): a wait polls their receive queues itself before it
  // sleeps (Connection::poll_link_once), and arms them when it does.
  void note_link(int fd, const void* link) {
    if (!link) return;
    std::lock_guard<std::recursive_mutex> lock(mu_);
    for (auto& p : link_probes_)
      if (p.first == fd || p.second == link) return;
    if (link_probes_.size() >= kMaxLinkProbes) return;
    link_probes_.emplace_back(fd, link);
    has_link_probes_.store(true, std::memory_order_relaxed);
  }
  void forget_link(int fd) {
    if (!has_link_probes_.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::recursive_mutex> lock(mu_);
    std::erase_if(link_probes_, [fd](const auto& p) { return p.first == fd; });
    has_link_probes_.store(!link_probes_.empty(), std::memory_order_relaxed);
  }
  bool has_link_probes() const { return has_link_probes_.load(std::memory_order_relaxed); }
  // True when a message was delivered (a readiness socket may have been rung).
  bool poll_links(bool will_sleep) {
    int fds[kMaxLinkProbes];
    size_t n = 0;
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      for (auto& p : link_probes_) fds[n++] = p.first;
    }
    bool hit = false;
    for (size_t i = 0; i < n; ++i) {
      Connection* c = fd_table().get(fds[i]);
      if (!c) {
        forget_link(fds[i]);  // closed: the next registration on that link probes it
        continue;
      }
      hit = c->poll_link_once(will_sleep) || hit;
      c->unref();
    }
    return hit;
  }

  // Adaptive, as a blocking read's spin.
  SpinBackoff& spin() { return spin_; }
  // Whether a look at the kernel before a sleep (no spin) finds anything.
  SpinBackoff& probe() { return probe_; }

 private:
  // A ready set (core/ready_set.h) of this epoll set for one link group.
  struct Ring {
    uint64_t group_serial = 0;
    uint32_t id = 0;  // on that group
    int memfd = -1;
    uint8_t* page = nullptr;
    int bell_recv = -1, bell_send = -1;  // make_bell
    bool announced = false;  // its page and its bell handed to the peer
    std::vector<int> fd_of_slot;  // -1: free
    std::vector<uint32_t> free_slots;
  };

  struct Registration {
    Connection* conn = nullptr;  // referenced
    uint32_t events = 0;
    uint64_t data = 0;
    Ring* ring = nullptr;  // its ready set, and its slot there
    uint32_t slot = 0;
    bool queued = false;  // in ready_
    bool active = true;   // registered by the application (deactivate)
    bool listed = false;  // in parked_
    bool virt = false;    // virtual_ctl: the kernel's registration is the shim's
    bool edge = false;    // virtual: added, modified or woken since last looked at
    bool fired = false;   // virtual, EPOLLONESHOT: reported, disabled until modified
    uint64_t reported_call = 0;  // the epoll_wait that last reported it (collect)
    // EPOLLET: the data mark (Connection::poll_parked) last reported.
    bool reported = false;
    uint64_t reported_mark = 0;
  };

  // The fd is in no followed epoll set any more (its set was closed).
  void forget_registration(int fd);

  static bool ev_ok(int op, const epoll_event* ev) {
    return op == EPOLL_CTL_DEL || (ev && !(ev->events & EPOLLEXCLUSIVE));
  }

  // The kernel's registration of a virtual one made the application's again
  // (deleted if the application has deleted it). True: the registration
  // must go (remove): it waits for reads the kernel now watches, which a
  // parked connection would not ring for.
  bool devirtualize_locked(int fd, Registration& reg) {
    if (!reg.virt) return false;
    if (reg.active) {
      epoll_event kev{};
      kev.events = reg.fired ? reg.events & kNotEvents : reg.events;
      kev.data.u64 = reg.data;
      sys::epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &kev);
    } else {
      sys::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
    }
    reg.virt = false;
    reg.edge = false;
    if (--virtual_regs_ == 0) has_virtual_.store(false, std::memory_order_relaxed);
    g_virtual_regs.fetch_sub(1, std::memory_order_relaxed);
    if (!reg.active || eligible(reg.events)) return false;
    if (reg.events & EPOLLIN) return true;
    reg.active = false;  // kept parked, as deactivate keeps it
    return false;
  }

  void ring_own_bell_locked() {
    char b = 'v';
    for (auto& r : rings_)
      if (sys::send(r->bell_send, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1) return;
  }

  // A virtual registration looked at: its event into *out, if it reports one
  // (true). *keep: looked at again by the next wait (level-triggered and
  // ready, as the kernel keeps such an fd on its ready list; or held by
  // another thread).
  // *since: as Connection::poll_events's.
  bool examine_virtual_locked(int fd, Registration& reg, epoll_event* out, bool* keep, uint64_t* since) {
    *keep = false;
    if (!reg.active || reg.fired) return false;
    uint32_t mask = 0;
    uint64_t mark = 0;
    switch (reg.conn->poll_events(this, &mask, &mark, since, (reg.events & EPOLLET) != 0)) {
      case Connection::Parked::kGone:
        // Another process's now: the kernel reports its readiness socket
        // as the application registered it.
        if (devirtualize_locked(fd, reg)) reg.active = false;
        return false;
      case Connection::Parked::kBusy:
        busy_ = true;
        *keep = true;
        reg.conn->ref();
        held_conns_.push_back(reg.conn);
        return false;
      default:
        break;
    }
    const uint32_t got = mask & ((reg.events & ~kNotEvents) | EPOLLHUP | EPOLLERR);
    // Edge-triggered: once per wake-up, add or modify, and once per arrival
    // of data (a ready set's mark queues it; the producer cursor tells).
    const bool edge = reg.edge || ((got & EPOLLIN) && (!reg.reported || reg.reported_mark != mark));
    reg.edge = false;
    if (!got || ((reg.events & EPOLLET) && !edge)) return false;
    reg.reported = true;
    reg.reported_mark = mark;
    out->events = got;
    out->data.u64 = reg.data;
    if (reg.events & EPOLLONESHOT) reg.fired = true;
    else *keep = !(reg.events & EPOLLET);
    return true;
  }

  // Looked at by the next wait (collect_ready_locked), once.
  void queue_locked(int fd, Registration& reg) {
    if (reg.queued) return;
    reg.queued = true;
    ready_.push_back(fd);
  }
  // Registered again (add, modify) after deactivate kept it parked: nothing
  // to arm; what came meanwhile is looked at by the next wait.
  void reactivate_locked(int fd, Registration& reg) {
    reg.active = true;
    reg.reported = false;
    queue_locked(fd, reg);
  }

  // A slot in the ready set of `group` for `key` (none: the registration
  // parks without one).
  void take_slot(int key, Registration& reg, LinkGroup* group) {
    Ring* ring = nullptr;
    for (auto& r : rings_)
      if (r->group_serial == group->serial()) ring = r.get();
    if (!ring) {
      if (rings_.size() >= kMaxRingsPerSet) return;
      auto r = std::make_unique<Ring>();
      if (!make_bell(r.get())) return;
      uint32_t id = 0;
      if (!group->next_ready_set_id(&id) || !readyset::create(&r->memfd, &r->page)) {
        close_bell(r.get());
        return;
      }
      r->group_serial = group->serial();
      r->id = id;
      r->fd_of_slot.assign(readyset::kSlots, -1);
      for (uint32_t s = readyset::kSlots; s-- > 0;) r->free_slots.push_back(s);
      readyset::set_sleeping(r->page, sleepers_ > 0);
      ring = r.get();
      rings_.push_back(std::move(r));
      has_rings_.store(true, std::memory_order_relaxed);
    }
    if (ring->free_slots.empty()) return;
    reg.ring = ring;
    reg.slot = ring->free_slots.back();
    ring->free_slots.pop_back();
    ring->fd_of_slot[reg.slot] = key;
    ++ring_regs_;
    has_ring_regs_.store(true, std::memory_order_relaxed);
  }
  void release_slot(int key, Registration& reg) {
    if (reg.ring->fd_of_slot[reg.slot] == key) {
      reg.ring->fd_of_slot[reg.slot] = -1;
      reg.ring->free_slots.push_back(reg.slot);
    }
    reg.ring = nullptr;
    if (--ring_regs_ == 0) has_ring_regs_.store(false, std::memory_order_relaxed);
  }

  // The ready set's bell: a socket pair whose receiving end is registered
  // in the set (edge-triggered: every byte is an event; emptied now and
  // then, drain_bells) and whose sending end goes to the peer. A socket,
  // not an eventfd: the writer sends with MSG_DONTWAIT, which no peer can
  // make block (an eventfd's O_NONBLOCK is the peer's to clear), and one
  // per ready set, so that a peer that fills its own bell silences nobody
  // else's.
  bool make_bell(Ring* r) {
    int sv[2];
    if (sys::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return false;
    r->bell_recv = sys::hide_fd(sv[0]);
    r->bell_send = sys::hide_fd(sv[1]);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = bell_data();
    g_any_bell.store(true, std::memory_order_relaxed);
    if (r->bell_recv < 0 || r->bell_send < 0 || sys::epoll_ctl(epfd_, EPOLL_CTL_ADD, r->bell_recv, &ev) != 0) {
      close_bell(r);
      return false;
    }
    return true;
  }
  static void close_bell(Ring* r) {
    if (r->bell_recv >= 0) sys::close(r->bell_recv);  // leaves the epoll set with it
    if (r->bell_send >= 0) sys::close(r->bell_send);
    r->bell_recv = r->bell_send = -1;
  }

 public:
  // A bell rang (the kernel reported one): every so often the bells are
  // emptied, so that their buffers never fill (an edge is reported per
  // byte, so what is left in them wakes nobody).
  void drain_bells() {
    if ((++bell_events_ & 31) != 0) return;
    std::lock_guard<std::recursive_mutex> lock(mu_);
    char junk[256];
    for (auto& r : rings_)
      while (sys::recv(r->bell_recv, junk, sizeof junk, MSG_DONTWAIT) > 0) {
      }
  }

 private:
  void free_rings() {
    for (auto& r : rings_) {
      munmap(r->page, readyset::kPageBytes);
      sys::close(r->memfd);
      close_bell(r.get());
    }
    rings_.clear();
    has_rings_.store(false, std::memory_order_relaxed);
    ring_regs_ = 0;
    has_ring_regs_.store(false, std::memory_order_relaxed);
  }

  // Registrations whose ready set was marked, then every one still queued:
  // those with data are reported (and go to the back, as the kernel's
  // ready list moves a reported fd), those without leave the queue.
  int collect_ready_locked(epoll_event* out, int max, uint64_t call) {
    for (auto& r : rings_) {
      if (!readyset::pending(r->page)) continue;
      readyset::drain(r->page, [&](uint32_t slot) {
        int fd = r->fd_of_slot[slot];
        if (fd < 0) return;
        if (auto it = regs_.find(fd); it != regs_.end()) queue_locked(fd, it->second);
      });
    }
    busy_ = false;
    for (Connection* c : held_conns_) c->unref();
    held_conns_.clear();
    if (ready_.empty()) return 0;
    int n = 0;
    size_t kept = 0;
    reported_.clear();
    for (size_t i = 0; i < ready_.size(); ++i) {
      const int fd = ready_[i];
      auto it = regs_.find(fd);
      if (it == regs_.end()) continue;
      Registration& reg = it->second;
      if (reg.reported_call == call) {  // reported by this very call already
        ready_[kept++] = fd;
        continue;
      }
      if (reg.virt) {
        bool keep = true;
        if (n >= max) {
          busy_ = true;  // looked at by the next call, even before a sleep
        } else if (uint64_t since = 0; examine_virtual_locked(fd, reg, &out[n], &keep, &since)) {
          found().emplace_back(&out[n], since);
          reg.reported_call = call;
          ++n;
          if (keep) reported_.push_back(fd);
          else reg.queued = false;
          continue;
        }
        if (keep) ready_[kept++] = fd;
        else reg.queued = false;
        continue;
      }
      if (!reg.active) {
        reg.queued = false;
        continue;
      }
      bool writable = false, keep = true;
      uint64_t mark = 0, since = 0;
      switch (n < max ? reg.conn->poll_parked(this, &writable, &mark, &since) : Connection::Parked::kBusy) {
        case Connection::Parked::kGone:
        case Connection::Parked::kEmpty:
          keep = false;
          break;
        case Connection::Parked::kReadable:
          if ((reg.events & EPOLLET) && reg.reported && reg.reported_mark == mark) break;
          reg.reported = true;
          reg.reported_call = call;
          reg.reported_mark = mark;
          out[n].events = (reg.events & (EPOLLIN | EPOLLRDNORM)) | (writable ? reg.events & (EPOLLOUT | EPOLLWRNORM) : 0);
          out[n].data.u64 = reg.data;
          found().emplace_back(&out[n], since);
          ++n;
          reported_.push_back(fd);
          continue;
        case Connection::Parked::kBusy:
          // Held by another thread (our engine, marking it): looked at
          // again soon, even by a thread about to sleep (busy_).
          busy_ = true;
          reg.conn->ref();
          held_conns_.push_back(reg.conn);
          break;
      }
      if (keep) ready_[kept++] = fd;
      else reg.queued = false;
    }
    ready_.resize(kept);
    ready_.insert(ready_.end(), reported_.begin(), reported_.end());
    return n;
  }

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
  std::vector<std::unique_ptr<Ring>> rings_;
  std::vector<int> ready_;     // registrations whose ready set was marked, until found empty
  std::vector<int> reported_;  // collect_ready_locked's scratch
  size_t ring_regs_ = 0;       // registrations with a ready set slot
  size_t virtual_regs_ = 0;    // registrations with virt
  bool busy_ = false;          // the last look at ready_ left one for later (held, or no room)
  std::vector<Connection*> held_conns_;  // the last look at ready_ found these held (kBusy), referenced
  std::atomic<uint32_t> bell_events_{0};  // drain_bells
  std::vector<std::pair<int, epoll_event>> pending_;
  std::unordered_map<uint64_t, int> smc_data_;  // note_smc
  std::unordered_map<int, uint64_t> smc_data_of_fd_;
  std::unordered_set<int> smc_edge_;  // note_smc: registered with EPOLLIN|EPOLLET
  std::atomic<bool> has_smc_edge_{false};
  std::atomic<bool> has_parked_{false}, has_pending_{false}, has_smc_{false}, has_ring_regs_{false}, has_rings_{false},
      has_virtual_{false}, has_link_probes_{false};
  static constexpr size_t kMaxLinkProbes = 4;
  std::vector<std::pair<int, const void*>> link_probes_;  // note_link: (fd, its connection's link)
  int sleepers_ = 0;
  bool disabled_ = false;
  bool shared_with_parent_ = false;
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
  if (old) fresh->set_shared_with_parent();
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
  // A registration kept in memory (virtual_ctl): one load for any other fd.
  if (tracked(epfd) && tracked(fd) && g_registered_in[fd].load(std::memory_order_relaxed) == epfd + 1) {
    int answered = 0;
    if (EpollGroup* g = group_of(epfd); g && g->virtual_ctl(op, fd, ev, &answered)) return answered;
  }
  int rc = real(epfd, op, fd, ev);
  if (rc != 0 || !tracked(epfd) || !tracked(fd)) return rc;
  int saved = errno;
  if (op == EPOLL_CTL_ADD) {
    if (EpollGroup* inner = group_of(fd)) inner->disable();  // nested epoll set
  }
  if (fd_table().has_conn(fd) || fd_table().kind(fd) == kFdAccepting) {
    if (EpollGroup* g = op == EPOLL_CTL_DEL ? group_of(epfd) : group_for_add(epfd)) {
      g->note_smc(op, fd, ev);
      if (op == EPOLL_CTL_DEL) {
        g->forget_link(fd);
      } else if (op == EPOLL_CTL_ADD && fd_table().has_conn(fd)) {
        if (Connection* c = fd_table().get(fd)) {
          g->note_link(fd, c->pollable_link());
          c->unref();
        }
      }
    }
  }
  if (!deferral_enabled()) {
    errno = saved;
    return rc;
  }
  if (op == EPOLL_CTL_DEL) {
    if (g_registered_in[fd].load(std::memory_order_relaxed) == epfd + 1) {
      EpollGroup* g = group_of(epfd);
      if (!g || !g->deactivate(fd)) g_registered_in[fd].store(0, std::memory_order_relaxed);
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
      if (!eligible(ev->events) && !g->inactive(fd)) g_registered_in[fd].store(0, std::memory_order_relaxed);
      errno = saved;
      return rc;
    }
    g_registered_in[fd].store(0, std::memory_order_relaxed);
  }
  // A MOD of an fd not followed yet (it was not eligible) counts as an ADD.
  int prev = g_registered_in[fd].load(std::memory_order_relaxed);
  if (!eligible(ev->events)) {
    // Added again for reads the kernel watches (EPOLLONESHOT, EPOLLEXCLUSIVE)
    // after a delete that kept it parked: a parked connection would not
    // ring for them.
    if ((ev->events & EPOLLIN) && prev == epfd + 1)
      if (EpollGroup* g = group_of(epfd); g && g->inactive(fd)) {
        g->remove(fd);
        g_registered_in[fd].store(0, std::memory_order_relaxed);
      }
    errno = saved;
    return rc;
  }
  if (prev != 0 && prev != epfd + 1) {
    // Kept parked by a set it was taken out of: that set lets it go.
    if (EpollGroup* other = group_of(prev - 1); other && other->inactive(fd)) {
      other->remove(fd);
      g_registered_in[fd].store(0, std::memory_order_relaxed);
      prev = 0;
    }
  }
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

// Numbers every wait_with_deferral call (collect's `call`); 0 is none.
std::atomic<uint64_t> g_wait_calls{0};

template <typename WaitKernelRaw>
int wait_with_deferral(EpollGroup* g, WaitKernelRaw& wait_kernel_raw, struct epoll_event* events, int maxevents,
                       long long timeout_ns) {
  // This call, for collect: no registration is reported twice by it.
  const uint64_t call = g_wait_calls.fetch_add(1, std::memory_order_relaxed) + 1;
  // The set's bells (ready sets) are never events of the application's; a
  // virtual registration's wake-up is looked at (collect) at once, so that
  // what the kernel saw together (a peer's end-of-file and a listener's new
  // connection) is reported together, as over TCP.
  auto wait_kernel = [&](epoll_event* out, int max, long long ns) {
    int k = wait_kernel_raw(out, max, ns);
    if (k <= 0) return k;
    bool queued = false;
    int kept = g->take_kernel_events(out, k, &queued);
    if (queued && kept < max) kept += g->collect(out + kept, max - kept, call);
    return kept;
  };
  // `n` events found in memory by the spin or after a sleep: a connection
  // armed as usual, rung or at an end reports through the kernel, and its
  // news may be older (order_by_arrival sorts them): a look while the set
  // has any.
  auto with_older_kernel_events = [&](int n) {
    if (n < maxevents && g->kernel_armed.load(std::memory_order_relaxed) > 0)
      if (int k = wait_kernel(events + n, maxevents - n, 0); k > 0) n += k;
    return n;
  };
  g->resolve_pending();
  // The kernel's set gets a look whenever memory answers (below): with one
  // slot left for it, or, with room for one event only, on its turn.
  if (maxevents == 1 && g->has_parked() && g->kernel_turn()) {
    if (int k = wait_kernel(events, 1, 0); k != 0) return k;
  }
  int n = g->collect(events, maxevents > 1 ? maxevents - 1 : 1, call);
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
    spin = budget > 0 && (g->has_parked() || g->has_link_probes()) && g->spin().worth_trying();
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
      // A verbs link's CDCs, taken here, ring their connections' sockets:
      // the kernel's set has them at once.
      if (g->has_link_probes() && g->poll_links(false)) {
        int k = wait_kernel(events, maxevents, 0);
        if (k != 0) {
          if (k > 0) g->spin().hit();
          return k;
        }
      }
      if (g->has_parked()) {
        n = g->collect(events, maxevents, call);
        if (n > 0) {
          g->spin().hit();
          return with_older_kernel_events(n);
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
  for (;;) {
    // Polled verbs links are armed before the sleep (what came meanwhile is
    // delivered, and rings): the engine leaves them unarmed while we poll.
    if (g->has_link_probes()) g->poll_links(true);
    bool nap = false;
    bool may_sleep = g->before_sleep(&nap);
    long long left = timeout_ns;
    if (left > 0) left = std::max<long long>(0, left - (sys::now_ns() - start));
    constexpr long long kNapNs = 1000000;
    const bool napping = nap && (left < 0 || left > kNapNs);
    if (napping) left = kNapNs;
    int k = 0;
    int saved = errno;
    if (may_sleep) {
      // Only the set's eventfd may wake it with nothing for the
      // application (dropped): then the marks are collected below.
      k = wait_kernel_raw(events, maxevents, left);
      saved = errno;
    }
    g->after_sleep();
    if (k < 0) {
      errno = saved;
      return k;
    }
    int before = k;
    bool queued = false;
    k = g->take_kernel_events(events, k, &queued);
    if (k > 0) {
      if (queued && k < maxevents) k += g->collect(events + k, maxevents - k, call);
      return k;
    }
    n = g->collect(events, maxevents, call);
    if (n > 0) return with_older_kernel_events(n);
    // Woken for nothing (a mark whose data was read meanwhile), or the
    // time is up.
    if (may_sleep && before == 0 && !napping) return 0;
    if (timeout_ns >= 0 && sys::now_ns() - start >= timeout_ns) return 0;
    errno = saved;
  }
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
  if (!g || maxevents <= 0) {
    // Another process's set (inherited) may hold its eventfd: its events
    // are dropped, and a wait they alone ended goes on.
    const int64_t start = timeout_ns > 0 ? sys::now_ns() : 0;
    for (;;) {
      long long left = timeout_ns > 0 ? std::max<long long>(0, timeout_ns - (sys::now_ns() - start)) : timeout_ns;
      int k = wait_kernel(events, maxevents, left);
      if (k <= 0) return k;
      if (int kept = drop_shim_events(events, k); kept > 0 || left == 0) return kept;
    }
  }
  EpollGroup::found().clear();
  int got = wait_with_deferral(g, wait_kernel, events, maxevents, timeout_ns);
  if (got > 0) {
    g->add_errors(events, got);
    g->want_next_edges(events, got);
  }
  if (got > 1) g->order_by_arrival(events, got);
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
  epoll_release_number(fd);
}

void epoll_release_number(int fd) {
  if (!tracked(fd) || g_registered_in[fd].load(std::memory_order_relaxed) == 0) return;
  int in = g_registered_in[fd].exchange(0, std::memory_order_relaxed);
  if (in > 0)
    if (EpollGroup* g = group_of(in - 1)) g->remove(fd);
}

void epoll_fd_duplicated(int fd) {
  if (tracked(fd))
    if (EpollGroup* g = group_of(fd)) g->disable();
}

void epoll_before_exec() {
  if (g_virtual_regs.load(std::memory_order_relaxed) == 0) return;
  for (int epfd = 0; epfd < kMaxTracked; ++epfd)
    if (EpollGroup* g = g_groups[epfd].load(std::memory_order_acquire); g && g->current()) g->devirtualize_all();
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

void epoll_fd_polled(int fd, LinkProbes* probes) {
  if (tracked(fd))
    if (EpollGroup* g = group_of(fd)) g->disable();
  if (!fd_table().has_conn(fd)) return;
  if (Connection* c = fd_table().get(fd)) {
    c->forbid_deferral();
    if (probes && probes->n < LinkProbes::kMax) probes->note(fd, c->pollable_link());
    c->unref();
  }
}

namespace {
// True when a message was delivered (a readiness socket may have been rung).
bool poll_probes_once(const LinkProbes& probes, bool will_sleep) {
  bool hit = false;
  for (size_t i = 0; i < probes.n; ++i) {
    Connection* c = fd_table().get(probes.fds[i]);
    if (!c) continue;  // closed meanwhile by another thread
    hit = c->poll_link_once(will_sleep) || hit;
    c->unref();
  }
  return hit;
}
SpinBackoff& poll_spin() {
  static SpinBackoff b;
  return b;
}
}  // namespace

int poll_probed_links(const LinkProbes& probes, long long timeout_ns, int (*look)(void*), void* arg) {
  if (probes.n == 0 || timeout_ns == 0) return 0;
  if (int k = look(arg); k != 0) return k;
  int64_t budget = spin_budget_ns();
  if (timeout_ns > 0) budget = std::min<int64_t>(budget, timeout_ns);
  if (budget > 0 && poll_spin().worth_trying()) {
    int64_t deadline = sys::now_ns() + budget;
    for (uint32_t i = 1;; ++i) {
      for (int p = 0; p < 8; ++p) cpu_relax();
      bool delivered = poll_probes_once(probes, false);
      if (delivered || (i & 15) == 0) {
        if (int k = look(arg); k != 0) {
          if (k > 0) poll_spin().hit();
          return k;
        }
        if ((i & 15) == 0 && sys::now_ns() > deadline) break;
      }
    }
    poll_spin().missed();
  }
  // The engine leaves a polled link unarmed: arm it before the sleep (what
  // came meanwhile is delivered, and rings).
  poll_probes_once(probes, true);
  return 0;
}

}  // namespace smcr::preload
