#include "core/engine.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <fcntl.h>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "core/connection.h"
#include "core/env.h"
#include "core/fabric_shm.h"
#include "core/link_group.h"
#include "core/log.h"
#include "core/mutex.h"
#include "core/sys.h"
#include "core/threads.h"

namespace smcr {

namespace {

enum class WatchKind { kWake, kRendezvousListener, kRendezvousHello, kGroup, kTcp, kDiag, kDevice, kStep };

struct Watch {
  WatchKind kind;
  int fd;
  LinkGroup* group = nullptr;
  Connection* conn = nullptr;  // kTcp: referenced while the watch lives
  int slot = 0;                // kGroup: which of the group's links
  bool watched = true;         // kGroup: still in the epoll set
  DeviceEventReader reader = nullptr;  // kDevice
  std::function<bool(bool)> step;      // kStep
  int64_t deadline = 0;                // kStep
  uint32_t events = 0;                 // kStep: what it waits for
  int64_t register_at = 0;             // kTcp: when it enters the epoll set
  bool registered = false;             // kTcp: in the epoll set
  bool cancelled = false;              // kTcp: unwatched before it was registered
};

// Drains one link of a group; false (and no longer watched) once it failed.
bool drain_link(int epfd, Watch* w, bool hangup) {
  LinkGroup* g = w->group;
  int slot = w->slot;
  bool alive = g->link_at(slot)->drain_messages([g, slot](std::span<const uint8_t> msg) { g->dispatch(slot, msg); });
  if (alive && !hangup) return true;
  // Messages queued before the failure were delivered above.
  if (w->watched) sys::epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, nullptr);
  w->watched = false;
  g->on_link_failure(slot);
  return false;
}

}  // namespace

struct Engine::Impl {
  int epfd = -1;
  int wake_fd = -1;
  Mutex mu;
  std::vector<LinkGroup*> add_queue SMCR_GUARDED_BY(mu);
  std::vector<LinkGroup*> retire_queue SMCR_GUARDED_BY(mu);
  std::vector<Connection*> timers SMCR_GUARDED_BY(mu);  // referenced
  std::map<Connection*, Watch*> tcp_watches SMCR_GUARDED_BY(mu);
  // TCP watches not in the epoll set yet, oldest first (see watch_tcp).
  std::deque<Watch*> tcp_watches_due SMCR_GUARDED_BY(mu);
  std::vector<Watch*> dead_watches SMCR_GUARDED_BY(mu);  // freed after the current epoll batch
  std::set<Watch*> step_watches SMCR_GUARDED_BY(mu);     // watch_readable
  // When the engine's current epoll_wait times out at the latest (sys::now_ms;
  // INT64_MAX: no timeout), as computed under mu before it sleeps.
  int64_t sleep_until_ms SMCR_GUARDED_BY(mu) = 0;
  bool rendezvous_watched = false;
  // pause_for_exec: asked, and the thread's answer.
  bool pause_asked SMCR_GUARDED_BY(mu) = false;
  bool paused SMCR_GUARDED_BY(mu) = false;
  std::condition_variable pause_cv;
  // run_on_engine_thread: queued under mu, each marked done under mu.
  struct Task {
    std::function<void()> run;
    bool done = false;
  };
  std::vector<std::shared_ptr<Task>> tasks SMCR_GUARDED_BY(mu);
  std::atomic<int> pending_tasks{0};  // tasks.size(), read without mu
  std::condition_variable task_cv;
  pid_t pid = 0;  // whose smcr-diag socket this engine serves
  std::set<Watch*> watches;
  // Watches that live as long as the process (wake-up, diagnostics,
  // adapters): kept here too, not only in the kernel's epoll set, so that
  // LeakSanitizer sees them reachable.
  std::vector<Watch*> permanent;
};

