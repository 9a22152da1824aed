#include "core/handoff.h"

#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <mutex>
#include <span>
#include <vector>

#include "core/connection.h"
#include "core/log.h"
#include "core/sys.h"

namespace smcr::handoff {

namespace {

// One shared region per process: a word per live connection. Pages are
// touched only as connections use them.
constexpr size_t kSlots = 16384;

struct Region {
  std::atomic<uint32_t>* base = nullptr;
  uint64_t generation = 0;  // process_generation() of the process that mapped it
  size_t next = 0;
  std::vector<uint32_t> free;
};

std::mutex g_mu;
Region g_region;
std::atomic<uint64_t> g_forks{0};

// The descriptors of the relays running in this process (under g_mu). An
// accept-then-fork server forks again while earlier children are relayed
// (PostgreSQL: every backend), and fork copies every descriptor: without
// this, the n-th child held four or five descriptors of each of the n-1
// relayed connections before it, for its whole life, and ran out of them
// (RLIMIT_NOFILE 1024, a few hundred connections) where TCP's would not.
// Kept with the socket's identity: a number the parent closed and reused
// for something else (a new client's socket the child needs) is left alone.
struct HeldFd {
  uint64_t relay;  // the relay that holds it
  int fd;
  dev_t dev;
  ino_t ino;
};
std::vector<HeldFd> g_held;
uint64_t g_next_relay = 1;

void close_relayed_in_child() {
  for (const HeldFd& h : g_held) {
    struct stat st;
    if (sys::fstat(h.fd, &st) == 0 && st.st_dev == h.dev && st.st_ino == h.ino) sys::close(h.fd);
  }
  g_held.clear();  // no relay runs here: threads do not survive fork
}

// The lock is held across fork so a child never inherits it taken.
[[maybe_unused]] const int g_atfork = pthread_atfork([] { g_mu.lock(); },
                                                     [] {
                                                       g_forks.fetch_add(1);
                                                       g_mu.unlock();
                                                     },
                                                     [] {
                                                       close_relayed_in_child();
                                                       g_mu.unlock();
                                                     });

// Registers what a relay holds; returns its id for forget_held().
uint64_t note_held(std::span<const int> fds) {
  std::lock_guard<std::mutex> lock(g_mu);
  uint64_t id = g_next_relay++;
  for (int fd : fds) {
    struct stat st;
    if (fd >= 0 && sys::fstat(fd, &st) == 0) g_held.push_back({id, fd, st.st_dev, st.st_ino});
  }
  return id;
}

// Before the relay's descriptors close: a later child has nothing to close.
void forget_held(uint64_t id) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::erase_if(g_held, [id](const HeldFd& h) { return h.relay == id; });
}

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

}  // namespace

std::atomic<uint32_t>* alloc_state() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_region.base || g_region.generation != process_generation()) {
    // A forked child keeps its parent's region mapped (its inherited
    // connections' words live there) and allocates from a region of its own.
    void* p = ::mmap(nullptr, kSlots * sizeof(uint32_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    g_region.base = static_cast<std::atomic<uint32_t>*>(p);
    g_region.generation = process_generation();
    g_region.next = 0;
    g_region.free.clear();
  }
  std::atomic<uint32_t>* s = nullptr;
  if (!g_region.free.empty()) {
    s = g_region.base + g_region.free.back();
    g_region.free.pop_back();
  } else if (g_region.next < kSlots) {
    s = g_region.base + g_region.next++;
  }
  if (s) s->store(kOwned, std::memory_order_release);
  return s;
}

void free_state(std::atomic<uint32_t>* s) {
  if (!s) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_region.generation != process_generation() || s < g_region.base || s >= g_region.base + kSlots) return;
  g_region.free.push_back(static_cast<uint32_t>(s - g_region.base));
}

void publish(std::atomic<uint32_t>* s, State v) {
  if (!s) return;
  s->store(v, std::memory_order_release);
  futex(s, FUTEX_WAKE, INT32_MAX, nullptr);  // shared memory: not FUTEX_PRIVATE
}

State wait_while_owned(std::atomic<uint32_t>* s, int timeout_ms) {
  if (!s) return kNone;
  int64_t deadline = sys::now_ms() + timeout_ms;
  for (;;) {
    uint32_t v = s->load(std::memory_order_acquire);
    if (v != kOwned) return static_cast<State>(v);
    int64_t left = deadline - sys::now_ms();
    if (left <= 0) return kOwned;
    timespec ts{static_cast<time_t>(left / 1000), static_cast<long>((left % 1000) * 1000000)};
    futex(s, FUTEX_WAIT, kOwned, &ts);
  }
}

