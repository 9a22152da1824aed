#include "core/handoff.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>
#include <span>
#include <vector>

#include "core/connection.h"
#include "core/engine.h"
#include "core/exec_carry.h"
#include "core/log.h"
#include "core/mutex.h"
#include "core/sys.h"
#include "core/worker_pool.h"

namespace smcr::handoff {

namespace {

// One shared region per process: a slot per live connection (its word, and
// room for its state when it is re-homed). Pages are touched only as
// connections use them.
constexpr size_t kSlots = 16384;

struct alignas(64) Slot {
  std::atomic<uint32_t> word;
  std::atomic<int32_t> owner_pid;  // the process that allocated it
  unsigned char snapshot[kSnapshotBytes];
};
static_assert(offsetof(Slot, word) == 0);

struct Region {
  Slot* base = nullptr;
  uint64_t generation = 0;  // process_generation() of the process that mapped it
  pid_t pid = 0;            // and its pid
  size_t next = 0;
  std::vector<uint32_t> free;
  std::vector<uint32_t> retired;  // re-homed: free once a holder took them
};

Slot* slot_of(std::atomic<uint32_t>* s) { return reinterpret_cast<Slot*>(s); }

// Never destroyed (as the other state below): a connection that ends on
// the engine thread while the process exits still frees its word.
constinit Mutex g_mu;
// Reached through functions, not namespace-scope references: an exec'd
// program's shim takes carried connections over in its earliest constructor
// (preload/exec_carry.h), before this file's dynamic initialisers run.
Region& region() SMCR_REQUIRES(g_mu) {
  static Region* r = new Region;
  return *r;
}
std::atomic<uint64_t> g_forks{0};
// Offers waiting for a claim (their words), and whether the process exits.
std::vector<std::atomic<uint32_t>*>& offers() SMCR_REQUIRES(g_mu) {
  static auto* v = new std::vector<std::atomic<uint32_t>*>;
  return *v;
}
std::atomic<bool> g_exiting{false};
// The offers whose holders' application socket is known, by its inode: a
// program exec'd by a forked child asks for its connection by it.
struct OfferedApp {
  std::atomic<uint32_t>* word;
  Connection* conn;  // the handover thread's reference keeps it
  uint64_t ino;
};
std::vector<OfferedApp>& offered_apps() SMCR_REQUIRES(g_mu) {
  static auto* v = new std::vector<OfferedApp>;
  return *v;
}

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
std::vector<HeldFd>& held() SMCR_REQUIRES(g_mu) {
  static auto* v = new std::vector<HeldFd>;
  return *v;
}
uint64_t g_next_relay SMCR_GUARDED_BY(g_mu) = 1;

// Offers a spawned program or the receiver of an SCM_RIGHTS message will ask
// for (Connection::passed): an exit waits longer for them, _exit too.
// Counted as the offer is made, before its thread runs: a process may end
// right after its close.
std::atomic<int> g_passed_offers{0};
// offers().size(), readable without g_mu (_exit may run in a signal handler).
std::atomic<int> g_open_offers{0};

void close_relayed_in_child() SMCR_REQUIRES(g_mu) {
  for (const HeldFd& h : held()) {
    struct stat st;
    if (sys::fstat(h.fd, &st) == 0 && st.st_dev == h.dev && st.st_ino == h.ino) sys::close(h.fd);
  }
  held().clear();  // no relay runs here: threads do not survive fork
  offers().clear();
  offered_apps().clear();
  g_passed_offers.store(0);  // the parent's, whose threads did not come along
  g_open_offers.store(0);
  g_exiting.store(false);
}

// The lock is held across fork so a child never inherits it taken.
void before_fork() SMCR_ACQUIRE(g_mu) { g_mu.lock(); }
void after_fork_in_parent() SMCR_RELEASE(g_mu) {
  g_forks.fetch_add(1);
  g_mu.unlock();
}
void after_fork_in_child() SMCR_RELEASE(g_mu) {
  close_relayed_in_child();
  g_mu.unlock();
}
[[maybe_unused]] const int g_atfork = pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);

// Registers what a relay holds; returns its id for forget_held().
// Adds descriptors to what relay `id` holds.
void note_held_as(uint64_t id, std::span<const int> fds) {
  MutexLock lock(g_mu);
  for (int fd : fds) {
    struct stat st;
    if (fd >= 0 && sys::fstat(fd, &st) == 0) held().push_back({id, fd, st.st_dev, st.st_ino});
  }
}

uint64_t note_held(std::span<const int> fds) {
  uint64_t id;
  {
    MutexLock lock(g_mu);
    id = g_next_relay++;
  }
  note_held_as(id, fds);
  return id;
}

// Before the relay's descriptors close: a later child has nothing to close.
void forget_held(uint64_t id) {
  MutexLock lock(g_mu);
  std::erase_if(held(), [id](const HeldFd& h) { return h.relay == id; });
}

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return smcr::sys::raw_syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

}  // namespace

