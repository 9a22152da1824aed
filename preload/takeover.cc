#include "preload/takeover.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/engine.h"
#include "core/env.h"
#include "core/log.h"
#include "core/short_flows.h"
#include "core/sys.h"
#include "core/worker_pool.h"

namespace smcr::preload {

void Reserved::release() {
  for (int fd : {app_end, engine_end, tcp})
    if (fd >= 0) sys::close(fd);
  app_end = engine_end = tcp = -1;
}

Reserved reserve(int fd) {
  Reserved r;
  if (!Connection::make_readiness_pair(&r.app_end, &r.engine_end)) return r;
  r.tcp = sys::dup_hidden(fd);
  if (r.tcp < 0) r.release();
  return r;
}

namespace {

// The status (O_NONBLOCK) and descriptor (FD_CLOEXEC) flags of `fd`: from
// accept4()'s flags when it was just accepted (`accept_flags` >= 0: the
// application has not seen it), else asked.
struct DescriptorModes {
  int status, fdflags;
};
DescriptorModes descriptor_modes(int fd, int accept_flags) {
  if (accept_flags >= 0)
    return {(accept_flags & SOCK_NONBLOCK) ? O_NONBLOCK : 0, (accept_flags & SOCK_CLOEXEC) ? FD_CLOEXEC : 0};
  return {sys::fcntl(fd, F_GETFL), sys::fcntl(fd, F_GETFD)};
}

// Gives `c` the TCP socket and both readiness ends of `r`. `default_options`:
// the application never set the options below (kFdDefaultOptions).
void attach(Connection* c, const Reserved& r, bool nonblocking, bool default_options) {
  c->set_tcp_fd(r.tcp);
  if (default_options) {
    Engine::get().watch_tcp(c, r.tcp);
    c->attach_fds(r.app_end, r.engine_end, nonblocking);
    return;
  }
  // Set before connect() (or on the listener, which accepted sockets inherit).
  int inline_oob = 0;
  socklen_t ilen = sizeof inline_oob;
  if (sys::getsockopt(r.tcp, SOL_SOCKET, SO_OOBINLINE, &inline_oob, &ilen) == 0 && inline_oob)
    c->set_oob_inline(true);
  // SO_LINGER {1, 0} set before connect(), on the listener, or while the
  // handshake ran on a thread (the option went to the TCP socket then): the
  // close stays abortive (CPython's test_ssl sets it right after connect()).
  linger l{};
  socklen_t llen = sizeof l;
  if (sys::getsockopt(r.tcp, SOL_SOCKET, SO_LINGER, &l, &llen) == 0 && l.l_onoff && l.l_linger == 0)
    c->set_linger_abort(true);
  // SO_RCVTIMEO / SO_SNDTIMEO set the same ways: a recv() would otherwise
  // block for ever where TCP's times out (EAGAIN). Below 1 ms: 1 ms.
  for (int name : {SO_RCVTIMEO, SO_SNDTIMEO}) {
    timeval tv{};
    socklen_t tlen = sizeof tv;
    if (sys::getsockopt(r.tcp, SOL_SOCKET, name, &tv, &tlen) != 0 || (tv.tv_sec == 0 && tv.tv_usec == 0)) continue;
    int64_t ms = static_cast<int64_t>(tv.tv_sec) * 1000 + (tv.tv_usec + 999) / 1000;
    c->set_timeout(name == SO_RCVTIMEO, static_cast<int>(std::min<int64_t>(ms, INT_MAX)));
  }
  Engine::get().watch_tcp(c, r.tcp);
  c->attach_fds(r.app_end, r.engine_end, nonblocking);
}

// The readiness socket takes the application's number `fd` (dup3, with
// the number's close-on-exec flag). EBUSY is another thread's open()
// between taking that number and installing its file: it passes. On
// failure (logged; errno kept) the number still holds the TCP socket.
bool take_number(const Reserved& r, int fd, int fdflags) {
  for (int tries = 0;; ++tries) {
    if (sys::dup3(r.app_end, fd, (fdflags & FD_CLOEXEC) ? O_CLOEXEC : 0) >= 0) return true;
    if ((errno != EINTR && errno != EBUSY) || tries >= 1000) break;
    sched_yield();
  }
  int err = errno;
  log_write(0, "fd %d: the readiness socket cannot take the number (dup3: %s): connection reset", fd, strerror(err));
  errno = err;
  return false;
}

}  // namespace

bool install(int fd, Connection* c, const Reserved& r, int accept_flags) {
  auto [status, fdflags] = descriptor_modes(fd, accept_flags);
  if (status & O_NONBLOCK) sys::fcntl(r.app_end, F_SETFL, O_NONBLOCK);
  attach(c, r, status & O_NONBLOCK, fd_table().flags(fd) & kFdDefaultOptions);
  Connection* old = fd_table().set(fd, c);
  if (old) old->unref();
  if (take_number(r, fd, fdflags)) return true;
  // The number still holds the TCP socket: its calls must not reach the
  // connection, and the connection, which the peer already uses, cannot
  // go back to TCP. It ends as a handshake that failed late: reset (the
  // caller resets the TCP socket at the number).
  int err = errno;
  if (Connection* mine = fd_table().take(fd)) {
    if (mine->drop_user_fd()) mine->app_close(true);
    else mine->unref();
  }
  errno = err;
  return false;
}

bool defer_confirm_enabled() {
  static const bool on = env_long("SMCR_DEFER_CONFIRM", 1, 0, 1) != 0;
  return on;
}

namespace {

// One accept() whose handshake had not ended when it returned: a deferred
// Confirm, or a silent client's whole handshake on a thread (then, after a
// fallback, its relay). Shared by the registry (until the handshake ends
// in SMC-R, or until the application closes the number), the engine's
// watch or the handshake thread, and any application thread waiting on it.
struct Accepting {
  std::mutex mu;
  std::condition_variable ended;      // notified when the handshake ends (conclude_locked)
  // kRelayed: the handshake fell back to TCP after accept() returned; a
  // relay thread moves bytes between the TCP socket and the readiness
  // socket, which is a plain byte stream to the application from then on.
  enum State { kWaiting, kDone, kFailed, kClosed, kRelayed } state = kWaiting;
  bool threaded = false;              // the whole handshake runs on a thread of its own
  bool client = false;                // a connect()'s handshake (start_connecting_threaded)
  bool reset_tcp = true;              // closing res.tcp resets (not after an orderly relay)
  int fd = -1;                        // the application's number
  Reserved res;                       // the connection's once kDone
  void* watch = nullptr;              // Engine::watch_readable, until it ends
  uint32_t sndbuf = 0;
  PendingConfirm* handshake = nullptr;  // while kWaiting
  bool error_reported = false;        // kFailed: ECONNRESET was returned once
  uint64_t generation = process_generation();  // a forked child's copy is not its own
  uint32_t short_flow = 0;            // a client's destination (core/short_flows.h), 0: none
  // A threaded client's bytes written before its handshake ended
  // (accepting_write): sent first when it ends, over SMC-R or over TCP.
  std::string early;
  bool early_shut_wr = false;         // shutdown(SHUT_WR) meanwhile (accepting_shutdown)