uint64_t forks_made() { return g_forks.load(std::memory_order_relaxed); }

namespace {

struct RelayArgs {
  Connection* conn;
  int child_fd;       // our end of the stream the child holds
  int own_fd;         // the connection's readiness socket (app end)
  uint64_t held = 0;  // note_held()'s id
};

// Bytes in flight in one direction.
struct Pending {
  std::vector<char> buf = std::vector<char>(64 * 1024);
  size_t len = 0, off = 0;
  bool empty() const { return off == len; }
};

void relay(const RelayArgs& a) {
  Connection* c = a.conn;
  const int kfd = a.child_fd;
  Pending down, up;  // down: peer -> child; up: child -> peer
  bool peer_eof = false, child_eof = false, child_gone = false, child_hup = false;
  while (!child_gone) {
    bool progress = true;
    while (progress && !child_gone) {
      progress = false;
      if (!peer_eof && down.empty()) {
        iovec iov{down.buf.data(), down.buf.size()};
        ssize_t n = c->recvv(&iov, 1, MSG_DONTWAIT);
        if (n > 0) {
          down.len = static_cast<size_t>(n);
          down.off = 0;
          progress = true;
        } else if (n == 0) {
          peer_eof = true;
          sys::shutdown(kfd, SHUT_WR);
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          // Reset or lost: the child's reads end, its writes fail.
          peer_eof = child_eof = true;
          up.off = up.len;
          sys::shutdown(kfd, SHUT_RDWR);
        }
      }
      if (!down.empty()) {
        ssize_t w = sys::send(kfd, down.buf.data() + down.off, down.len - down.off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
          down.off += static_cast<size_t>(w);
          progress = true;
        } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          child_gone = true;  // the child closed its socket
        }
      }
      if (!child_eof && up.empty()) {
        ssize_t n = sys::recv(kfd, up.buf.data(), up.buf.size(), MSG_DONTWAIT);
        if (n > 0) {
          up.len = static_cast<size_t>(n);
          up.off = 0;
          progress = true;
        } else if (n == 0) {
          child_eof = true;  // shutdown(SHUT_WR) or close in the child: D
          c->shutdown(SHUT_WR);
          progress = true;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          child_eof = child_gone = true;
        }
      }
      if (!up.empty()) {
        iovec iov{up.buf.data() + up.off, up.len - up.off};
        ssize_t s = c->sendv(&iov, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (s > 0) {
          up.off += static_cast<size_t>(s);
          progress = true;
        } else if (s < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          up.off = up.len;  // the peer is gone; reads report it
          child_eof = true;
        }
      }
    }
    // Its socket is closed (or both directions are): nothing more will come
    // once what it wrote before is read.
    if (child_hup && child_eof && up.empty()) child_gone = true;
    if (child_gone) break;
    if (peer_eof && child_eof && down.empty() && up.empty()) break;  // both directions closed
    pollfd p[2] = {{child_hup ? -1 : kfd, 0, 0}, {a.own_fd, 0, 0}};
    if (!down.empty()) p[0].events |= POLLOUT;
    if (!child_eof && up.empty()) p[0].events |= POLLIN;
    if (!peer_eof && down.empty()) p[1].events |= POLLIN;
    if (!up.empty()) p[1].events |= POLLOUT;
    if (sys::poll(p, 2, -1) < 0 && errno != EINTR) break;
    if (p[0].revents & (POLLHUP | POLLERR)) child_hup = true;
  }
  SMCR_LOG(1, "conn %08x: relay to the child ended", c->local_token());
  forget_held(a.held);
  sys::close(kfd);
  c->app_close(false);
}

}  // namespace

bool start_relay(Connection* c, int child_fd, int own_fd, std::initializer_list<int> also_held) {
  auto* args = new RelayArgs{c, child_fd, own_fd};
  std::vector<int> held{child_fd, own_fd};
  held.insert(held.end(), also_held.begin(), also_held.end());
  args->held = note_held(held);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  // Like the engine, the relay takes no signals meant for the application.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  int rc = pthread_create(&t, &attr, [](void* p) -> void* {
    RelayArgs args = *static_cast<RelayArgs*>(p);
    delete static_cast<RelayArgs*>(p);
    relay(args);
    return nullptr;
  }, args);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    forget_held(args->held);
    delete args;
    return false;
  }
  pthread_setname_np(t, "smcr-relay");
  return true;
}

}  // namespace smcr::handoff