std::atomic<uint32_t>* alloc_state() {
  MutexLock lock(g_mu);
  if (!region().base || region().generation != process_generation()) {
    // A forked child keeps its parent's region mapped (its inherited
    // connections' words live there) and allocates from a region of its own.
    void* p = ::mmap(nullptr, kSlots * sizeof(Slot), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    region().base = static_cast<Slot*>(p);
    region().generation = process_generation();
    region().pid = getpid();
    region().next = 0;
    region().free.clear();
    region().retired.clear();
  }
  if (region().free.empty() && region().next >= kSlots) {
    // Words of re-homed connections come back once their new owner has them.
    Region& r = region();
    std::erase_if(r.retired, [&r](uint32_t i) {
      uint32_t v = r.base[i].word.load(std::memory_order_acquire);
      if (v != kAdopted && v != kGone) return false;
      r.free.push_back(i);
      return true;
    });
  }
  std::atomic<uint32_t>* s = nullptr;
  if (!region().free.empty()) {
    s = &region().base[region().free.back()].word;
    region().free.pop_back();
  } else if (region().next < kSlots) {
    s = &region().base[region().next++].word;
  }
  if (s) {
    slot_of(s)->owner_pid.store(region().pid, std::memory_order_relaxed);
    s->store(kOwned, std::memory_order_release);
  }
  return s;
}

namespace {
std::optional<uint32_t> index_of(std::atomic<uint32_t>* s) SMCR_REQUIRES(g_mu) {
  Slot* slot = slot_of(s);
  if (region().generation != process_generation() || slot < region().base || slot >= region().base + kSlots)
    return std::nullopt;
  return static_cast<uint32_t>(slot - region().base);
}
}  // namespace

void free_state(std::atomic<uint32_t>* s) {
  if (!s) return;
  MutexLock lock(g_mu);
  if (auto i = index_of(s)) region().free.push_back(*i);
}

void retire_state(std::atomic<uint32_t>* s) {
  if (!s) return;
  MutexLock lock(g_mu);
  if (auto i = index_of(s)) region().retired.push_back(*i);
}

void* snapshot_area(std::atomic<uint32_t>* s) { return slot_of(s)->snapshot; }

bool owner_gone(std::atomic<uint32_t>* s) {
  if (!s) return false;
  pid_t pid = slot_of(s)->owner_pid.load(std::memory_order_relaxed);
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  // Killed but not reaped yet: a zombie answers kill().
  char path[64], stat[512] = {};
  snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd = static_cast<int>(smcr::sys::raw_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC));
  if (fd < 0) return errno == ENOENT;
  ssize_t n = sys::read(fd, stat, sizeof stat - 1);
  sys::close(fd);
  const char* end = n > 0 ? strrchr(stat, ')') : nullptr;
  return end && end[1] == ' ' && (end[2] == 'Z' || end[2] == 'X');
}

bool ask_owner_to_relay(std::atomic<uint32_t>* s, int app_end) {
  pid_t pid = owner_pid(s);
  struct stat st {};
  if (pid <= 0 || app_end < 0 || sys::fstat(app_end, &st) != 0) return false;
  char req[40];
  int len = snprintf(req, sizeof req, "relay %llu\n", static_cast<unsigned long long>(st.st_ino));
  // The owner drains its copy first: quick, unless it is stuck.
  int sock = Engine::ask_process(pid, std::string_view(req, static_cast<size_t>(len)), app_end, 3000);
  if (sock < 0) return false;
  char answer = 0;
  int tcp = -1;
  bool relayed = sys::recv_with_fd(sock, &answer, 1, &tcp, 0) == 1 && answer == exec_carry::kReplyTcp;
  if (tcp >= 0) sys::close(tcp);  // ours came with the fork
  sys::close(sock);
  return relayed;
}

void publish(std::atomic<uint32_t>* s, State v) {
  if (!s) return;
  s->store(v, std::memory_order_release);
  futex(s, FUTEX_WAKE, INT32_MAX, nullptr);  // shared memory: not FUTEX_PRIVATE
}

bool transition(std::atomic<uint32_t>* s, State from, State to) {
  if (!s) return false;
  uint32_t expected = from;
  if (!s->compare_exchange_strong(expected, to, std::memory_order_acq_rel)) return false;
  futex(s, FUTEX_WAKE, INT32_MAX, nullptr);
  return true;
}