namespace {
Engine* g_engine = nullptr;  // set once, by the first get()
std::atomic<bool> g_links_kicked{false};  // kick_links: drain every link on the next wake-up
// How often the engine drains a link whose CQ it left unarmed while an
// application thread polls it (Link::rearm_deferred).
constexpr int kDeferredRearmTickMs = 1;
// How long a connection lives before its TCP socket enters the engine's
// epoll set (watch_tcp), and how many ms of due registrations one wake-up
// takes together.
constexpr int64_t kTcpWatchDelayMs = 50;
constexpr int64_t kTcpWatchBatchMs = 50;
}

Engine* Engine::get_if_started() {
  Engine* e = g_engine;
  return e && e->thread_running() ? e : nullptr;
}

Engine& Engine::get() {
  static Engine* e = g_engine = new Engine();
  // A forked child's generation differs (the atfork handler beside
  // process_generation), so it starts a thread of its own.
  const uint64_t here = process_generation();
  if (e->started_generation_.load(std::memory_order_acquire) == here) return *e;
  static std::mutex start_mu;
  std::lock_guard<std::mutex> lock(start_mu);
  if (e->started_generation_.load(std::memory_order_relaxed) != here) {
    if (e->impl_generation_ != here) {
      e->make_impl();
      e->impl_generation_ = here;
    }
    // Until a thread runs, get() asks again (and the handshakes decline:
    // thread_running), so that a process that was short of threads for a
    // while gets its engine once one can be had.
    if (e->start_thread()) {
      e->started_generation_.store(here, std::memory_order_release);
    } else if (e->thread_failure_said_ != here) {
      e->thread_failure_said_ = here;
      log_write(0, "no thread for the engine (%s): new connections of this process stay on TCP", strerror(errno));
    }
  }
  return *e;
}

bool Engine::thread_running() const {
  return started_generation_.load(std::memory_order_acquire) == process_generation();
}

