#include "preload/own_listeners.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "core/connection.h"
#include "core/log.h"
#include "core/sys.h"
#include "preload/fd_table.h"

namespace smcr::preload::own {
namespace {

// A listener's bound address as IPv6 (IPv4 as ::ffff:a.b.c.d).
struct Bound {
  uint8_t addr[16];
  uint16_t port;  // host order
  bool any;         // 0.0.0.0 or ::
  bool v4;          // an AF_INET socket: IPv4 connections only
  bool v6only_any;  // ::, but IPv4 connections excluded (IPV6_V6ONLY)
};

constexpr int kSlots = 64;
struct Slot {
  std::atomic<int> fd{-1};  // published last
  Bound bound{};
  // Threads of process generation `generation` serving it (Serving). A
  // forked child's copy counts threads it does not have: it starts again
  // at 0.
  std::atomic<int> servers{0};
  std::atomic<uint64_t> generation{0};
  // epoll sets watching it for EPOLLIN (-1: none).
  static constexpr int kEpolls = 4;
  std::atomic<int> epfds[kEpolls] = {-1, -1, -1, -1};
};
Slot g_slots[kSlots];
std::atomic<bool> g_any{false};  // a listener was ever registered: connect()s look
std::atomic<int> g_used{0};      // slots [0, g_used) may be in use
std::mutex g_register_mu;  // registrations only; lookups read atomics
// How long connect() waits for a thread to enter accept() on a blocking
// listener of ours (a test's accept thread, started just before).
constexpr int kGraceMs = 20;

bool to_bound(const sockaddr_storage& ss, Bound* b) {
  memset(b, 0, sizeof *b);
  if (ss.ss_family == AF_INET) {
    sockaddr_in a;
    memcpy(&a, &ss, sizeof a);
    b->addr[10] = b->addr[11] = 0xff;
    memcpy(b->addr + 12, &a.sin_addr, 4);
    b->port = ntohs(a.sin_port);
    b->any = a.sin_addr.s_addr == htonl(INADDR_ANY);
    b->v4 = true;
    return true;
  }
  if (ss.ss_family == AF_INET6) {
    sockaddr_in6 a;
    memcpy(&a, &ss, sizeof a);
    memcpy(b->addr, &a.sin6_addr, 16);
    b->port = ntohs(a.sin6_port);
    b->any = IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr);
    return true;
  }
  return false;
}

// An IPv4 address in IPv6 form (::ffff:a.b.c.d).
bool v4_mapped(const uint8_t* a) {
  return std::all_of(a, a + 10, [](uint8_t x) { return x == 0; }) && a[10] == 0xff && a[11] == 0xff;
}

bool is_loopback(const uint8_t* a) {
  static const uint8_t v6_loop[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return memcmp(a, v6_loop, 16) == 0 || (v4_mapped(a) && a[12] == 127);
}

// Is `dest` one of this host's addresses? The kernel answers: a datagram
// socket connected to a local address takes that address as its own.
bool is_local(const sockaddr* dest, socklen_t len) {
  int s = sys::socket(dest->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  sockaddr_storage me{};
  socklen_t ml = sizeof me;
  bool local = sys::connect(s, dest, len) == 0 && sys::getsockname(s, reinterpret_cast<sockaddr*>(&me), &ml) == 0;
  sys::close(s);
  if (!local) return false;
  Bound d, m;
  sockaddr_storage ds{};
  memcpy(&ds, dest, std::min<size_t>(len, sizeof ds));
  return to_bound(ds, &d) && to_bound(me, &m) && memcmp(d.addr, m.addr, 16) == 0;
}

// Does a connection to `d` (from `dest`) reach the listener bound at `b`?
bool reaches(const Bound& b, const Bound& d, const sockaddr* dest, socklen_t len) {
  if (b.port != d.port) return false;
  if (!b.any) return memcmp(b.addr, d.addr, 16) == 0;
  bool d_v4 = v4_mapped(d.addr);
  if ((b.v4 && !d_v4) || (b.v6only_any && d_v4)) return false;
  return is_loopback(d.addr) || is_local(dest, len);
}

}  // namespace

void listening(int fd, const sockaddr_storage& ss) {
  Bound b;
  if (!to_bound(ss, &b)) return;
  if (ss.ss_family == AF_INET6 && b.any) {
    int only = 0;
    socklen_t ol = sizeof only;
    b.v6only_any = sys::getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, &ol) == 0 && only;
  }
  std::lock_guard<std::mutex> lock(g_register_mu);
  Slot* free_slot = nullptr;
  for (Slot& s : g_slots) {
    int cur = s.fd.load(std::memory_order_acquire);
    if (cur == fd) {
      free_slot = &s;
      break;
    }
    // A slot whose number is no SMC-R listener any more (closed, or reused).
    if (!free_slot && (cur < 0 || fd_table().kind(cur) != kFdSmcListener)) free_slot = &s;
  }
  if (!free_slot) {
    SMCR_LOG(1, "fd %d: more than %d SMC-R listeners; connects to it are not checked for this process", fd, kSlots);
    return;
  }
  bool same = free_slot->fd.load(std::memory_order_relaxed) == fd;
  free_slot->fd.store(-1, std::memory_order_release);
  free_slot->bound = b;
  if (!same) {  // a listen() again keeps its servers and epoll sets
    free_slot->servers.store(0, std::memory_order_relaxed);
    for (auto& e : free_slot->epfds) e.store(-1, std::memory_order_relaxed);
  }
  free_slot->generation.store(process_generation(), std::memory_order_relaxed);
  free_slot->fd.store(fd, std::memory_order_release);
  int index = static_cast<int>(free_slot - g_slots);
  if (index >= g_used.load(std::memory_order_relaxed)) g_used.store(index + 1, std::memory_order_release);
  g_any.store(true, std::memory_order_release);
}

namespace {
// The slot of our listener `fd`, or -1.
int slot_of(int fd) {
  int used = g_used.load(std::memory_order_acquire);
  for (int i = 0; i < used; ++i)
    if (g_slots[i].fd.load(std::memory_order_acquire) == fd) return fd_table().kind(fd) == kFdSmcListener ? i : -1;
  return -1;
}
}  // namespace

void Serving::count(int slot) {
  if (slot < 0 || n_ == kMax) return;
  for (int i = 0; i < n_; ++i)
    if (slots_[i] == slot) return;
  Slot& s = g_slots[slot];
  uint64_t gen = process_generation();
  if (s.generation.load(std::memory_order_acquire) != gen) {
    std::lock_guard<std::mutex> lock(g_register_mu);
    if (s.generation.load(std::memory_order_relaxed) != gen) {
      s.servers.store(0, std::memory_order_relaxed);
      s.generation.store(gen, std::memory_order_release);
    }
  }
  s.servers.fetch_add(1, std::memory_order_acq_rel);
  slots_[n_++] = slot;
}

Serving::~Serving() {
  for (int i = 0; i < n_; ++i) g_slots[slots_[i]].servers.fetch_sub(1, std::memory_order_acq_rel);
}

void Serving::listener(int fd) {
  if (g_any.load(std::memory_order_acquire)) count(slot_of(fd));
}

void Serving::poll_set(const struct pollfd* fds, unsigned long n) {
  if (!g_any.load(std::memory_order_acquire)) return;
  for (unsigned long i = 0; i < n; ++i)
    if (fds[i].fd >= 0 && (fds[i].events & (POLLIN | POLLRDNORM)) && fd_table().kind(fds[i].fd) == kFdSmcListener)
      count(slot_of(fds[i].fd));
}

void Serving::select_set(int nfds, const fd_set* readfds) {
  if (!readfds || !g_any.load(std::memory_order_acquire)) return;
  for (int fd = 0; fd < nfds && fd < FD_SETSIZE; ++fd)
    if (FD_ISSET(fd, readfds) && fd_table().kind(fd) == kFdSmcListener) count(slot_of(fd));
}

void Serving::epoll_set(int epfd) {
  if (!g_any.load(std::memory_order_acquire)) return;
  int used = g_used.load(std::memory_order_acquire);
  for (int i = 0; i < used; ++i) {
    Slot& s = g_slots[i];
    for (auto& e : s.epfds) {
      if (e.load(std::memory_order_relaxed) != epfd) continue;
      int fd = s.fd.load(std::memory_order_acquire);
      if (fd >= 0 && fd_table().kind(fd) == kFdSmcListener) count(i);
      break;
    }
  }
}

void epoll_watch(int epfd, int op, int fd, uint32_t events) {
  int slot = slot_of(fd);
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(g_register_mu);
  Slot& s = g_slots[slot];
  bool watch = op != EPOLL_CTL_DEL && (events & EPOLLIN);
  std::atomic<int>* free_entry = nullptr;
  for (auto& e : s.epfds) {
    int cur = e.load(std::memory_order_relaxed);
    if (cur == epfd) {
      if (!watch) e.store(-1, std::memory_order_relaxed);
      return;
    }
    if (cur < 0 && !free_entry) free_entry = &e;
  }
  // A fifth set is not counted: its waiters then look like nobody, and
  // connects to this listener go plain TCP (the safe side).
  if (watch && free_entry) free_entry->store(epfd, std::memory_order_relaxed);
}

void forget(int fd) {
  if (!g_any.load(std::memory_order_acquire)) return;
  int used = g_used.load(std::memory_order_acquire);
  for (int i = 0; i < used; ++i)
    for (auto& e : g_slots[i].epfds) {
      int cur = fd;
      // Loaded first: a close() is common, a closed epoll set that watched
      // a listener is not, and a failing compare-exchange still locks.
      if (e.load(std::memory_order_relaxed) == fd) e.compare_exchange_strong(cur, -1, std::memory_order_relaxed);
    }
}

bool unattended(const sockaddr* addr, socklen_t len) {
  if (!g_any.load(std::memory_order_acquire) || !addr || len < sizeof(sa_family_t)) return false;
  sockaddr_storage ds{};
  memcpy(&ds, addr, std::min<size_t>(len, sizeof ds));
  if ((ds.ss_family == AF_INET && len < sizeof(sockaddr_in)) || (ds.ss_family == AF_INET6 && len < sizeof(sockaddr_in6)))
    return false;
  Bound d;
  if (!to_bound(ds, &d)) return false;
  int used = g_used.load(std::memory_order_acquire);
  for (int i = 0; i < used; ++i) {
    Slot& s = g_slots[i];
    int fd = s.fd.load(std::memory_order_acquire);
    if (fd < 0 || s.bound.port != d.port) continue;  // the cheap test first
    if (fd_table().kind(fd) != kFdSmcListener || !reaches(s.bound, d, addr, len)) continue;
    // Ours. Served only if another thread of this process accepts on it
    // (soon); a forked child's listener may be served by its parent or not
    // at all (nginx's workers are forked): it cannot tell, so plain TCP.
    // Only a blocking listener is worth the grace: an event loop's is
    // non-blocking, and its accept() calls never wait.
    uint64_t gen = process_generation();
    int fl = sys::fcntl(fd, F_GETFL);
    int64_t until = sys::now_ms() + (fl >= 0 && !(fl & O_NONBLOCK) ? kGraceMs : 0);
    while (s.generation.load(std::memory_order_acquire) != gen || s.servers.load(std::memory_order_acquire) == 0) {
      if (sys::now_ms() >= until) return true;
      timespec pause{0, 200000};
      nanosleep(&pause, nullptr);
    }
    return false;
  }
  return false;
}

}  // namespace smcr::preload::own