State wait_while(std::atomic<uint32_t>* s, std::initializer_list<State> states, int timeout_ms) {
  if (!s) return kNone;
  int64_t deadline = sys::now_ms() + timeout_ms;
  for (;;) {
    uint32_t v = s->load(std::memory_order_acquire);
    if (std::find(states.begin(), states.end(), static_cast<State>(v)) == states.end()) return static_cast<State>(v);
    int64_t left = deadline - sys::now_ms();
    if (left <= 0) return static_cast<State>(v);
    timespec ts{static_cast<time_t>(left / 1000), static_cast<long>((left % 1000) * 1000000)};
    futex(s, FUTEX_WAIT, v, &ts);
  }
}

bool send_marker(int engine_end, std::span<const int> fds, char kind) {
  char byte = kind;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  if (fds.empty() || fds.size() > 4) return false;
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
  cmsghdr* h = CMSG_FIRSTHDR(&m);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(h), fds.data(), sizeof(int) * fds.size());
  for (;;) {
    ssize_t n = sys::sendmsg(engine_end, &m, MSG_NOSIGNAL);
    if (n == 1) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{engine_end, POLLOUT, 0};
      if (sys::poll(&p, 1, 1000) > 0) continue;
    }
    return false;
  }
}

int drain_to_marker(int app_end, std::span<int> fds, int timeout_ms, char kind) {
  int64_t deadline = sys::now_ms() + timeout_ms;
  char junk[256];
  for (;;) {
    iovec iov{junk, sizeof junk};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    ssize_t n = sys::recvmsg(app_end, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n > 0) {
      // The marker's byte is the last one read: the receive stopped after it.
      bool wanted = junk[n - 1] == kind;
      int got = -1;
      for (cmsghdr* h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        got = 0;
        for (size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
          if (wanted && static_cast<size_t>(got) < fds.size()) fds[static_cast<size_t>(got++)] = sys::hide_fd(fd);  // as sys::recv_with_fds
          else sys::close(fd);
        }
      }
      if (got >= 0 && wanted) return got;
      continue;  // readiness bytes before the marker, or a void marker
    }
    if (n == 0) return -1;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    int64_t left = deadline - sys::now_ms();
    if (left <= 0) return -1;
    pollfd p{app_end, POLLIN, 0};
    sys::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
  }
}

std::array<uint8_t, 44> encode_rehome(const Rehome& r) {
  std::array<uint8_t, 44> m{};
  m[0] = kRehomeMessageType;
  m[1] = 44;
  m[2] = static_cast<uint8_t>((r.reply ? 0x80 : 0) | (r.negative ? 0x40 : 0));
  for (int i = 0; i < 4; ++i) {
    m[4 + i] = static_cast<uint8_t>(r.receiver_token >> (24 - 8 * i));
    m[8 + i] = static_cast<uint8_t>(r.sender_token >> (24 - 8 * i));
  }
  return m;
}