void Engine::make_impl() {
  // In a forked child the parent's thread does not exist; its state is
  // abandoned (not freed: other threads' locks may have been held at fork).
  impl_ = new Impl();
  impl_->epfd = sys::hide_fd(epoll_create1(EPOLL_CLOEXEC));
  impl_->wake_fd = sys::hide_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  impl_->pid = getpid();
  auto* w = new Watch{WatchKind::kWake, impl_->wake_fd};
  impl_->permanent.push_back(w);
  epoll_event ev{EPOLLIN, {.ptr = w}};
  sys::epoll_ctl(impl_->epfd, EPOLL_CTL_ADD, impl_->wake_fd, &ev);
  // Diagnostics (tools/smcr_stat): an abstract socket named after our pid.
  int diag = sys::hide_fd(sys::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  socklen_t alen;
  sockaddr_un a = diagnostics_address(getpid(), &alen);
  if (diag >= 0 && sys::bind(diag, reinterpret_cast<sockaddr*>(&a), alen) == 0 &&
      sys::listen(diag, 8) == 0) {
    auto* dw = new Watch{WatchKind::kDiag, diag};
    impl_->permanent.push_back(dw);
    epoll_event dev{EPOLLIN, {.ptr = dw}};
    sys::epoll_ctl(impl_->epfd, EPOLL_CTL_ADD, diag, &dev);
  } else if (diag >= 0) {
    sys::close(diag);
  }
}

bool Engine::start_thread() {
  // Takes no signal meant for the application (threads.h).
  return threads::start_detached(
      [](void* self) -> void* {
        static_cast<Engine*>(self)->loop();
        return nullptr;
      },
      this, "smcr-engine");
}

namespace {
void wake(int fd) {
  uint64_t one = 1;
  sys::write(fd, &one, sizeof one);
}
}  // namespace

namespace {

// RFC 4.5.3 keepalive: TEST LINK on a link idle this long (SMCR_KEEPALIVE_MS,
// default 30 s; 0 disables), checked a few times per interval.
int64_t keepalive_interval_ms() {
  static const int64_t ms = [] {
    const char* v = env("SMCR_KEEPALIVE_MS");
    long x = v ? strtol(v, nullptr, 10) : 30000;
    return static_cast<int64_t>(x <= 0 ? INT32_MAX : std::max(x, 200L));
  }();
  return ms;
}
// Also how often idle server groups are checked against their linger time.
int64_t keepalive_tick_ms() {
  int64_t tick = std::min<int64_t>(std::max<int64_t>(keepalive_interval_ms() / 3, 100), 60000);
  if (int64_t linger = LinkGroup::linger_ms(); linger > 0) tick = std::min(tick, std::max<int64_t>(linger / 2, 100));
  return tick;
}

// Answers one smcr_stat client: the process, its link groups, links and
// connections, and the counters. Only the same user (or root) may look.
std::atomic<int (*)(uint64_t)> g_tcp_lookup{nullptr};

std::atomic<void (*)(uint64_t, int, bool)> g_take_handler{nullptr};

// "tcp <inode>": another process received a stream this one relays (sent
// over SCM_RIGHTS) and asks for its TCP socket, to answer getpeername and
// the socket options as TCP's. Answered with the socket (SCM_RIGHTS), or a
// byte alone. "take <inode>" / "relay <inode>": a program spawned from here
// asks for a connection it inherited (core/exec_carry.h), answered by the
// take handler. True when the request was one of these.
// `same_user`: the client runs as our user (or root). Another user's (a
// CGI program a root server's child runs as nobody) may only ask for the
// connection of a socket it holds: it sends that socket along.
bool answer_tcp_request(int fd, bool same_user) {
  char req[48];
  pollfd p{fd, POLLIN, 0};
  // A client that sends nothing (an older smcr_stat) waits this long more.
  if (sys::poll(&p, 1, 20) <= 0) return false;
  // Read (not peeked): a request left unread would make our close a reset.
  int proof = -1;
  ssize_t n = sys::recv_with_fd(fd, req, sizeof req - 1, &proof, MSG_DONTWAIT);
  if (n < 5) {
    if (proof >= 0) sys::close(proof);
    return false;
  }
  req[n] = '\0';
  bool take = std::memcmp(req, "take ", 5) == 0, relay = n > 6 && std::memcmp(req, "relay ", 6) == 0;
  if (take || relay) {
    auto handler = g_take_handler.load(std::memory_order_acquire);
    uint64_t ino = std::strtoull(req + (take ? 5 : 6), nullptr, 10);
    if (!same_user) {
      struct stat st {};
      bool holds = proof >= 0 && sys::fstat(proof, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == ino;
      if (!holds) handler = nullptr;
    }
    if (proof >= 0) sys::close(proof);
    if (handler) {
      handler(ino, fd, relay);
    } else {
      char none = '-';
      sys::send(fd, &none, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    return true;
  }
  if (proof >= 0) sys::close(proof);
  if (!same_user || std::memcmp(req, "tcp ", 4) != 0) return false;
  auto lookup = g_tcp_lookup.load(std::memory_order_acquire);
  int tcp = lookup ? lookup(std::strtoull(req + 4, nullptr, 10)) : -1;
  char byte = tcp >= 0 ? 't' : '-';
  sys::sendmsg_with_fd(fd, &byte, 1, tcp, MSG_DONTWAIT);
  if (tcp >= 0) sys::close(tcp);
  return true;
}

void serve_diagnostics(int listen_fd) {
  for (;;) {
    int fd = sys::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (sys::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      sys::close(fd);
      continue;
    }
    bool same_user = cred.uid == 0 || cred.uid == getuid();
    if (answer_tcp_request(fd, same_user) || !same_user) {
      sys::close(fd);
      continue;
    }
    char comm[64] = "?";
    int cf = static_cast<int>(smcr::sys::raw_syscall(SYS_openat, AT_FDCWD, "/proc/self/comm", O_RDONLY | O_CLOEXEC));
    if (cf >= 0) {
      ssize_t k = sys::read(cf, comm, sizeof comm - 1);
      comm[k > 0 ? k - 1 : 0] = '\0';
      sys::close(cf);
    }
    std::string report = "process pid=" + std::to_string(getpid()) + " comm=" + comm + "\n";
    report += LinkGroup::describe_all();
    std::string c = format_counters();
    for (char& ch : c)
      if (ch == '\n') ch = ' ';
    report += "counters " + c + "\n";
    timeval tv{1, 0};
    sys::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    for (size_t off = 0; off < report.size();) {
      ssize_t k = sys::send(fd, report.data() + off, report.size() - off, MSG_NOSIGNAL);
      if (k <= 0) break;
      off += static_cast<size_t>(k);
    }
    sys::close(fd);
  }
}

}  // namespace

void Engine::add_group(LinkGroup* g) {
  {
    MutexLock lock(impl_->mu);
    impl_->add_queue.push_back(g);
  }
  wake(impl_->wake_fd);
}

void Engine::retire_group(LinkGroup* g) {
  {
    MutexLock lock(impl_->mu);
    impl_->retire_queue.push_back(g);
  }
  wake(impl_->wake_fd);
}

void Engine::arm_timer(Connection* c) {
  c->ref();
  bool sooner;
  {
    MutexLock lock(impl_->mu);
    impl_->timers.push_back(c);
    // A close timer (seconds) usually falls after the engine's next wake-up
    // anyway (the keepalive tick): then there is nothing to wake it for, and
    // a short-lived connection saves a context switch.
    sooner = c->timer_deadline() < impl_->sleep_until_ms;
  }
  if (sooner) wake(impl_->wake_fd);
}

// The watch is for a peer that vanishes without an SMC-R close, which the
// grace timer of tcp_peer_gone_locked (1 s) waits out anyway; a short-lived
// connection (an HTTP request with Connection: close) ends before it would
// matter. So the socket enters the epoll set only once the connection has
// lived kTcpWatchDelayMs, several at a wake-up: one that ends sooner costs no
// epoll_ctl either way. A FIN that came before the registration is reported
// by it at once (the set reports the socket's state).
void Engine::watch_tcp(Connection* c, int tcp_fd) {
  c->ref();
  auto* w = new Watch{WatchKind::kTcp, tcp_fd, nullptr, c};
  w->register_at = sys::now_ms() + kTcpWatchDelayMs;
  bool sooner;
  {
    MutexLock lock(impl_->mu);
    impl_->tcp_watches[c] = w;
    impl_->tcp_watches_due.push_back(w);
    sooner = w->register_at + kTcpWatchBatchMs < impl_->sleep_until_ms;
  }
  if (sooner) wake(impl_->wake_fd);
}

void Engine::unwatch_tcp(Connection* c) {
  MutexLock lock(impl_->mu);
  auto it = impl_->tcp_watches.find(c);
  if (it == impl_->tcp_watches.end()) return;
  Watch* w = it->second;
  impl_->tcp_watches.erase(it);
  if (!w->registered) {
    // Still in tcp_watches_due, which frees it.
    w->cancelled = true;
    return;
  }
  // The fd is still open here, so this removes exactly our registration. The
  // watch may still sit in the batch being processed, so it is freed (and
  // the connection unreferenced) after that batch.
  sys::epoll_ctl(impl_->epfd, EPOLL_CTL_DEL, w->fd, nullptr);
  impl_->dead_watches.push_back(w);
}

void* Engine::watch_readable(int fd, int64_t deadline_ms, std::function<bool(bool)> step) {
  return watch(fd, EPOLLIN | EPOLLRDHUP, deadline_ms, std::move(step));
}

void* Engine::watch_writable(int fd, int64_t deadline_ms, std::function<bool(bool)> step) {
  return watch(fd, EPOLLOUT | EPOLLRDHUP, deadline_ms, std::move(step));
}

void* Engine::watch(int fd, uint32_t events, int64_t deadline_ms, std::function<bool(bool)> step) {
  auto* w = new Watch{WatchKind::kStep, fd};
  w->step = std::move(step);
  w->deadline = deadline_ms;
  w->events = events;
  bool sooner;
  {
    MutexLock lock(impl_->mu);
    impl_->step_watches.insert(w);
    epoll_event ev{events | EPOLLONESHOT, {.ptr = w}};
    sys::epoll_ctl(impl_->epfd, EPOLL_CTL_ADD, fd, &ev);
    sooner = deadline_ms < impl_->sleep_until_ms;
  }
  if (sooner) wake(impl_->wake_fd);  // its deadline must not be missed
  return w;
}

void Engine::end_watch(void* handle) {
  auto* w = static_cast<Watch*>(handle);
  MutexLock lock(impl_->mu);
  if (!impl_->step_watches.erase(w)) return;  // ended already (the pointer is not touched)
  sys::epoll_ctl(impl_->epfd, EPOLL_CTL_DEL, w->fd, nullptr);
  impl_->dead_watches.push_back(w);
}

bool Engine::serve_shm_rendezvous() {
  int fd = ShmRendezvous::instance().listener_fd();
  if (fd < 0) return false;
  MutexLock lock(impl_->mu);
  if (!impl_->rendezvous_watched) {
    auto* w = new Watch{WatchKind::kRendezvousListener, fd};
    epoll_event ev{EPOLLIN, {.ptr = w}};
    if (sys::epoll_ctl(impl_->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) return false;
    impl_->rendezvous_watched = true;
  }
  return true;
}

sockaddr_un Engine::diagnostics_address(pid_t pid, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "smcr-diag-%d", static_cast<int>(pid));
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

int Engine::ask_process(pid_t pid, std::string_view request, int proof_fd, int timeout_ms, const char** failed_step) {
  const char* step = "connect";
  int s = sys::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s >= 0) {
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    sys::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sys::setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    socklen_t alen;
    sockaddr_un a = diagnostics_address(pid, &alen);
    if (sys::connect(s, reinterpret_cast<sockaddr*>(&a), alen) == 0) {
      step = "send";
      if (sys::sendmsg_with_fd(s, request.data(), request.size(), proof_fd, MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()))
        return s;
    }
    int err = errno;
    sys::close(s);
    errno = err;
  }
  if (failed_step) *failed_step = step;
  return -1;
}

void Engine::set_tcp_lookup(int (*lookup)(uint64_t inode)) { g_tcp_lookup.store(lookup, std::memory_order_release); }
void Engine::set_take_handler(void (*handler)(uint64_t inode, int fd, bool relay)) {
  g_take_handler.store(handler, std::memory_order_release);
}

bool Engine::run_on_engine_thread(std::function<void()> task, int timeout_ms) {
  Engine* e = get_if_started();
  if (!e) return false;
  Impl* im = e->impl_;
  auto t = std::make_shared<Impl::Task>();
  t->run = std::move(task);
  MutexLock lock(im->mu);
  im->tasks.push_back(t);
  im->pending_tasks.store(static_cast<int>(im->tasks.size()), std::memory_order_release);
  uint64_t one = 1;
  if (sys::write(im->wake_fd, &one, sizeof one) != static_cast<ssize_t>(sizeof one)) {
    // A vfork child that closed every other descriptor (CPython's
    // close_fds): a connection to the engine's diagnostics socket wakes it.
    int poke = sys::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t alen;
    sockaddr_un a = diagnostics_address(im->pid, &alen);
    if (poke >= 0) {
      sys::connect(poke, reinterpret_cast<sockaddr*>(&a), alen);
      sys::close(poke);
    }
  }
  return im->mu.wait_for(im->task_cv, std::chrono::milliseconds(timeout_ms), [&t] { return t->done; });
}

void Engine::kick_links() {
  Engine* e = get_if_started();
  if (!e) return;
  if (g_links_kicked.exchange(true, std::memory_order_acq_rel)) return;  // already on its way
  wake(e->impl_->wake_fd);
}

bool Engine::pause_for_exec(int timeout_ms) {
  Engine* e = get_if_started();
  if (!e) return true;
  Impl* im = e->impl_;
  MutexLock lock(im->mu);
  im->pause_asked = true;
  wake(im->wake_fd);
  if (im->mu.wait_for(im->pause_cv, std::chrono::milliseconds(timeout_ms),
                      [im]() SMCR_REQUIRES(im->mu) { return im->paused; }))
    return true;
  im->pause_asked = false;
  im->pause_cv.notify_all();
  return false;
}

void Engine::resume_after_exec() {
  Engine* e = get_if_started();
  if (!e) return;
  MutexLock lock(e->impl_->mu);
  e->impl_->pause_asked = false;
  e->impl_->pause_cv.notify_all();
}

void Engine::loop() {
  Impl* im = impl_;
  // run_on_engine_thread's tasks, after any wake-up (a vfork child that
  // closed its copy of wake_fd wakes us through the diagnostics socket).
  auto run_tasks = [im] {
    if (im->pending_tasks.load(std::memory_order_acquire) == 0) return;
    std::vector<std::shared_ptr<Impl::Task>> tasks;
    {
      MutexLock lock(im->mu);
      tasks.swap(im->tasks);
      im->pending_tasks.store(0, std::memory_order_relaxed);
    }
    for (auto& t : tasks) {
      t->run();
      MutexLock lock(im->mu);
      t->done = true;
    }
    im->task_cv.notify_all();
  };
  std::vector<Watch*> group_watches;
  std::set<int> device_fds;
  int64_t last_keepalive = sys::now_ms();
  epoll_event events[64];
  for (;;) {
    refresh_stats_file(sys::now_ms());  // outside mu: it writes a file
    int timeout = group_watches.empty() ? -1 : static_cast<int>(keepalive_tick_ms());
    // A link left unarmed for an application thread's polling is drained
    // again each tick, and armed once the polling stops.
    bool rearm_deferred = false;
    for (Watch* w : group_watches)
      if (w->watched && !w->group->failed() && w->group->link_at(w->slot)->rearm_deferred()) rearm_deferred = true;
    if (rearm_deferred) timeout = kDeferredRearmTickMs;
    {
      MutexLock lock(im->mu);
      if (im->pause_asked) {  // pause_for_exec: between two batches
        im->paused = true;
        im->pause_cv.notify_all();
        im->mu.wait(im->pause_cv, [im]() SMCR_REQUIRES(im->mu) { return !im->pause_asked; });
        im->paused = false;
      }
      int64_t now = sys::now_ms();
      auto consider = [&](int64_t d) {
        int left = d <= now ? 0 : static_cast<int>(std::min<int64_t>(d - now, INT32_MAX));
        if (timeout < 0 || left < timeout) timeout = left;
      };
      while (!im->tcp_watches_due.empty() && im->tcp_watches_due.front()->register_at <= now) {
        Watch* w = im->tcp_watches_due.front();
        im->tcp_watches_due.pop_front();
        if (w->cancelled) {
          im->dead_watches.push_back(w);
          continue;
        }
        epoll_event ev{EPOLLRDHUP | EPOLLONESHOT, {.ptr = w}};
        sys::epoll_ctl(im->epfd, EPOLL_CTL_ADD, w->fd, &ev);
        w->registered = true;
      }
      if (!im->tcp_watches_due.empty()) consider(im->tcp_watches_due.front()->register_at + kTcpWatchBatchMs);
      for (Connection* c : im->timers) consider(c->timer_deadline());
      for (Watch* w : im->step_watches) consider(w->deadline);
      // --stats: the file is kept current (core/log.h), so the engine looks
      // at the counters every kStatsRefreshMs while the process lives.
      if (int refresh = stats_refresh_ms(); refresh >= 0 && (timeout < 0 || timeout > refresh)) timeout = refresh;
      im->sleep_until_ms = timeout < 0 ? INT64_MAX : now + timeout;
    }
    int n = sys::epoll_wait(im->epfd, events, 64, timeout);
    run_tasks();
    for (int i = 0; i < n; ++i) {
      Watch* w = static_cast<Watch*>(events[i].data.ptr);
      switch (w->kind) {
        case WatchKind::kWake: {
          uint64_t v;
          sys::read(w->fd, &v, sizeof v);
          break;
        }
        case WatchKind::kRendezvousListener:
          ShmRendezvous::instance().on_listener_readable([&](int fd) {
            auto* hw = new Watch{WatchKind::kRendezvousHello, fd};
            epoll_event ev{EPOLLIN | EPOLLRDHUP, {.ptr = hw}};
            if (sys::epoll_ctl(im->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
              sys::close(fd);
              delete hw;
            }
          });
          break;
        case WatchKind::kRendezvousHello:
          sys::epoll_ctl(im->epfd, EPOLL_CTL_DEL, w->fd, nullptr);
          if (!ShmRendezvous::instance().on_hello_readable(w->fd)) {
            epoll_event ev{EPOLLIN | EPOLLRDHUP, {.ptr = w}};
            sys::epoll_ctl(im->epfd, EPOLL_CTL_ADD, w->fd, &ev);
            break;
          }
          delete w;
          break;
        case WatchKind::kDiag:
          serve_diagnostics(w->fd);
          break;
        case WatchKind::kTcp: {
          bool active;
          {
            MutexLock lock(im->mu);
            auto it = im->tcp_watches.find(w->conn);
            active = it != im->tcp_watches.end() && it->second == w;
            if (active) {
              im->tcp_watches.erase(it);
              im->dead_watches.push_back(w);
            }
          }
          if (active) w->conn->on_tcp_peer_gone();
          break;
        }
        case WatchKind::kStep: {
          {
            MutexLock lock(im->mu);
            if (!im->step_watches.count(w)) break;
          }
          bool done = w->step(false);
          MutexLock lock(im->mu);
          if (!im->step_watches.count(w)) break;  // end_watch'ed during the step
          if (done) {
            im->step_watches.erase(w);
            sys::epoll_ctl(im->epfd, EPOLL_CTL_DEL, w->fd, nullptr);
            im->dead_watches.push_back(w);
          } else {
            epoll_event ev{w->events | EPOLLONESHOT, {.ptr = w}};
            sys::epoll_ctl(im->epfd, EPOLL_CTL_MOD, w->fd, &ev);
          }
          break;
        }
        case WatchKind::kGroup: {
          if (!w->watched || w->group->failed()) break;
          drain_link(im->epfd, w, (events[i].events & (EPOLLHUP | EPOLLERR)) != 0);
          break;
        }
        case WatchKind::kDevice: {
          // A port or adapter went away: its links fail now rather than
          // when their retries run out (RFC 4.6: connections move).
          for (const DeviceEvent& ev : w->reader(w->fd)) {
            if (!ev.down) continue;
            for (Watch* gw : group_watches) {
              if (!gw->watched || gw->group->failed() || !gw->group->link_up(gw->slot) ||
                  !gw->group->link_at(gw->slot)->uses_port(ev.device, ev.port))
                continue;
              SMCR_LOG(1, "engine: %s on %s port %d: link %u down", ev.what.c_str(), ev.device.c_str(), ev.port,
                       gw->group->link_num_at(gw->slot));
              gw->group->link_at(gw->slot)->take_down();
              drain_link(im->epfd, gw, true);
            }
          }
          break;
        }
      }
    }
    if (bool kicked = g_links_kicked.exchange(false, std::memory_order_acq_rel); kicked || rearm_deferred) {
      for (Watch* w : group_watches) {
        if (!w->watched || w->group->failed()) continue;
        // A thread polling the link takes its messages itself, and arms it
        // if it gives up: the tick is for a link whose polling has stopped.
        // A thread that polled within SMCR_REARM_DEFER_US is between two
        // polls (handling what it took): what came meanwhile is its next
        // poll's, not an engine hop (under load a reply's handling takes
        // longer than a tick).
        Link* link = w->group->link_at(w->slot);
        if (kicked || (link->rearm_deferred() && !link->app_polling_recently())) drain_link(im->epfd, w, false);
      }
    }
    std::vector<LinkGroup*> adds, retires;
    std::vector<Connection*> due;
    std::vector<Watch*> dead, expired;
    {
      MutexLock lock(im->mu);
      int64_t now = sys::now_ms();
      for (auto it = im->step_watches.begin(); it != im->step_watches.end();) {
        if ((*it)->deadline > now) {
          ++it;
          continue;
        }
        sys::epoll_ctl(im->epfd, EPOLL_CTL_DEL, (*it)->fd, nullptr);
        expired.push_back(*it);
        it = im->step_watches.erase(it);
      }
      dead.swap(im->dead_watches);
      adds.swap(im->add_queue);
      retires.swap(im->retire_queue);
      for (auto it = im->timers.begin(); it != im->timers.end();) {
        int64_t d = (*it)->timer_deadline();
        if (d == 0 || d <= now) {
          due.push_back(*it);
          it = im->timers.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (LinkGroup* g : adds) {
      for (int slot = 0; slot < g->link_slots(); ++slot) {
        Link* link = g->link_at(slot);
        auto* w = new Watch{WatchKind::kGroup, link->notify_fd(), g};
        w->slot = slot;
        group_watches.push_back(w);
        epoll_event ev{EPOLLIN | EPOLLRDHUP, {.ptr = w}};
        sys::epoll_ctl(im->epfd, EPOLL_CTL_ADD, w->fd, &ev);
        // The adapter's event queue, once per adapter (never unwatched: the
        // adapter's context lives as long as the process).
        int dfd = link->device_event_fd();
        if (dfd >= 0 && link->device_event_reader() && device_fds.insert(dfd).second) {
          auto* dw = new Watch{WatchKind::kDevice, dfd};
          im->permanent.push_back(dw);
          dw->reader = link->device_event_reader();
          epoll_event dev{EPOLLIN, {.ptr = dw}};
          sys::epoll_ctl(im->epfd, EPOLL_CTL_ADD, dfd, &dev);
        }
      }
      // Messages may have queued before we started watching.
      for (Watch* w : group_watches)
        if (w->group == g && w->watched && !g->failed()) drain_link(im->epfd, w, false);
    }
    for (Watch* w : expired) {
      w->step(true);
      delete w;
    }
    for (Watch* w : dead) {
      if (w->conn) w->conn->unref();
      delete w;
    }
    if (int64_t t = sys::now_ms(); t - last_keepalive >= keepalive_tick_ms()) {
      last_keepalive = t;
      for (Watch* w : group_watches) {
        if (w->group->role() == Role::kServer) w->group->retire_if_idle(t);
        if (!w->watched || w->group->failed() || !w->group->link_up(w->slot) ||
            w->group->keepalive_tick(w->slot, t, keepalive_interval_ms()))
          continue;
        sys::epoll_ctl(im->epfd, EPOLL_CTL_DEL, w->fd, nullptr);
        w->watched = false;
        w->group->on_link_failure(w->slot);
      }
    }
    int64_t now = sys::now_ms();
    for (Connection* c : due) {
      c->on_timer(now);
      c->unref();
    }
    for (LinkGroup* g : retires) {
      for (auto it = group_watches.begin(); it != group_watches.end();) {
        if ((*it)->group != g) {
          ++it;
          continue;
        }
        if ((*it)->watched) sys::epoll_ctl(im->epfd, EPOLL_CTL_DEL, (*it)->fd, nullptr);
        delete *it;
        it = group_watches.erase(it);
      }
      g->terminate();
      delete g;  // closes the links
    }
  }
}

}  // namespace smcr