  ~Accepting() {
    if (res.tcp >= 0 && reset_tcp) {
      linger l{1, 0};  // a failed handshake: RST, as the client's side expects
      sys::setsockopt(res.tcp, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    res.release();
  }
};

std::mutex g_registry_mu;  // taken after an Accepting's mu, never before
std::unordered_map<int, std::shared_ptr<Accepting>>& registry() {
  static auto* m = new std::unordered_map<int, std::shared_ptr<Accepting>>();
  return *m;
}

std::shared_ptr<Accepting> find(int fd) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  auto it = registry().find(fd);
  return it == registry().end() ? nullptr : it->second;
}

void unregister_locked(Accepting* a) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  auto it = registry().find(a->fd);
  if (it != registry().end() && it->second.get() == a) registry().erase(it);
}

// Threaded client handshakes holding early bytes (flush_relays_at_exit
// waits for them, as the kernel sends a closed TCP socket's queued bytes).
std::atomic<int> g_early_pending{0};

// A fallback: the early bytes go to the TCP socket before the relay starts
// (the application's later bytes follow them through the relay).
void send_early_over_tcp(Accepting* a) {
  size_t off = 0;
  const int64_t until = sys::now_ms() + 2000;
  while (off < a->early.size() && a->res.tcp >= 0) {
    ssize_t k = sys::send(a->res.tcp, a->early.data() + off, a->early.size() - off, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k > 0) {
      off += static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EINTR) break;
    int64_t left = until - sys::now_ms();
    if (left <= 0) break;
    pollfd p{a->res.tcp, POLLOUT, 0};
    sys::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
  }
  if (off < a->early.size())
    log_write(0, "fd %d: %zu of the %zu bytes written before the handshake ended could be sent over TCP", a->fd, off,
              a->early.size());
}

// The application sees a reset socket: hung up, ECONNRESET once; the peer
// a RST now (a.mu held).
void reset_locked(Accepting* a) {
  sys::shutdown(a->res.engine_end, SHUT_RDWR);
  sys::abort_tcp(a->res.tcp);
  if (a->state != Accepting::kClosed) a->state = Accepting::kFailed;
}

// The handshake ended (a.mu held): install the connection, or reset, or
// fall back to TCP through a relay (a threaded handshake, or a client that
// declined our Accept after accept() returned).
void conclude_locked(Accepting* a, const HandshakeOutcome& o) {
  if (a->watch) Engine::get().end_watch(a->watch);
  a->watch = nullptr;
  struct Ended {
    Accepting* a;
    ~Ended() {
      if (!a->early.empty()) g_early_pending.fetch_sub(1);
      a->early.clear();
      a->early.shrink_to_fit();
      a->ended.notify_all();
    }
  } ended{a};
  if (o.kind == HandshakeOutcome::Kind::kSmc) {
    Connection* c = o.conn;
    sys::empty_socket(a->res.engine_end);
    // Options set before (or on the listener), or while the handshake ran
    // (they went to the TCP socket: accepting_tcp_fd, which clears the
    // number's kFdDefaultOptions), are read back from the TCP socket; a
    // number the application never set one on needs no look.
    bool default_options = a->state != Accepting::kClosed && (fd_table().flags(a->fd) & kFdDefaultOptions);
    attach(c, a->res, (sys::fcntl(a->res.app_end, F_GETFL) & O_NONBLOCK) != 0, default_options);
    a->res = Reserved{};  // the connection's now
    // The early bytes go first, before the application's next write can
    // reach the connection (it is not in the table yet). They fit the
    // fresh window (kEarlyWriteMax is RFC 7609's smallest RMBE), so the
    // SO_SNDBUF cap is applied only after them.
    if (!a->early.empty()) {
      iovec v{a->early.data(), a->early.size()};
      ssize_t k = c->sendv(&v, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k != static_cast<ssize_t>(a->early.size()))
        log_write(0, "fd %d: %zd of the %zu bytes written before the handshake ended could be sent", a->fd, k,
                  a->early.size());
    }
    if (a->sndbuf) c->set_send_limit(a->sndbuf);
    if (a->early_shut_wr) c->shutdown(SHUT_WR);
    if (a->state == Accepting::kClosed) {
      // The application closed the number before the handshake ended.
      if (c->drop_user_fd()) c->app_close(false);
      else c->unref();
    } else {
      if (a->short_flow) c->set_short_flow_key(a->short_flow);
      Connection* old = fd_table().set(a->fd, c);
      if (old) old->unref();
      // An fcntl(F_SETFL) of the application's that ran while we read the
      // flags above went to the number's file only (the connection was not
      // in the table yet): read once more now that it is (fcntl() looks
      // again after its change too; one of the two sees the other's).
      c->set_nonblocking((sys::fcntl(a->fd, F_GETFL) & O_NONBLOCK) != 0);
      a->state = Accepting::kDone;
      unregister_locked(a);
    }
    return;
  }
  // The application closed the number first (a port probe, a client
  // shutting down): nothing fell back, there is nobody left to serve.
  if (a->state == Accepting::kClosed) counters().clc_abandoned.fetch_add(1, std::memory_order_relaxed);
  else count_fallback(o.reason);
  // As a connect() that stayed TCP: as short as a connection gets.
  if (a->short_flow) shortflows::ended(a->short_flow, 0, 0, sys::now_ms());
  if (o.kind == HandshakeOutcome::Kind::kFallback) {
    send_early_over_tcp(a);
    // The relay carries it after what the application wrote next (nothing:
    // it shut down): end of stream on the application's end.
    if (a->early_shut_wr && a->res.app_end >= 0) sys::shutdown(a->res.app_end, SHUT_WR);
  }
  if (o.kind == HandshakeOutcome::Kind::kFallback && a->state != Accepting::kClosed) {
    SMCR_LOG(1, "fd %d: TCP fallback after accept() (%s): relayed", a->fd, fallback_name(o.reason));
    sys::empty_socket(a->res.engine_end);  // the filler bytes are not the client's
    // Without our copy of the application's end, its close reaches the relay.
    sys::close(a->res.app_end);
    a->res.app_end = -1;
    a->state = Accepting::kRelayed;
    return;
  }
  if (o.kind == HandshakeOutcome::Kind::kFallback) {
    // Closed by the application before its TCP fallback: ended as a TCP
    // socket closed then (FIN; a reset only for bytes left unread).
    sys::shutdown(a->res.tcp, SHUT_WR);
    a->reset_tcp = false;
    return;
  }
  SMCR_LOG(1, "fd %d: connection reset after %s returned (%s)", a->fd, a->client ? "connect()" : "accept()",
           fallback_name(o.reason));
  reset_locked(a);
}

void relay(Accepting* a);

// Tries to finish a deferred Confirm (a.mu held). True once it has ended.
bool step_locked(const std::shared_ptr<Accepting>& a, bool expired) {
  if (!a->handshake) return true;
  HandshakeOutcome o;
  if (!finish_confirm(a->handshake, a->res.tcp, expired ? INT64_MAX : sys::now_ms(), &o)) return false;
  a->handshake = nullptr;
  conclude_locked(a.get(), o);
  // The client declined our Accept: the relay, on a thread of its own (the
  // caller is the engine thread or an application call).
  if (a->state == Accepting::kRelayed && !workers::run([a] { relay(a.get()); })) {
    SMCR_LOG(1, "fd %d: no thread for the TCP relay after accept(): connection reset", a->fd);
    reset_locked(a.get());
  }
  return true;
}

// Relays still moving the application's bytes to TCP (flush_relays_at_exit).
std::atomic<int> g_relays_sending{0};

// Moves bytes both ways between the TCP socket and the application's
// readiness socket (its engine end) until both directions have ended, with
// TCP's half-close and reset carried across. Never blocks on one direction
// while the other could move.
void relay(Accepting* a) {
  g_relays_sending.fetch_add(1);
  bool sending = true;
  auto sent_all = [&sending] {
    if (sending) g_relays_sending.fetch_sub(1);
    sending = false;
  };
  struct Direction {
    int from, to;
    char buf[32768];
    size_t len = 0, off = 0;
    bool eof = false, done = false;
  };
  auto dirs = std::make_unique<Direction[]>(2);
  dirs[0].from = dirs[1].to = a->res.tcp;
  dirs[0].to = dirs[1].from = a->res.engine_end;
  bool failed = false;
  while (!failed && !(dirs[0].done && dirs[1].done)) {
    pollfd p[4];
    int n = 0;
    for (int i = 0; i < 2; ++i) {
      Direction& d = dirs[i];
      if (d.done) continue;
      p[n++] = d.off < d.len ? pollfd{d.to, POLLOUT, 0} : pollfd{d.from, POLLIN, 0};
    }
    if (sys::poll(p, n, -1) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2 && !failed; ++i) {
      Direction& d = dirs[i];
      if (d.done) continue;
      if (d.off == d.len && !d.eof) {
        ssize_t k = sys::recv(d.from, d.buf, sizeof d.buf, MSG_DONTWAIT);
        if (k > 0) d.len = static_cast<size_t>(k), d.off = 0;
        else if (k == 0) d.eof = true;
        else if (errno != EAGAIN && errno != EINTR) failed = true;  // reset on that side
      }
      while (!failed && d.off < d.len) {
        ssize_t k = sys::send(d.to, d.buf + d.off, d.len - d.off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k > 0) d.off += static_cast<size_t>(k);
        else if (errno == EAGAIN || errno == EINTR) break;
        else failed = true;
      }
      if (!failed && d.off == d.len && d.eof) {
        sys::shutdown(d.to, SHUT_WR);
        d.done = true;
        if (i == 1) sent_all();  // the application's side, to TCP
      }
    }
  }
  sent_all();
  if (failed) {
    // Either side reset (or the application closed with unread bytes): the
    // other sees a reset too.
    sys::shutdown(a->res.engine_end, SHUT_RDWR);
    linger l{1, 0};
    sys::setsockopt(a->res.tcp, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    sys::shutdown(a->res.tcp, SHUT_RDWR);
  } else {
    std::lock_guard<std::mutex> lock(a->mu);
    a->reset_tcp = false;
  }
}

// Handshakes running whole on threads of their own (client_spoke() false).
std::atomic<int> g_threaded{0};
constexpr int kMaxThreaded = 64;

}  // namespace

namespace {

// The readiness socket takes `fd` (not readable; writable only for a
// connect()'s handshake, which takes early writes: accepting_write) and the
// registry knows `a` by it; the TCP socket stays at r.tcp.
// `accept_flags`: as install()'s.
bool install_accepting(const std::shared_ptr<Accepting>& a, int fd, const Reserved& r, uint32_t sndbuf,
                       int accept_flags) {
  // A forked child could not finish an accept its parent's engine is
  // finishing (its relay threads stay with the parent): fork() settles them
  // first. Registered now, not at load: prepare handlers run last
  // registered first, and this one must run before core's own (the
  // handover's takes a lock that finishing a handshake needs).
  static const int atfork = pthread_atfork(settle_all_accepting, nullptr, [] { g_relays_sending.store(0); });
  (void)atfork;
  a->fd = fd;
  a->res = r;
  a->sndbuf = sndbuf;
  auto [status, fdflags] = descriptor_modes(fd, accept_flags);
  if (status & O_NONBLOCK) sys::fcntl(r.app_end, F_SETFL, O_NONBLOCK);
  // A server's: no POLLOUT before the connection exists. A client's is
  // writable at once, as a TCP socket is once connect() has returned.
  bool made_small = false;
  if (!a->client) Connection::fill_readiness_socket(r.app_end, &made_small);
  {
    std::lock_guard<std::mutex> lock(g_registry_mu);
    registry()[fd] = a;
  }
  // The number keeps kFdDefaultOptions: conclude_locked then need not read
  // the four options back (setsockopt clears it before an option reaches
  // the TCP socket).
  uint8_t kind = fd_table().kind(fd), flags = fd_table().flags(fd);
  uint8_t defaults = flags & kFdDefaultOptions;
  fd_table().set_kind(fd, kFdAccepting);
  fd_table().add_flags(fd, defaults);
  if (take_number(r, fd, fdflags)) return true;
  // The number still holds the TCP socket: as it was, in the table too.
  unregister_locked(a.get());
  fd_table().set_kind(fd, kind);
  fd_table().add_flags(fd, flags);
  return false;
}

}  // namespace

namespace {

// The readiness socket takes `fd` and `run` (the rest of a handshake, on
// the TCP socket) runs on a thread of its own; see start_accepting_threaded.
bool start_threaded(int fd, const Reserved& r, uint32_t sndbuf, uint32_t short_flow,
                    std::function<HandshakeOutcome(int tcp)> run, bool client, int accept_flags) {
  if (g_threaded.fetch_add(1) >= kMaxThreaded) {
    g_threaded.fetch_sub(1);
    return false;
  }
  auto a = std::make_shared<Accepting>();
  a->client = client;
  a->short_flow = short_flow;
  std::unique_lock<std::mutex> hold(a->mu);  // the job starts once `fd` is installed
  bool started = workers::run([a, run = std::move(run)] {
    { std::lock_guard<std::mutex> wait_for_install(a->mu); }
    HandshakeOutcome o = run(a->res.tcp);
    bool relayed;
    {
      std::lock_guard<std::mutex> lock(a->mu);
      conclude_locked(a.get(), o);
      relayed = a->state == Accepting::kRelayed;
    }
    g_threaded.fetch_sub(1);
    if (relayed) relay(a.get());
  });
  if (!started) {  // no thread to be had: the caller runs it inline
    g_threaded.fetch_sub(1);
    return false;
  }
  a->threaded = true;
  if (!install_accepting(a, fd, r, sndbuf, accept_flags)) {
    // The job waits for `hold`, and will find nobody to serve. The TCP
    // socket (at the number too) is reset now: its handshake ends at once
    // and accept() or connect() hands over a reset connection, never one
    // whose CLC bytes the application could read.
    a->state = Accepting::kClosed;
    sys::abort_tcp(r.tcp);
  }
  return true;
}

}  // namespace

bool start_accepting_threaded(int fd, const Reserved& r, const HandshakeRequest& req, uint32_t sndbuf,
                              int accept_flags) {
  HandshakeRequest request = req;
  request.may_defer_confirm = false;
  if (!start_threaded(fd, r, sndbuf, 0, [request](int tcp) { return clc_server(tcp, request); }, false,
                      accept_flags))
    return false;
  counters().clc_threaded.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool start_connecting_threaded(int fd, const Reserved& r, ClientContinuation* handshake, uint32_t sndbuf,
                               uint32_t short_flow) {
  if (!start_threaded(fd, r, sndbuf, short_flow,
                      [handshake](int tcp) { return clc_client_finish(tcp, handshake); }, true, -1))
    return false;
  counters().clc_connect_async.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void start_accepting(int fd, PendingConfirm* handshake, const Reserved& r, uint32_t sndbuf, int accept_flags) {
  counters().confirm_deferred.fetch_add(1, std::memory_order_relaxed);
  auto a = std::make_shared<Accepting>();
  if (!install_accepting(a, fd, r, sndbuf, accept_flags)) {
    // As a Confirm that never came, now: the peer and the number (still
    // the TCP socket) see a reset.
    std::lock_guard<std::mutex> lock(a->mu);
    a->state = Accepting::kClosed;
    sys::abort_tcp(a->res.tcp);
    HandshakeOutcome o;
    finish_confirm(handshake, a->res.tcp, INT64_MAX, &o);
    conclude_locked(a.get(), o);
    return;
  }
  a->handshake = handshake;
  // The TCP socket itself: every way the handshake ends (conclude_locked)
  // ends this watch before the connection's own watch_tcp registers the
  // same socket in the engine's set (an expired watch is unregistered
  // before its step runs). res.tcp stays open while `a` lives, and the
  // step's reference keeps `a` until the engine is done with the watch.
  std::lock_guard<std::mutex> lock(a->mu);
  a->watch = Engine::get().watch_readable(a->res.tcp, confirm_deadline(handshake), [a](bool expired) {
    std::lock_guard<std::mutex> step_lock(a->mu);
    return step_locked(a, expired);
  });
}

bool accepting_setsockopt(int fd, int level, int name, const void* val, socklen_t len,
                          int (*real)(int, int, int, const void*, socklen_t), int* rc) {
  std::shared_ptr<Accepting> a = find(fd);
  if (!a) return false;
  std::lock_guard<std::mutex> lock(a->mu);
  if (a->state != Accepting::kWaiting && a->state != Accepting::kRelayed && a->state != Accepting::kFailed)
    return false;
  *rc = real(a->res.tcp, level, name, val, len);
  if (*rc == 0 && level == SOL_SOCKET && (name == SO_SNDBUF || name == SO_SNDBUFFORCE)) {
    if (uint32_t granted = granted_buffer(a->res.tcp, name)) a->sndbuf = granted;
  }
  return true;
}

uint32_t granted_buffer(int fd, int name) {
  int v = 0;
  socklen_t l = sizeof v;
  int which = (name == SO_RCVBUF || name == SO_RCVBUFFORCE) ? SO_RCVBUF : SO_SNDBUF;
  if (sys::getsockopt(fd, SOL_SOCKET, which, &v, &l) != 0 || v <= 0) return 0;
  return static_cast<uint32_t>(v) / 2;
}

Connection* await_accepting(int fd, int io_flags, int* refused_errno, bool write) {
  *refused_errno = 0;
  std::shared_ptr<Accepting> a = find(fd);
  if (!a) return fd_table().get(fd);  // it ended meanwhile
  bool nonblocking = io_flags != kNotIo && ((io_flags & MSG_DONTWAIT) || (sys::fcntl(fd, F_GETFL) & O_NONBLOCK));
  const int64_t nonblocking_until = write ? sys::now_ms() + kNonblockingWriteWaitMs : 0;
  bool waited = false;
  for (;;) {
    int64_t deadline;
    {
      std::lock_guard<std::mutex> lock(a->mu);
      if (a->state == Accepting::kWaiting && !a->threaded) step_locked(a, false);
      switch (a->state) {
        case Accepting::kRelayed:
          return nullptr;  // a plain byte stream now
        case Accepting::kDone:
          return fd_table().get(fd);
        case Accepting::kFailed:
          if (io_flags != kNotIo && !a->error_reported) {
            a->error_reported = true;
            *refused_errno = ECONNRESET;
          }
          return nullptr;
        case Accepting::kClosed:
          return nullptr;
        case Accepting::kWaiting:
          break;
      }
      if (nonblocking && sys::now_ms() >= nonblocking_until) {
        *refused_errno = EAGAIN;
        return nullptr;
      }
      // A threaded handshake ends by its own CLC deadline.
      deadline = a->handshake ? confirm_deadline(a->handshake) : sys::now_ms() + 50;
      if (nonblocking) deadline = std::min(deadline, nonblocking_until);
      if (!waited) counters().confirm_waits.fetch_add(1, std::memory_order_relaxed);
      waited = true;
    }
    const int64_t wait_ms = std::clamp<int64_t>(deadline - sys::now_ms(), 0, 50);
    if (a->threaded) {
      // Its thread ends it (a client's readiness socket is writable
      // throughout: no POLLOUT to watch).
      std::unique_lock<std::mutex> lock(a->mu);
      if (a->state == Accepting::kWaiting) a->ended.wait_for(lock, std::chrono::milliseconds(wait_ms));
      continue;
    }
    // The Confirm arriving, or whoever read it finishing: that makes the
    // readiness socket at `fd` writable (or hung up). res.tcp stays open
    // while `a` lives.
    pollfd p[2] = {{fd, POLLOUT, 0}, {a->res.tcp, POLLIN | POLLRDHUP, 0}};
    sys::poll(p, 2, static_cast<int>(wait_ms));
  }
}

bool accepting_shutdown(int fd, int how) {
  if (how != SHUT_WR) return false;
  std::shared_ptr<Accepting> a = find(fd);
  if (!a || !a->client || !a->threaded) return false;
  std::lock_guard<std::mutex> lock(a->mu);
  if (a->state != Accepting::kWaiting) return false;
  a->early_shut_wr = true;
  return true;
}

bool accepting_write(int fd, const iovec* iov, int iovcnt, int flags, ssize_t* result) {
  if (flags & MSG_OOB) return false;  // urgent data waits for the connection
  std::shared_ptr<Accepting> a = find(fd);
  if (!a || !a->client || !a->threaded) return false;
  size_t want = 0;
  for (int i = 0; i < iovcnt; ++i) want += iov[i].iov_len;
  if (iovcnt < 0 || iovcnt > IOV_MAX || want == 0) return false;
  std::lock_guard<std::mutex> lock(a->mu);
  // After shutdown(SHUT_WR): the usual path (EPIPE once the connection is there).
  if (a->state != Accepting::kWaiting || a->early_shut_wr) return false;
  size_t cap = kEarlyWriteMax;
  if (a->sndbuf) cap = std::min<size_t>(cap, a->sndbuf);
  const size_t room = cap - std::min(cap, a->early.size());
  const bool nonblocking = (flags & MSG_DONTWAIT) || (sys::fcntl(fd, F_GETFL) & O_NONBLOCK);
  if (room == 0 || (!nonblocking && want > room)) {
    // A blocking write that does not fit waits for the connection (the
    // early bytes go first); a non-blocking one is told EAGAIN, and POLLOUT
    // comes back when the handshake ends.
    if (!nonblocking) return false;
    bool made_small = false;
    Connection::fill_readiness_socket(a->res.app_end, &made_small);
    *result = -1;
    errno = EAGAIN;
    return true;
  }
  const size_t n = std::min(want, room);
  if (a->early.empty()) g_early_pending.fetch_add(1);
  a->early.reserve(cap);
  size_t left = n;
  for (int i = 0; i < iovcnt && left > 0; ++i) {
    size_t k = std::min(left, iov[i].iov_len);
    a->early.append(static_cast<const char*>(iov[i].iov_base), k);
    left -= k;
  }
  if (a->early.size() >= cap) {
    bool made_small = false;
    Connection::fill_readiness_socket(a->res.app_end, &made_small);
  }
  counters().clc_early_bytes.fetch_add(n, std::memory_order_relaxed);
  *result = static_cast<ssize_t>(n);
  return true;
}

bool close_accepting(int fd, int (*close_number)(int)) {
  std::shared_ptr<Accepting> a = find(fd);
  if (!a) return false;
  std::lock_guard<std::mutex> lock(a->mu);
  if (a->state == Accepting::kDone || a->state == Accepting::kClosed) return false;
  // A waiting handshake closes its connection when it ends (a server's:
  // the client then sees an orderly end, as from a TCP server that accepted
  // and closed); a relay sees the application's end close. A client's may
  // wait long for a server that has not called accept() (a port probe that
  // closes at once): it ends now, the server seeing TCP's FIN.
  // Bytes it wrote first are still delivered, as a TCP socket's queued
  // bytes are after close(): the handshake goes on, and sends them.
  if (a->threaded && a->client && a->state == Accepting::kWaiting && a->early.empty())
    sys::shutdown(a->res.tcp, SHUT_RDWR);
  if (a->state != Accepting::kRelayed) a->state = Accepting::kClosed;
  unregister_locked(a.get());
  fd_table().set_kind(fd, kFdUnknown);
  close_number(fd);
  return true;
}

int accepting_tcp_fd(int fd) {
  std::shared_ptr<Accepting> a = find(fd);
  if (!a) return -1;
  std::lock_guard<std::mutex> lock(a->mu);
  // A failed one keeps its TCP socket (hung up) until the application
  // closes the number: its addresses stay TCP's, as a reset TCP socket's
  // local address does (a select() server asks sockport() of it).
  return a->state == Accepting::kWaiting || a->state == Accepting::kRelayed || a->state == Accepting::kFailed
             ? a->res.tcp
             : -1;
}

int relayed_tcp_fd(int fd) {
  std::shared_ptr<Accepting> a = find(fd);
  if (!a) return -1;
  std::lock_guard<std::mutex> lock(a->mu);
  return a->state == Accepting::kRelayed ? a->res.tcp : -1;
}

bool accepting_in_progress(int fd) {
  std::shared_ptr<Accepting> a = find(fd);
  if (!a) return false;
  std::lock_guard<std::mutex> lock(a->mu);
  // A client's is connected as far as the application can tell: writable
  // (accepting_write), as TCP's is once its handshake is done.
  return a->state == Accepting::kWaiting && !a->client;
}

void flush_relays_at_exit(int timeout_ms) {
  std::vector<std::shared_ptr<Accepting>> all;
  {
    std::lock_guard<std::mutex> lock(g_registry_mu);
    for (auto& [fd, a] : registry()) all.push_back(a);
  }
  for (auto& a : all) {
    std::lock_guard<std::mutex> lock(a->mu);
    // The number still holds the application's end: its relay gets EOF
    // after what was written, as a TCP peer gets FIN after the data.
    if (a->state == Accepting::kRelayed && a->generation == process_generation()) sys::shutdown(a->fd, SHUT_WR);
  }
  int64_t deadline = sys::now_ms() + timeout_ms;
  while ((g_relays_sending.load() > 0 || g_early_pending.load() > 0) && sys::now_ms() < deadline) {
    timespec pause{0, 1000000};
    nanosleep(&pause, nullptr);
  }
}

void settle_all_accepting() {
  std::vector<int> fds;
  {
    std::lock_guard<std::mutex> lock(g_registry_mu);
    for (auto& [fd, a] : registry()) fds.push_back(fd);
  }
  for (int fd : fds) {
    int ignored;
    if (Connection* c = await_accepting(fd, kNotIo, &ignored)) c->unref();
  }
}


}  // namespace smcr::preload