std::optional<Rehome> decode_rehome(std::span<const uint8_t> msg) {
  if (msg.size() != 44 || msg[0] != kRehomeMessageType || msg[1] != 44 || (msg[2] & 0x3f) != 0) return std::nullopt;
  Rehome r;
  r.reply = msg[2] & 0x80;
  r.negative = msg[2] & 0x40;
  if (r.negative && !r.reply) return std::nullopt;
  for (int i = 0; i < 4; ++i) {
    r.receiver_token = r.receiver_token << 8 | msg[4 + i];
    r.sender_token = r.sender_token << 8 | msg[8 + i];
  }
  return r;
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

namespace {

struct HandoverArgs {
  Connection* conn;
  uint64_t held = 0;     // note_held()'s id
  bool passed = false;   // counted in g_passed_offers (start_handover)
};

void forget_offer(std::atomic<uint32_t>* w) {
  MutexLock lock(g_mu);
  g_open_offers.fetch_sub(static_cast<int>(std::erase(offers(), w)));
  std::erase_if(offered_apps(), [w](const OfferedApp& o) { return o.word == w; });
}

// How often an offer nobody claims checks whether its holders are gone.
constexpr int kOfferCheckMs = 50;

constexpr int kPassedExitWaitMs = 5000;
// What exit() gives the re-homing of offers nobody claimed (its caller's bound).
constexpr int kOpenOffersExitWaitMs = 1000;

void handover(const HandoverArgs& a) {
  Connection* c = a.conn;
  std::atomic<uint32_t>* w = c->handoff_word();
  struct PassedOffer {
    bool counted;
    ~PassedOffer() {
      if (counted) g_passed_offers.fetch_sub(1);
    }
  } passed_offer{a.passed};
  for (;;) {
    uint32_t v = w->load(std::memory_order_acquire);
    if (v == kOffered) {
      // A program spawned from here asks for it itself, as it starts: the
      // exit waits for that claim (finish_offers_at_exit's deadline).
      if (g_exiting.load() && !c->passed()) {
        transition(w, kOffered, kClaimDirect);
        continue;
      }
      if (c->holders_gone()) {
        forget_offer(w);
        forget_held(a.held);
        SMCR_LOG(1, "conn %08x: every holder closed it unclaimed", c->local_token());
        c->end_offer();
        return;
      }
      timespec ts{0, kOfferCheckMs * 1000000L};
      futex(w, FUTEX_WAIT, kOffered, &ts);
      continue;
    }
    // Still an offer while it moves: an exit waits for the move to end.
    if ((v == kClaimDirect && c->rehome_to_child()) || (v == kClaimRemote && c->pass_to_claimant())) {
      forget_offer(w);
      forget_held(a.held);
      return;
    }
    forget_offer(w);
    RelayArgs r{c, -1, -1};
    if (!c->start_relaying(&r.child_fd, &r.own_fd)) {
      forget_held(a.held);
      c->end_offer();
      return;
    }
    // The offer's descriptors (the old engine end is the stream's end now),
    // and the connection's new readiness pair.
    r.held = a.held;
    int own[] = {r.own_fd};
    note_held_as(r.held, own);
    note_held_as(r.held, c->held_fds());
    relay(r);
    return;
  }
}

}  // namespace

Connection* offered_connection(uint64_t ino) {
  if (ino == 0) return nullptr;
  MutexLock lock(g_mu);
  for (const OfferedApp& o : offered_apps())
    if (o.ino == ino && o.conn->try_ref()) return o.conn;
  return nullptr;
}

pid_t owner_pid(std::atomic<uint32_t>* s) {
  if (!s) return 0;
  pid_t pid = slot_of(s)->owner_pid.load(std::memory_order_relaxed);
  return pid > 0 ? pid : 0;
}

bool start_handover(Connection* c, std::initializer_list<int> held, uint64_t app_ino) {
  HandoverArgs args{c};
  std::vector<int> fds(held);
  args.held = note_held(fds);
  args.passed = c->passed();
  if (args.passed) g_passed_offers.fetch_add(1);
  {
    MutexLock lock(g_mu);
    offers().push_back(c->handoff_word());
    if (app_ino != 0) offered_apps().push_back({c->handoff_word(), c, app_ino});
    g_open_offers.fetch_add(1);
  }
  if (!workers::run([args] { handover(args); }, "smcr-handover")) {
    if (args.passed) g_passed_offers.fetch_sub(1);
    forget_offer(c->handoff_word());
    forget_held(args.held);
    return false;
  }
  return true;
}

bool relay_in_place(Connection* c) {
  RelayArgs r{c, -1, -1};
  if (!c->relay_here(&r.child_fd, &r.own_fd)) return false;
  int own[] = {r.own_fd};
  r.held = note_held(own);
  note_held_as(r.held, c->held_fds());
  if (!workers::run([r] { relay(r); }, "smcr-relay")) {
    // The stream has no server: its readers see it end.
    SMCR_LOG(0, "conn %08x: no thread for its relay: the connection ends", c->local_token());
    forget_held(r.held);
    sys::shutdown(r.child_fd, SHUT_RDWR);
    sys::close(r.child_fd);
    c->app_close(true);
  }
  return true;
}

namespace {
// At exit, once g_exiting is set: waits while offers remain (re-homing, or
// claimed by a spawned program), at most timeout_ms. No lock (_exit).
void wait_open_offers_at_exit(int timeout_ms) {
  int64_t start = sys::now_ms();
  while (g_open_offers.load() > 0) {
    // A spawned program asks as it starts: on a loaded machine that may take
    // longer than a forked child's first use.
    int64_t allowed = g_passed_offers.load() > 0 ? std::max(timeout_ms, kPassedExitWaitMs) : timeout_ms;
    if (sys::now_ms() > start + allowed) return;
    struct timespec ts{0, 2 * 1000000L};
    nanosleep(&ts, nullptr);
  }
}
}  // namespace

void finish_offers_at_exit(int timeout_ms) {
  std::vector<std::atomic<uint32_t>*> waiting;
  {
    MutexLock lock(g_mu);
    if (offers().empty()) return;
    waiting = offers();
  }
  g_exiting.store(true);
  for (auto* w : waiting) futex(w, FUTEX_WAKE, INT32_MAX, nullptr);
  wait_open_offers_at_exit(timeout_ms);
}

void await_passed_offers_at_exit() {
  // Offers to forked children first, as exit() does: re-homed, or they
  // would end with us (a ForkingMixIn parent that calls os._exit). The
  // handover threads see g_exiting within kOfferCheckMs without a wake.
  if (g_open_offers.load() > 0) {
    g_exiting.store(true);
    wait_open_offers_at_exit(kOpenOffersExitWaitMs);
  }
  int64_t deadline = sys::now_ms() + kPassedExitWaitMs;
  while (g_passed_offers.load() > 0 && sys::now_ms() < deadline) {
    struct timespec ts{0, 2 * 1000000L};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace smcr::handoff
