// Readiness, signals and errors on connected sockets, with the peer in the
// same process (a listener thread), so both ends are whatever the process is:
// plain TCP, or SMC-R under smc_run. Each case prints "case=NAME ok=0|1" and
// the caller compares a plain run with an smc_run one.
//   epoll EPOLLET / EPOLLONESHOT / EPOLLEXCLUSIVE, nested epoll, one epoll fd
//   waited on by two threads, epoll_pwait2, ppoll, pselect, EPOLLRDHUP after
//   the peer's shutdown, EPOLLHUP + ECONNRESET after its abortive close
//   (bytes before it read first, a FIN before it giving end-of-file, the
//   error reported once; one write accepted after the peer's close),
//   SIGPIPE vs MSG_NOSIGNAL, EINTR with and without SA_RESTART, SO_ERROR
//   after a non-blocking connect, several threads writing one connection,
//   SO_RCVBUF / SO_SNDBUF (RMB size and send window under smc_run), urgent
//   data (MSG_OOB, SIOCATMARK, SO_OOBINLINE, POLLPRI, SIGURG), MSG_MORE,
//   TCP_CORK, TCP_NODELAY, a v4-mapped address on a dual-stack listener,
//   SIOCINQ/SIOCOUTQ, epoll_pwait, threads reading and writing one connection,
//   and an accepted socket used at once (closed, dup2'ed over, non-blocking
//   readiness, options, addresses and a first write); connections left
//   unarmed by the epoll interposition (preload/epoll.h) then waited on by a
//   sleeping epoll_wait, another thread, poll, select, a blocking read, a
//   nested or another epoll set, an epoll ping-pong, and a stress hunting
//   lost wake-ups (one or two threads waiting on eight connections).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

int g_listener = -1;
sockaddr_in g_addr{};
int g_fails = 0;

const char* g_only = nullptr;  // READINESS_ONLY=name: run one case (debugging)

void report(const char* name, bool ok) {
  printf("case=%s ok=%d\n", name, ok ? 1 : 0);
  fflush(stdout);
  if (!ok) ++g_fails;
}

// A connected pair: `a` from connect(), `b` from accept() in this process.
struct Pair {
  int a = -1, b = -1;
  ~Pair() {
    if (a >= 0) close(a);
    if (b >= 0) close(b);
  }
};

// Waits until thread `tid` sleeps (a thread about to accept() is then in
// it): a connect() to a listener of this process is served by SMC-R only
// while another thread is in accept() (preload/own_listeners.h).
void await_sleeping(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", static_cast<int>(tid));
  for (int i = 0; i < 2000; ++i) {
    char buf[256] = {};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) close(fd);
    const char* state = n > 0 ? strrchr(buf, ')') : nullptr;
    if (state && state[1] == ' ' && state[2] == 'S') return;
    usleep(500);
  }
}

bool make_pair(Pair* p, bool nonblocking_connect = false) {
  int b = -1;
  std::atomic<pid_t> acc_tid{0};
  std::thread acc([&] {
    acc_tid = gettid();
    b = accept(g_listener, nullptr, nullptr);
  });
  while (acc_tid.load() == 0) std::this_thread::yield();
  await_sleeping(acc_tid.load());
  int a = socket(AF_INET, SOCK_STREAM | (nonblocking_connect ? SOCK_NONBLOCK : 0), 0);
  int rc = connect(a, reinterpret_cast<sockaddr*>(&g_addr), sizeof g_addr);
  acc.join();
  if (nonblocking_connect && rc != 0 && errno == EINPROGRESS) {
    pollfd pf{a, POLLOUT, 0};
    poll(&pf, 1, 5000);
    rc = 0;
  }
  p->a = a;
  p->b = b;
  return a >= 0 && b >= 0 && rc == 0;
}

bool send_str(int fd, const char* s) { return send(fd, s, strlen(s), MSG_NOSIGNAL) == static_cast<ssize_t>(strlen(s)); }

int wait_events(int ep, int ms, uint32_t* ev = nullptr) {
  epoll_event e{};
  int n = epoll_wait(ep, &e, 1, ms);
  if (ev) *ev = n > 0 ? e.events : 0;
  return n;
}

bool case_et() {
  Pair p;
  if (!make_pair(&p)) return false;
  int ep = epoll_create1(0);
  epoll_event e{EPOLLIN | EPOLLET, {.fd = p.a}};
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &e);
  send_str(p.b, "one");
  bool first = wait_events(ep, 2000) == 1;
  char buf[16];
  usleep(50000);
  ssize_t n = recv(p.a, buf, sizeof buf, MSG_DONTWAIT);
  bool quiet = wait_events(ep, 150) == 0;  // edge consumed: no new event
  send_str(p.b, "two");
  bool again = wait_events(ep, 2000) == 1;
  close(ep);
  return first && n == 3 && quiet && again;
}

bool case_oneshot() {
  Pair p;
  if (!make_pair(&p)) return false;
  int ep = epoll_create1(0);
  epoll_event e{EPOLLIN | EPOLLONESHOT, {.fd = p.a}};
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &e);
  send_str(p.b, "x");
  bool first = wait_events(ep, 2000) == 1;
  send_str(p.b, "y");
  bool disarmed = wait_events(ep, 150) == 0;
  epoll_ctl(ep, EPOLL_CTL_MOD, p.a, &e);
  bool rearmed = wait_events(ep, 2000) == 1;
  close(ep);
  return first && disarmed && rearmed;
}

bool case_exclusive() {
  Pair p;
  if (!make_pair(&p)) return false;
  int ep1 = epoll_create1(0), ep2 = epoll_create1(0);
  epoll_event e{EPOLLIN | EPOLLEXCLUSIVE, {.fd = p.a}};
  bool added = epoll_ctl(ep1, EPOLL_CTL_ADD, p.a, &e) == 0 && epoll_ctl(ep2, EPOLL_CTL_ADD, p.a, &e) == 0;
  std::atomic<int> woke{0};
  std::thread t1([&] { woke += wait_events(ep1, 1000) > 0; });
  std::thread t2([&] { woke += wait_events(ep2, 1000) > 0; });
  usleep(100000);
  send_str(p.b, "z");
  t1.join();
  t2.join();
  close(ep1);
  close(ep2);
  return added && woke >= 1;
}

bool case_nested() {
  Pair p;
  if (!make_pair(&p)) return false;
  int inner = epoll_create1(0), outer = epoll_create1(0);
  epoll_event e{EPOLLIN, {.fd = p.a}};
  epoll_ctl(inner, EPOLL_CTL_ADD, p.a, &e);
  epoll_event o{EPOLLIN, {.fd = inner}};
  epoll_ctl(outer, EPOLL_CTL_ADD, inner, &o);
  bool idle = wait_events(outer, 100) == 0;
  send_str(p.b, "n");
  bool ready = wait_events(outer, 2000) == 1 && wait_events(inner, 0) == 1;
  close(inner);
  close(outer);
  return idle && ready;
}

bool case_shared_epoll_threads() {
  Pair p1, p2;
  if (!make_pair(&p1) || !make_pair(&p2)) return false;
  int ep = epoll_create1(0);
  epoll_event e1{EPOLLIN | EPOLLONESHOT, {.fd = p1.a}}, e2{EPOLLIN | EPOLLONESHOT, {.fd = p2.a}};
  epoll_ctl(ep, EPOLL_CTL_ADD, p1.a, &e1);
  epoll_ctl(ep, EPOLL_CTL_ADD, p2.a, &e2);
  std::atomic<int> got{0};
  auto waiter = [&] {
    epoll_event ev{};
    if (epoll_wait(ep, &ev, 1, 2000) == 1) got.fetch_or(ev.data.fd == p1.a ? 1 : 2);
  };
  std::thread t1(waiter), t2(waiter);
  usleep(100000);
  send_str(p1.b, "1");
  send_str(p2.b, "2");
  t1.join();
  t2.join();
  close(ep);
  return got == 3;
}

bool case_pwait_pwait2_ppoll_pselect() {
  Pair p;
  if (!make_pair(&p)) return false;
  send_str(p.b, "r");
  int ep = epoll_create1(0);
  epoll_event e{EPOLLIN, {.fd = p.a}};
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &e);
  timespec ts{2, 0};
  epoll_event out{};
  bool pw2 = epoll_pwait2(ep, &out, 1, &ts, nullptr) == 1;
  sigset_t none;
  sigemptyset(&none);
  bool pw = epoll_pwait(ep, &out, 1, 2000, &none) == 1 && (out.events & EPOLLIN);
  close(ep);
  pollfd pf{p.a, POLLIN, 0};
  bool pp = ppoll(&pf, 1, &ts, nullptr) == 1 && (pf.revents & POLLIN);
  fd_set rs;
  FD_ZERO(&rs);
  FD_SET(p.a, &rs);
  bool ps = pselect(p.a + 1, &rs, nullptr, nullptr, &ts, nullptr) == 1 && FD_ISSET(p.a, &rs);
  return pw2 && pw && pp && ps;
}

// --- Parked connections (preload/epoll.h): a connection emptied by a read
// while no thread sleeps on its epoll set is left unarmed under smc_run; every
// other way of waiting must still see the next byte.

// Registers p.a in a fresh epoll set, receives one message through it and
// reads it, leaving the connection emptied with nobody asleep (parked).
int park_in_epoll(Pair& p, uint32_t events = EPOLLIN) {
  int ep = epoll_create1(0);
  epoll_event e{events, {.fd = p.a}};
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &e);
  send_str(p.b, "p");
  char c;
  if (wait_events(ep, 2000) != 1 || recv(p.a, &c, 1, MSG_DONTWAIT) != 1) {
    close(ep);
    return -1;
  }
  return ep;
}

// The peer writes `s` after `ms` milliseconds, from another thread.
std::thread send_later(int fd, const char* s, int ms) {
  return std::thread([fd, s, ms] {
    usleep(ms * 1000);
    send_str(fd, s);
  });
}

bool read_is(int fd, const char* s) {
  char buf[16] = {};
  ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
  return n == static_cast<ssize_t>(strlen(s)) && strcmp(buf, s) == 0;
}

bool case_parked_epoll_sleeper_wakes() {
  Pair p;
  if (!make_pair(&p)) return false;
  int ep = park_in_epoll(p);
  if (ep < 0) return false;
  std::thread t = send_later(p.b, "later", 300);  // past any spin
  bool woke = wait_events(ep, 5000) == 1;
  t.join();
  bool got = read_is(p.a, "later");
  close(ep);
  return woke && got;
}

// One thread asleep in epoll_wait; another empties the connection meanwhile:
// the next message must still wake the sleeper (edge-triggered, so each
// message is one event).
bool case_parked_read_while_other_thread_sleeps() {
  Pair p;
  if (!make_pair(&p)) return false;
  int ep = epoll_create1(0);
  epoll_event e{EPOLLIN | EPOLLET, {.fd = p.a}};
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &e);
  std::atomic<int> events{0};
  std::thread sleeper([&] {
    for (int i = 0; i < 2; ++i)
      if (wait_events(ep, 3000) == 1) ++events;
  });
  usleep(100000);
  send_str(p.b, "1");
  usleep(100000);
  bool first = read_is(p.a, "1");  // the sleeper is back asleep meanwhile
  usleep(100000);
  send_str(p.b, "2");
  sleeper.join();
  bool second = read_is(p.a, "2");
  close(ep);
  return first && second && events == 2;
}

bool case_parked_then_poll_select_read() {
  Pair p;
  if (!make_pair(&p)) return false;
  int ep = park_in_epoll(p);
  if (ep < 0) return false;
  std::thread t1 = send_later(p.b, "a", 200);
  pollfd pf{p.a, POLLIN, 0};
  bool polled = poll(&pf, 1, 5000) == 1 && (pf.revents & POLLIN) && read_is(p.a, "a");
  t1.join();
  std::thread t2 = send_later(p.b, "b", 200);
  fd_set rs;
  FD_ZERO(&rs);
  FD_SET(p.a, &rs);
  timeval tv{5, 0};
  bool selected = select(p.a + 1, &rs, nullptr, nullptr, &tv) == 1 && read_is(p.a, "b");
  t2.join();
  // A blocking read of a connection registered in an epoll set.
  std::thread t3 = send_later(p.b, "c", 200);
  char c = 0;
  bool blocking_read = recv(p.a, &c, 1, 0) == 1 && c == 'c';
  t3.join();
  close(ep);
  return polled && selected && blocking_read;
}

bool case_parked_then_nested_closed_moved() {
  Pair p;
  if (!make_pair(&p)) return false;
  // Nested: the inner set is put into an outer one after the connection parked.
  int inner = park_in_epoll(p);
  if (inner < 0) return false;
  int outer = epoll_create1(0);
  epoll_event o{EPOLLIN, {.fd = inner}};
  epoll_ctl(outer, EPOLL_CTL_ADD, inner, &o);
  std::thread t1 = send_later(p.b, "n", 200);
  bool nested = wait_events(outer, 5000) == 1 && read_is(p.a, "n");
  t1.join();
  close(outer);
  close(inner);
  // Removed from its set (DEL), then waited on through another one.
  Pair q;
  if (!make_pair(&q)) return false;
  int ep1 = park_in_epoll(q);
  if (ep1 < 0) return false;
  epoll_ctl(ep1, EPOLL_CTL_DEL, q.a, nullptr);
  int ep2 = epoll_create1(0);
  epoll_event e{EPOLLIN, {.fd = q.a}};
  epoll_ctl(ep2, EPOLL_CTL_ADD, q.a, &e);
  std::thread t2 = send_later(q.b, "m", 200);
  bool moved = wait_events(ep2, 5000) == 1 && read_is(q.a, "m");
  t2.join();
  bool idle_old = wait_events(ep1, 50) == 0;
  close(ep1);
  close(ep2);
  // Its epoll set closed, then waited on with poll().
  Pair r;
  if (!make_pair(&r)) return false;
  int ep3 = park_in_epoll(r);
  if (ep3 < 0) return false;
  close(ep3);
  std::thread t3 = send_later(r.b, "k", 200);
  pollfd pf{r.a, POLLIN, 0};
  bool closed = poll(&pf, 1, 5000) == 1 && read_is(r.a, "k");
  t3.join();
  return nested && moved && idle_old && closed;
}

// A thread asleep in a blocking read while another registers the fd with
// epoll (and does not wait on it): the read must still get the data.
bool case_blocking_reader_then_epoll_registration() {
  Pair p;
  if (!make_pair(&p)) return false;
  char c = 0;
  ssize_t got = -1;
  std::thread reader([&] { got = recv(p.a, &c, 1, 0); });
  usleep(100000);  // asleep in recv by now
  int ep = epoll_create1(0);
  epoll_event e{EPOLLIN, {.fd = p.a}};
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &e);
  std::thread t = send_later(p.b, "b", 200);
  timespec start{}, now{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  bool in_time = false;
  for (;;) {
    if (got >= 0) {
      in_time = true;
      break;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > 3) break;
    usleep(10000);
  }
  if (!in_time) shutdown(p.b, SHUT_RDWR);  // the case has failed: end-of-file unblocks the reader
  t.join();
  reader.join();
  close(ep);
  return in_time && got == 1 && c == 'b';
}

// Request and reply between two threads, each waiting in its own epoll set:
// under smc_run the events come from memory (the stats count them).
bool case_epoll_ping_pong() {
  Pair p;
  if (!make_pair(&p)) return false;
  constexpr int kRounds = 3000;
  std::atomic<bool> server_ok{true};
  std::thread server([&] {
    int ep = epoll_create1(0);
    epoll_event e{EPOLLIN, {.fd = p.b}};
    epoll_ctl(ep, EPOLL_CTL_ADD, p.b, &e);
    for (int i = 0; i < kRounds; ++i) {
      uint32_t v = 0;
      if (wait_events(ep, 5000) != 1 || recv(p.b, &v, sizeof v, MSG_WAITALL) != sizeof v ||
          v != static_cast<uint32_t>(i)) {
        server_ok = false;
        break;
      }
      v = ~v;
      if (send(p.b, &v, sizeof v, MSG_NOSIGNAL) != sizeof v) {
        server_ok = false;
        break;
      }
    }
    close(ep);
  });
  int ep = epoll_create1(0);
  epoll_event e{EPOLLIN | EPOLLOUT, {.fd = p.a}};
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &e);
  e.events = EPOLLIN;
  epoll_ctl(ep, EPOLL_CTL_MOD, p.a, &e);  // writable from the start: reads only
  bool ok = true;
  for (int i = 0; i < kRounds && ok && server_ok; ++i) {
    uint32_t v = static_cast<uint32_t>(i);
    uint32_t events = 0;
    ok = send(p.a, &v, sizeof v, MSG_NOSIGNAL) == sizeof v && wait_events(ep, 5000, &events) == 1 &&
         (events & EPOLLIN) && recv(p.a, &v, sizeof v, MSG_DONTWAIT) == sizeof v && v == ~static_cast<uint32_t>(i);
  }
  if (!ok) shutdown(p.a, SHUT_RDWR);
  server.join();
  close(ep);
  return ok && server_ok;
}

int64_t now_us();

// An event loop that changes its interest around every request (redis's ae:
// DEL of the write event, ADD of the read event, ...): under smc_run the
// registration is then kept in memory ("virtual", preload/epoll.cc). What
// the application sees must stay the kernel's: errnos, level and one-shot
// reports, nothing for a deleted fd, data that came while it was deleted
// reported when it is added again, a thread asleep in the set woken by an
// ADD of a ready fd, EPOLLEXCLUSIVE, and the set waited on through a
// duplicate of its number.
bool case_epoll_virtual_registrations() {
  Pair p;
  if (!make_pair(&p)) return false;
  int ep = park_in_epoll(p);
  if (ep < 0) return false;
  epoll_event in{EPOLLIN, {.fd = p.a}};
  epoll_event out{EPOLLOUT, {.fd = p.a}};
  // errnos
  bool del1 = epoll_ctl(ep, EPOLL_CTL_DEL, p.a, nullptr) == 0;
  bool del2 = epoll_ctl(ep, EPOLL_CTL_DEL, p.a, nullptr) == -1 && errno == ENOENT;
  bool mod_gone = epoll_ctl(ep, EPOLL_CTL_MOD, p.a, &in) == -1 && errno == ENOENT;
  bool add1 = epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &out) == 0;
  bool add2 = epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &in) == -1 && errno == EEXIST;
  bool errnos = del1 && del2 && mod_gone && add1 && add2;
  // level-triggered EPOLLOUT, reported while registered, then nothing
  uint32_t ev = 0;
  bool writable = wait_events(ep, 1000, &ev) == 1 && ev == EPOLLOUT && wait_events(ep, 0, &ev) == 1 && ev == EPOLLOUT;
  epoll_ctl(ep, EPOLL_CTL_DEL, p.a, nullptr);
  send_str(p.b, "d");  // arrives while deleted
  usleep(50000);
  bool deleted_quiet = wait_events(ep, 100) == 0;
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &in);
  bool readded = wait_events(ep, 1000, &ev) == 1 && ev == EPOLLIN && wait_events(ep, 0) == 1 && read_is(p.a, "d") &&
                 wait_events(ep, 50) == 0;
  // one shot, modified in
  epoll_event once{EPOLLIN | EPOLLONESHOT, {.fd = p.a}};
  bool mod_once = epoll_ctl(ep, EPOLL_CTL_MOD, p.a, &once) == 0;
  send_str(p.b, "o");
  bool fired = wait_events(ep, 1000, &ev) == 1 && ev == EPOLLIN && wait_events(ep, 50) == 0;
  epoll_ctl(ep, EPOLL_CTL_MOD, p.a, &once);
  bool rearmed = wait_events(ep, 1000) == 1 && read_is(p.a, "o");
  bool oneshot = mod_once && fired && rearmed;
  // a thread asleep in the set, woken by an ADD of a ready fd
  epoll_ctl(ep, EPOLL_CTL_DEL, p.a, nullptr);
  std::atomic<int> woke{-1};
  uint32_t sleeper_ev = 0;
  std::thread sleeper([&] { woke = wait_events(ep, 3000, &sleeper_ev); });
  usleep(100000);
  int64_t added_us = now_us();
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &out);
  sleeper.join();
  bool woken = woke.load() == 1 && sleeper_ev == EPOLLOUT && now_us() - added_us < 1500000;
  // EPOLLEXCLUSIVE after a delete: the kernel's to give
  epoll_ctl(ep, EPOLL_CTL_DEL, p.a, nullptr);
  epoll_event excl{EPOLLIN | EPOLLEXCLUSIVE, {.fd = p.a}};
  bool excl_added = epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &excl) == 0;
  std::thread t1 = send_later(p.b, "x", 100);
  bool exclusive = excl_added && wait_events(ep, 3000, &ev) == 1 && ev == EPOLLIN && read_is(p.a, "x");
  t1.join();
  epoll_ctl(ep, EPOLL_CTL_DEL, p.a, nullptr);
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &in);
  epoll_ctl(ep, EPOLL_CTL_DEL, p.a, nullptr);
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &in);
  // waited on through a duplicate of the set's number
  int dupe = dup(ep);
  std::thread t2 = send_later(p.b, "u", 100);
  epoll_event got{};
  bool through_dup = epoll_wait(dupe, &got, 1, 3000) == 1 && got.data.fd == p.a && got.events == EPOLLIN &&
                     read_is(p.a, "u");
  t2.join();
  close(dupe);
  close(ep);
  if (!errnos || !writable || !deleted_quiet || !readded || !oneshot || !woken || !exclusive || !through_dup)
    fprintf(stderr,
            "epoll_virtual_registrations: errnos=%d writable=%d deleted_quiet=%d readded=%d oneshot=%d woken=%d "
            "exclusive=%d through_dup=%d\n",
            errnos, writable, deleted_quiet, readded, oneshot, woken, exclusive, through_dup);
  return errnos && writable && deleted_quiet && readded && oneshot && woken && exclusive && through_dup;
}

// What the kernel sees together is reported together: a virtual
// registration's end-of-file (the peer closed) and a listener's new
// connection, both there before the wait, come from one epoll_wait (nginx's
// limit_conn frees a closed client's slot before it reads the next
// client's request; reported one wait apart, the request came first).
bool case_epoll_virtual_eof_with_accept() {
  Pair p;
  if (!make_pair(&p)) return false;
  int ep = park_in_epoll(p, EPOLLIN | EPOLLRDHUP);
  if (ep < 0) return false;
  epoll_event in{EPOLLIN | EPOLLRDHUP, {.fd = p.a}};
  epoll_ctl(ep, EPOLL_CTL_DEL, p.a, nullptr);  // virtual from here under smc_run
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &in);
  epoll_event l{EPOLLIN, {.fd = g_listener}};
  epoll_ctl(ep, EPOLL_CTL_ADD, g_listener, &l);
  close(p.b);
  p.b = -1;
  usleep(50000);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  bool connected = connect(c, reinterpret_cast<sockaddr*>(&g_addr), sizeof g_addr) == 0;
  usleep(100000);
  epoll_event got[8];
  int n = epoll_wait(ep, got, 8, 1000);
  bool eof = false, accept_ready = false;
  for (int i = 0; i < n; ++i) {
    if (got[i].data.fd == p.a && (got[i].events & EPOLLRDHUP)) eof = true;
    if (got[i].data.fd == g_listener) accept_ready = true;
  }
  epoll_ctl(ep, EPOLL_CTL_DEL, g_listener, nullptr);
  int s = accept(g_listener, nullptr, nullptr);
  if (s >= 0) close(s);
  close(c);
  close(ep);
  if (!(connected && eof && accept_ready))
    fprintf(stderr, "epoll_virtual_eof_with_accept: n=%d connected=%d eof=%d accept_ready=%d\n", n, connected, eof,
            accept_ready);
  return connected && eof && accept_ready;
}

// redis-benchmark's loop, 3000 requests: the client adds the write event,
// writes, deletes it and adds the read event, reads the reply, deletes the
// read event; a server thread answers each request, some at once, some after
// a pause long enough that the client sleeps. A lost wake-up or a lost
// event shows as a request not answered within two seconds.
bool case_epoll_churned_ping_pong() {
  Pair p;
  if (!make_pair(&p)) return false;
  constexpr int kRounds = 3000;
  std::atomic<bool> server_ok{true};
  std::thread server([&] {
    for (int i = 0; i < kRounds; ++i) {
      uint32_t v = 0;
      if (recv(p.b, &v, sizeof v, MSG_WAITALL) != sizeof v || v != static_cast<uint32_t>(i)) {
        server_ok = false;
        break;
      }
      if (i % 97 == 0) usleep(2000);
      v = ~v;
      if (send(p.b, &v, sizeof v, MSG_NOSIGNAL) != sizeof v) {
        server_ok = false;
        break;
      }
    }
  });
  int ep = epoll_create1(0);
  fcntl(p.a, F_SETFL, fcntl(p.a, F_GETFL) | O_NONBLOCK);
  epoll_event w{EPOLLOUT, {.fd = p.a}};
  epoll_event r{EPOLLIN, {.fd = p.a}};
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &w);
  bool ok = true;
  for (int i = 0; i < kRounds && ok && server_ok; ++i) {
    uint32_t ev = 0, v = static_cast<uint32_t>(i);
    ok = wait_events(ep, 2000, &ev) == 1 && (ev & EPOLLOUT) && send(p.a, &v, sizeof v, MSG_NOSIGNAL) == sizeof v;
    epoll_ctl(ep, EPOLL_CTL_DEL, p.a, nullptr);
    epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &r);
    while (ok) {
      ok = wait_events(ep, 2000, &ev) == 1 && (ev & EPOLLIN);
      ssize_t n = ok ? recv(p.a, &v, sizeof v, 0) : -1;
      if (n == sizeof v) break;
      ok = ok && n < 0 && errno == EAGAIN;  // a report with nothing to read: waited on again
    }
    ok = ok && v == ~static_cast<uint32_t>(i);
    epoll_ctl(ep, EPOLL_CTL_MOD, p.a, &r);
    epoll_ctl(ep, EPOLL_CTL_DEL, p.a, nullptr);
    epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &w);
  }
  if (!ok) shutdown(p.a, SHUT_RDWR);
  server.join();
  close(ep);
  return ok && server_ok;
}

// Lost wake-ups, hunted: eight connections in one epoll set, one or two
// threads waiting on it and reading whatever it reports, a writer sending one byte
// at a time with irregular pauses (some inside the epoll spin, some past
// it) and waiting for each byte to be read before the next. A wake-up lost
// anywhere (a connection left parked while a thread sleeps) shows as a byte
// not read within two seconds.
int64_t now_us() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1000000 + t.tv_nsec / 1000;
}

bool epoll_parked_stress(int readers) {
  constexpr int kConns = 8, kMessages = 1500;
  std::vector<Pair> pairs(kConns);
  for (Pair& p : pairs)
    if (!make_pair(&p)) return false;
  int ep = epoll_create1(0);
  for (int i = 0; i < kConns; ++i) {
    fcntl(pairs[i].a, F_SETFL, fcntl(pairs[i].a, F_GETFL) | O_NONBLOCK);
    epoll_event e{EPOLLIN, {.u32 = static_cast<uint32_t>(i)}};
    epoll_ctl(ep, EPOLL_CTL_ADD, pairs[i].a, &e);
  }
  // Readers wait without a timeout (one would hide a lost wake-up); a pipe
  // in the set tells them to stop.
  int stop_pipe[2];
  if (pipe(stop_pipe) != 0) return false;
  epoll_event stop_event{EPOLLIN, {.u32 = 1000}};
  epoll_ctl(ep, EPOLL_CTL_ADD, stop_pipe[0], &stop_event);
  std::atomic<int> received{0};
  std::atomic<bool> done{false};
  auto reader = [&] {
    epoll_event evs[4];
    while (!done.load()) {
      int n = epoll_wait(ep, evs, 4, -1);
      for (int k = 0; k < n; ++k) {
        if (evs[k].data.u32 == 1000) continue;
        char buf[64];
        ssize_t r;
        while ((r = recv(pairs[evs[k].data.u32].a, buf, sizeof buf, MSG_DONTWAIT)) > 0) received += static_cast<int>(r);
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < readers; ++t) threads.emplace_back(reader);
  unsigned seed = 12345;
  bool ok = true;
  for (int m = 0; m < kMessages && ok; ++m) {
    seed = seed * 1103515245u + 12345u;
    // Mostly inside the epoll spin (50 us; waited for busily, as a sleep
    // lasts 50 us at least), one in four past it.
    bool long_pause = (seed >> 12) % 4 == 0;
    int pause_us = static_cast<int>((seed >> 16) % (long_pause ? 400 : 40));
    if (long_pause) usleep(pause_us);
    else for (int64_t until = now_us() + pause_us; now_us() < until;) {
    }
    ok = send_str(pairs[(seed >> 8) % kConns].b, "x");
    int64_t give_up = now_us() + 2000000;
    while (ok && received.load() < m + 1) {
      if (now_us() > give_up) {
        fprintf(stderr, "epoll_parked_stress: byte %d not read within 2 s\n", m);
        ok = false;
      }
    }
  }
  done = true;
  if (write(stop_pipe[1], "s", 1) != 1) return false;
  for (std::thread& t : threads) t.join();
  close(ep);
  close(stop_pipe[0]);
  close(stop_pipe[1]);
  return ok && received.load() == kMessages;
}

bool case_rdhup() {
  Pair p;
  if (!make_pair(&p)) return false;
  int ep = epoll_create1(0);
  epoll_event e{EPOLLIN | EPOLLRDHUP, {.fd = p.a}};
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &e);
  send_str(p.b, "last");
  shutdown(p.b, SHUT_WR);
  uint32_t ev = 0;
  // Level-triggered EPOLLIN for "last" returns at once: bound by time, not
  // by the number of waits (the peer's D may trail its data a little).
  for (int i = 0; i < 200 && !(ev & EPOLLRDHUP); ++i) {
    wait_events(ep, 100, &ev);
    if (!(ev & EPOLLRDHUP)) usleep(10000);
  }
  char buf[8];
  ssize_t n1 = recv(p.a, buf, sizeof buf, MSG_WAITALL);
  ssize_t n2 = recv(p.a, buf, sizeof buf, 0);
  // Our direction still works after the peer's half-close.
  bool still = send_str(p.a, "ok");
  char b2[2];
  bool peer_got = recv(p.b, b2, 2, MSG_WAITALL) == 2;
  close(ep);
  return (ev & EPOLLRDHUP) && n1 == 4 && n2 == 0 && still && peer_got;
}

void abortive_close(int* fd) {
  linger l{1, 0};
  setsockopt(*fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  close(*fd);
  *fd = -1;
}

int so_error(int fd) {
  int e = -1;
  socklen_t len = sizeof e;
  return getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0 ? e : -1;
}

bool case_reset() {
  Pair p;
  if (!make_pair(&p)) return false;
  int ep = epoll_create1(0);
  epoll_event e{EPOLLIN | EPOLLRDHUP, {.fd = p.a}};
  epoll_ctl(ep, EPOLL_CTL_ADD, p.a, &e);
  abortive_close(&p.b);  // RST / CDC A
  uint32_t ev = 0;
  for (int i = 0; i < 30 && !(ev & EPOLLHUP); ++i) wait_events(ep, 100, &ev);
  char buf[4];
  ssize_t n = recv(p.a, buf, sizeof buf, 0);
  int err = errno;
  close(ep);
  return (ev & EPOLLHUP) && n == -1 && err == ECONNRESET;
}

// After the peer's RST (SMC-R: its A), as Linux TCP: bytes received before
// it are read first; then one pending error -- ECONNRESET, or EPIPE when the
// peer's FIN came first, which recv() does not report (it returns 0) --
// reported once, by whichever of recv, send and SO_ERROR comes first.
// Waits until poll shows one of `events` (with data readable, poll returns
// at once, so the wait is by time, not by calls).
bool wait_for(int fd, short events, int ms) {
  for (int waited = 0; waited < ms; waited += 5) {
    pollfd p{fd, events, 0};
    if (poll(&p, 1, 0) > 0 && (p.revents & events)) return true;
    usleep(5000);
  }
  return false;
}

struct Result {
  ssize_t n;
  int err;
};
Result recv_now(int fd, char* buf, size_t len) {
  errno = 0;
  ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
  return {n, n < 0 ? errno : 0};
}
Result send_now(int fd) {
  errno = 0;
  ssize_t n = send(fd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  return {n, n < 0 ? errno : 0};
}

bool case_data_then_reset() {
  Pair p;
  if (!make_pair(&p)) return false;
  bool sent = send_str(p.b, "response");
  abortive_close(&p.b);
  bool hup = wait_for(p.a, POLLHUP, 3000);
  char buf[32];
  Result r1 = recv_now(p.a, buf, sizeof buf);
  bool data = r1.n == 8 && memcmp(buf, "response", 8) == 0;
  Result r2 = recv_now(p.a, buf, sizeof buf), r3 = recv_now(p.a, buf, sizeof buf);
  Result w = send_now(p.a);
  int e = so_error(p.a);
  bool ok = sent && hup && data && r2.n == -1 && r2.err == ECONNRESET && r3.n == 0 && w.n == -1 && w.err == EPIPE &&
            e == 0;
  if (!ok)
    printf("  sent=%d hup=%d recv=%zd/%d recv=%zd/%d recv=%zd/%d send=%zd/%d so_error=%d\n", sent, hup, r1.n, r1.err,
           r2.n, r2.err, r3.n, r3.err, w.n, w.err, e);
  return ok;
}

bool case_fin_then_reset() {
  Pair p;
  if (!make_pair(&p)) return false;
  bool sent = send_str(p.b, "last");
  shutdown(p.b, SHUT_WR);
  bool rdhup = wait_for(p.a, POLLRDHUP, 3000);
  abortive_close(&p.b);
  bool hup = wait_for(p.a, POLLHUP, 3000);
  int e = so_error(p.a);  // CLOSE_WAIT when the RST came: EPIPE
  char buf[32];
  Result r1 = recv_now(p.a, buf, sizeof buf), r2 = recv_now(p.a, buf, sizeof buf);
  Result w = send_now(p.a);
  bool ok = sent && rdhup && hup && e == EPIPE && r1.n == 4 && r2.n == 0 && w.n == -1 && w.err == EPIPE;
  if (!ok)
    printf("  sent=%d rdhup=%d hup=%d so_error=%d recv=%zd/%d recv=%zd/%d send=%zd/%d\n", sent, rdhup, hup, e, r1.n,
           r1.err, r2.n, r2.err, w.n, w.err);
  return ok;
}

bool case_reset_reported_once() {
  Pair p;
  if (!make_pair(&p)) return false;
  abortive_close(&p.b);
  bool hup = wait_for(p.a, POLLHUP, 3000);
  int e1 = so_error(p.a);
  char buf[8];
  Result r = recv_now(p.a, buf, sizeof buf);  // reported already: end-of-file
  Result w = send_now(p.a);
  int e2 = so_error(p.a);
  bool ok = hup && e1 == ECONNRESET && r.n == 0 && w.n == -1 && w.err == EPIPE && e2 == 0;
  if (!ok)
    printf("  hup=%d so_error=%d recv=%zd/%d send=%zd/%d so_error=%d\n", hup, e1, r.n, r.err, w.n, w.err, e2);
  return ok;
}

// The peer closed (FIN; SMC-R: its C): the next write is still accepted --
// TCP sends it and the peer's RST answers -- and only the one after fails.
// HTTP clients that reuse a kept-alive connection the server just closed
// see exactly this, and retry on the read's end-of-file.
bool case_write_after_peer_close() {
  Pair p;
  if (!make_pair(&p)) return false;
  close(p.b);
  p.b = -1;
  bool rdhup = wait_for(p.a, POLLRDHUP, 3000);
  // Writing nothing is no error yet (Python's test_socket sends b"" here).
  ssize_t z1 = send(p.a, "", 0, MSG_NOSIGNAL);
  int z1e = z1 < 0 ? errno : 0;
  Result w1 = send_now(p.a);
  bool hup = wait_for(p.a, POLLHUP, 3000);
  int e = so_error(p.a);  // the RST came in CLOSE_WAIT: EPIPE, once
  Result w2 = send_now(p.a);
  ssize_t z2 = send(p.a, "", 0, MSG_NOSIGNAL);  // after the RST: EPIPE
  int z2e = z2 < 0 ? errno : 0;
  char buf[8];
  Result r = recv_now(p.a, buf, sizeof buf);
  int e2 = so_error(p.a);
  bool ok = rdhup && z1 == 0 && w1.n == 1 && hup && e == EPIPE && w2.n == -1 && w2.err == EPIPE && z2 == -1 &&
            z2e == EPIPE && r.n == 0 && e2 == 0;
  if (!ok)
    printf("  rdhup=%d send0=%zd/%d send=%zd/%d hup=%d so_error=%d send=%zd/%d send0=%zd/%d recv=%zd/%d so_error=%d\n",
           rdhup, z1, z1e, w1.n, w1.err, hup, e, w2.n, w2.err, z2, z2e, r.n, r.err, e2);
  return ok;
}

std::atomic<int> g_sigpipes{0};
std::atomic<int> g_alarms{0};

bool case_sigpipe() {
  Pair p;
  if (!make_pair(&p)) return false;
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_sigpipes++; };
  sigaction(SIGPIPE, &sa, nullptr);
  close(p.b);
  p.b = -1;
  // TCP may accept a write or two before the peer's RST arrives.
  ssize_t r = 0;
  int err = 0;
  for (int i = 0; i < 50; ++i) {
    r = send(p.a, "x", 1, MSG_NOSIGNAL);
    err = errno;
    if (r < 0) break;
    usleep(20000);
  }
  bool nosignal = r == -1 && (err == EPIPE || err == ECONNRESET) && g_sigpipes == 0;
  // Once the error has been reported, a plain write raises SIGPIPE.
  ssize_t w = write(p.a, "y", 1);
  int werr = errno;
  signal(SIGPIPE, SIG_DFL);
  return nosignal && w == -1 && werr == EPIPE && g_sigpipes == 1;
}

bool eintr_case(bool restart) {
  Pair p;
  if (!make_pair(&p)) return false;
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_alarms++; };
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigaction(SIGALRM, &sa, nullptr);
  int before = g_alarms;
  // The peer answers after the signal has interrupted the blocked recv.
  std::thread peer([&] {
    usleep(400000);
    send_str(p.b, "late");
  });
  ualarm(150000, 0);
  char buf[4];
  ssize_t n = recv(p.a, buf, sizeof buf, MSG_WAITALL);
  int err = errno;
  peer.join();
  signal(SIGALRM, SIG_DFL);
  bool signalled = g_alarms == before + 1;
  if (restart) return signalled && n == 4 && memcmp(buf, "late", 4) == 0;
  return signalled && n == -1 && err == EINTR;
}

bool case_so_error_nonblocking_connect() {
  Pair p;
  if (!make_pair(&p, true)) return false;
  int soerr = so_error(p.a);  // -1: getsockopt failed
  bool works = send_str(p.a, "nb");
  char b[2];
  bool arrived = recv(p.b, b, 2, MSG_WAITALL) == 2;
  return soerr == 0 && works && arrived;
}

bool case_threads_writing() {
  Pair p;
  if (!make_pair(&p)) return false;
  constexpr int kThreads = 4, kRecords = 4000, kLen = 64;
  std::vector<std::thread> ws;
  for (int t = 0; t < kThreads; ++t)
    ws.emplace_back([&, t] {
      char rec[kLen];
      for (int i = 0; i < kRecords; ++i) {
        memset(rec, 'a' + t, kLen);
        memcpy(rec, &i, sizeof i);
        send(p.a, rec, kLen, MSG_NOSIGNAL);
      }
    });
  std::vector<int> next(kThreads, 0);
  bool ok = true;
  char rec[kLen];
  for (int k = 0; k < kThreads * kRecords && ok; ++k) {
    if (recv(p.b, rec, kLen, MSG_WAITALL) != kLen) ok = false;
    int t = rec[kLen - 1] - 'a', i;
    memcpy(&i, rec, sizeof i);
    // Each thread's records arrive whole and in its own order.
    if (t < 0 || t >= kThreads || i != next[t]++) ok = false;
  }
  for (auto& w : ws) w.join();
  return ok;
}

int get_int_opt(int fd, int name) {
  int v = -1;
  socklen_t l = sizeof v;
  return getsockopt(fd, SOL_SOCKET, name, &v, &l) == 0 ? v : -1;
}

// SO_RCVBUF before connect() and before listen() (accepted sockets inherit
// it) size the receive buffers, SO_SNDBUF after connect() bounds what a
// writer can have outstanding; getsockopt reports twice the size, as the
// kernel does. Under smc_run these are the RMBs and the send window.
bool case_buffer_sizes() {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1, rcv_server = 65536, rcv_client = 32768, snd_server = 16384;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(l, SOL_SOCKET, SO_RCVBUF, &rcv_server, sizeof rcv_server);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof addr;
  if (bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(l, 4) != 0 ||
      getsockname(l, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) {
    close(l);
    return false;
  }
  Pair p;
  std::thread acc([&] { p.b = accept(l, nullptr, nullptr); });
  p.a = socket(AF_INET, SOCK_STREAM, 0);
  setsockopt(p.a, SOL_SOCKET, SO_RCVBUF, &rcv_client, sizeof rcv_client);
  bool connected = connect(p.a, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  acc.join();
  close(l);
  if (!connected || p.b < 0) return false;
  bool rcv_ok = get_int_opt(p.a, SO_RCVBUF) == 2 * rcv_client && get_int_opt(p.b, SO_RCVBUF) == 2 * rcv_server;
  setsockopt(p.b, SOL_SOCKET, SO_SNDBUF, &snd_server, sizeof snd_server);
  bool snd_ok = get_int_opt(p.b, SO_SNDBUF) == 2 * snd_server;
  // Fill the path with the reader idle: the buffers bound what fits.
  fcntl(p.b, F_SETFL, O_NONBLOCK);
  std::string sent;
  char chunk[1024];
  for (unsigned i = 0;; ++i) {
    memset(chunk, static_cast<int>('A' + i % 26), sizeof chunk);
    ssize_t n = send(p.b, chunk, sizeof chunk, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent.append(chunk, static_cast<size_t>(n));
    if (sent.size() > (8u << 20)) break;  // unbounded: fails below
  }
  bool eagain = errno == EAGAIN || errno == EWOULDBLOCK;
  // Lower bound: the smaller buffer fits; upper: both doubled plus slack.
  size_t upper = 2 * (2 * snd_server + 2 * rcv_client) + 16384;
  bool bounded = sent.size() >= static_cast<size_t>(snd_server) / 2 && sent.size() <= upper;
  std::string got(sent.size(), '\0');
  bool all = recv(p.a, &got[0], got.size(), MSG_WAITALL) == static_cast<ssize_t>(got.size()) && got == sent;
  if (!(rcv_ok && snd_ok && eagain && bounded && all))
    fprintf(stderr, "buffer_sizes: rcvbuf a=%d b=%d sndbuf b=%d filled=%zu (bounds %d..%zu) eagain=%d read=%d\n",
            get_int_opt(p.a, SO_RCVBUF), get_int_opt(p.b, SO_RCVBUF), get_int_opt(p.b, SO_SNDBUF), sent.size(),
            snd_server / 2, upper, eagain, all);
  return rcv_ok && snd_ok && eagain && bounded && all;
}

// Urgent data as TCP has it: the last byte of send(MSG_OOB) raises POLLPRI
// and SIGURG (F_SETOWN), reads stop at it, SIOCATMARK says when the next
// byte is it, recv(MSG_OOB) returns it once (EINVAL before and after), the
// stream goes on around it; with SO_OOBINLINE it stays in the stream.
std::atomic<int> g_sigurg{0};
bool case_urgent_data() {
  Pair p;
  if (!make_pair(&p)) return false;
  struct sigaction sa {}, old {};
  sa.sa_handler = [](int) { g_sigurg.fetch_add(1); };
  sigaction(SIGURG, &sa, &old);
  fcntl(p.a, F_SETOWN, getpid());
  char c = 0, buf[8] = {};
  bool einval_before = recv(p.a, &c, 1, MSG_OOB) < 0 && errno == EINVAL;
  send(p.b, "ab", 2, 0);
  send(p.b, "!", 1, MSG_OOB);
  send(p.b, "cd", 2, 0);
  pollfd pf{p.a, POLLPRI, 0};
  bool pri = poll(&pf, 1, 2000) == 1 && (pf.revents & POLLPRI);
  usleep(100000);  // "cd" too
  int mark0 = -1, mark1 = -1;
  ioctl(p.a, SIOCATMARK, &mark0);
  ssize_t n1 = recv(p.a, buf, sizeof buf, 0);  // stops at the urgent byte
  bool before = n1 == 2 && memcmp(buf, "ab", 2) == 0;
  ioctl(p.a, SIOCATMARK, &mark1);
  bool oob = recv(p.a, &c, 1, MSG_OOB) == 1 && c == '!';
  pf.revents = 0;
  bool pri_gone = poll(&pf, 1, 0) == 0;
  ssize_t n2 = recv(p.a, buf, sizeof buf, MSG_DONTWAIT);
  bool after = n2 == 2 && memcmp(buf, "cd", 2) == 0;
  bool einval_after = recv(p.a, &c, 1, MSG_OOB) < 0 && errno == EINVAL;
  bool sigurg = g_sigurg.load() > 0;
  // In line: the urgent byte is read as data, and recv(MSG_OOB) has none.
  int one = 1;
  setsockopt(p.a, SOL_SOCKET, SO_OOBINLINE, &one, sizeof one);
  send(p.b, "x", 1, MSG_OOB);
  send(p.b, "y", 1, 0);
  usleep(100000);
  bool inline_einval = recv(p.a, &c, 1, MSG_OOB) < 0 && errno == EINVAL;
  ssize_t n3 = recv(p.a, buf, 2, MSG_WAITALL);
  bool inline_data = n3 == 2 && memcmp(buf, "xy", 2) == 0;
  sigaction(SIGURG, &old, nullptr);
  bool ok = einval_before && pri && mark0 == 0 && before && mark1 == 1 && oob && pri_gone && after && einval_after &&
            sigurg && inline_einval && inline_data;
  if (!ok)
    fprintf(stderr,
            "urgent_data: einval_before=%d pri=%d mark0=%d before=%d(n1=%zd) mark1=%d oob=%d pri_gone=%d after=%d(n2=%zd) "
            "einval_after=%d sigurg=%d inline_einval=%d inline_data=%d(n3=%zd)\n",
            einval_before, pri, mark0, before, n1, mark1, oob, pri_gone, after, n2, einval_after, sigurg, inline_einval,
            inline_data, n3);
  return ok;
}

// MSG_MORE and TCP_CORK (held bytes still arrive once uncorked; SMC-R sends
// at once), TCP_NODELAY reads back, and a dual-stack IPv6 listener reached
// over a v4-mapped address (::ffff:127.0.0.1) from an AF_INET6 client.
bool case_cork_more_nodelay_mapped() {
  Pair p;
  if (!make_pair(&p)) return false;
  char buf[8] = {};
  bool more = send(p.b, "ab", 2, MSG_MORE) == 2 && send(p.b, "cd", 2, 0) == 2 &&
              recv(p.a, buf, 4, MSG_WAITALL) == 4 && memcmp(buf, "abcd", 4) == 0;
  int on = 1, off = 0, v = -1, corked = -1, uncorked = -1, nodelay_before = -1;
  socklen_t vl = sizeof v;
  auto get = [](int fd, int name, int* out) {
    socklen_t l = sizeof *out;
    return getsockopt(fd, IPPROTO_TCP, name, out, &l) == 0 && l == sizeof *out;
  };
  bool cork = setsockopt(p.b, IPPROTO_TCP, TCP_CORK, &on, sizeof on) == 0 && get(p.b, TCP_CORK, &corked) &&
              corked == 1 && send(p.b, "ef", 2, 0) == 2 &&
              setsockopt(p.b, IPPROTO_TCP, TCP_CORK, &off, sizeof off) == 0 && get(p.b, TCP_CORK, &uncorked) &&
              uncorked == 0 && recv(p.a, buf, 2, MSG_WAITALL) == 2 && memcmp(buf, "ef", 2) == 0;
  bool nodelay = get(p.a, TCP_NODELAY, &nodelay_before) && nodelay_before == 0 &&
                 setsockopt(p.a, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) == 0 &&
                 getsockopt(p.a, IPPROTO_TCP, TCP_NODELAY, &v, &vl) == 0 && v == 1 &&
                 setsockopt(p.a, IPPROTO_TCP, TCP_NODELAY, &on, 1) == -1 && errno == EINVAL;
  // v4-mapped
  int l = socket(AF_INET6, SOCK_STREAM, 0);
  setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  sockaddr_in6 a6{};
  a6.sin6_family = AF_INET6;
  a6.sin6_addr = in6addr_any;
  socklen_t al = sizeof a6;
  bool mapped = false;
  if (bind(l, reinterpret_cast<sockaddr*>(&a6), sizeof a6) == 0 && listen(l, 4) == 0 &&
      getsockname(l, reinterpret_cast<sockaddr*>(&a6), &al) == 0) {
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &a6.sin6_addr);
    int srv = -1;
    std::thread acc([&] { srv = accept(l, nullptr, nullptr); });
    int c = socket(AF_INET6, SOCK_STREAM, 0);
    bool conn = connect(c, reinterpret_cast<sockaddr*>(&a6), sizeof a6) == 0;
    acc.join();
    sockaddr_in6 peer{};
    socklen_t pl = sizeof peer;
    char host[64] = "";
    if (srv >= 0 && getpeername(srv, reinterpret_cast<sockaddr*>(&peer), &pl) == 0)
      inet_ntop(AF_INET6, &peer.sin6_addr, host, sizeof host);
    mapped = conn && srv >= 0 && send_str(c, "v4m") && recv(srv, buf, 3, MSG_WAITALL) == 3 &&
             memcmp(buf, "v4m", 3) == 0 && peer.sin6_family == AF_INET6 && strcmp(host, "::ffff:127.0.0.1") == 0;
    if (!mapped) fprintf(stderr, "cork_more_nodelay_mapped: v4-mapped conn=%d srv=%d peer=%s\n", conn, srv, host);
    close(c);
    if (srv >= 0) close(srv);
  }
  close(l);
  if (!(more && cork && nodelay && mapped))
    fprintf(stderr, "cork_more_nodelay_mapped: more=%d cork=%d nodelay=%d mapped=%d\n", more, cork, nodelay, mapped);
  return more && cork && nodelay && mapped;
}

// SIOCINQ counts what is readable; SIOCOUTQ is 0 once the peer has it all.
bool case_ioctl_inq_outq() {
  Pair p;
  if (!make_pair(&p)) return false;
  send_str(p.b, "hello");
  usleep(100000);
  int inq = -1, outq = -1;
  ioctl(p.a, SIOCINQ, &inq);
  char buf[8];
  bool read_all = recv(p.a, buf, 5, MSG_WAITALL) == 5;
  usleep(100000);
  ioctl(p.b, SIOCOUTQ, &outq);
  int inq_after = -1;
  ioctl(p.a, SIOCINQ, &inq_after);
  return inq == 5 && read_all && outq == 0 && inq_after == 0;
}

// Two threads reading and four writing one connection (each direction's
// records are uniform, so any split between readers is fine): every byte
// arrives exactly once.
bool case_threads_reading_and_writing() {
  Pair p;
  if (!make_pair(&p)) return false;
  constexpr int kWriters = 4, kRecords = 2000, kLen = 100;
  std::atomic<long> counts[kWriters] = {};
  std::atomic<long> total{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&] {
      char buf[333];
      for (;;) {
        ssize_t n = recv(p.b, buf, sizeof buf, 0);
        if (n <= 0) return;
        for (ssize_t i = 0; i < n; ++i)
          if (buf[i] >= 'a' && buf[i] < 'a' + kWriters) counts[buf[i] - 'a'].fetch_add(1);
        if (total.fetch_add(n) + n >= static_cast<long>(kWriters) * kRecords * kLen) shutdown(p.b, SHUT_RD);
      }
    });
  std::vector<std::thread> ws;
  for (int t = 0; t < kWriters; ++t)
    ws.emplace_back([&, t] {
      char rec[kLen];
      memset(rec, 'a' + t, kLen);
      for (int i = 0; i < kRecords; ++i) send(p.a, rec, kLen, MSG_NOSIGNAL);
    });
  for (auto& w : ws) w.join();
  shutdown(p.a, SHUT_WR);  // the readers see EOF once all is read
  for (auto& r : ts) r.join();
  bool ok = total.load() == static_cast<long>(kWriters) * kRecords * kLen;
  for (auto& c : counts) ok = ok && c.load() == static_cast<long>(kRecords) * kLen;
  return ok;
}

// Right after accept() -- under smc_run possibly before the server has read
// the client's Confirm (preload/takeover.h) -- the accepted socket must
// already behave as a TCP socket would.
bool accept_then(int accept_flags, const std::function<void(int)>& right_after, Pair* p) {
  int b = -1;
  std::thread acc([&] {
    b = accept4(g_listener, nullptr, nullptr, accept_flags);
    if (b >= 0) right_after(b);
  });
  int a = socket(AF_INET, SOCK_STREAM, 0);
  int rc = connect(a, reinterpret_cast<sockaddr*>(&g_addr), sizeof g_addr);
  acc.join();
  p->a = a;
  p->b = b;
  return a >= 0 && b >= 0 && rc == 0;
}

// A server that closes what it accepted at once: the client reads EOF.
bool case_close_right_after_accept() {
  Pair p;
  bool made = accept_then(0, [](int b) { close(b); }, &p);
  p.b = -1;
  pollfd pf{p.a, POLLIN, 0};
  char c;
  bool eof = made && poll(&pf, 1, 5000) == 1 && recv(p.a, &c, 1, 0) == 0;
  return eof;
}

// dup2() over a fresh accepted socket closes it: the client reads EOF.
bool case_dup2_over_fresh_accept() {
  Pair p;
  bool made = accept_then(0, [](int b) {
    int other = socket(AF_INET, SOCK_STREAM, 0);
    dup2(other, b);
    close(other);
  }, &p);
  pollfd pf{p.a, POLLIN, 0};
  char c;
  return made && poll(&pf, 1, 5000) == 1 && recv(p.a, &c, 1, 0) == 0;
}

// A non-blocking accepted socket: EAGAIN before data, EPOLLOUT (edge
// triggered, registered at once) and then EPOLLIN when the client writes.
bool case_fresh_accept_nonblocking_readiness() {
  Pair p;
  int ep = epoll_create1(0);
  ssize_t early = 0;
  int early_errno = 0;
  bool made = accept_then(SOCK_NONBLOCK, [&](int b) {
    epoll_event e{EPOLLIN | EPOLLOUT | EPOLLET, {.fd = b}};
    epoll_ctl(ep, EPOLL_CTL_ADD, b, &e);
    char c;
    early = recv(b, &c, 1, 0);
    early_errno = errno;
  }, &p);
  uint32_t ev = 0;
  bool writable = made && wait_events(ep, 2000, &ev) == 1 && (ev & EPOLLOUT);
  send_str(p.a, "hi");
  bool readable = false;
  for (int i = 0; i < 2 && !readable; ++i) readable = wait_events(ep, 2000, &ev) == 1 && (ev & EPOLLIN);
  char buf[8];
  ssize_t n = recv(p.b, buf, sizeof buf, 0);
  close(ep);
  return early == -1 && early_errno == EAGAIN && writable && readable && n == 2 && memcmp(buf, "hi", 2) == 0;
}

// A blocking accepted socket used at once: options, addresses and a write.
bool case_fresh_accept_used_at_once() {
  Pair p;
  bool opts = false, names = false, wrote = false;
  bool made = accept_then(0, [&](int b) {
    int one = 1;
    opts = setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0;
    sockaddr_in local{}, peer{};
    socklen_t ll = sizeof local, pl = sizeof peer;
    names = getsockname(b, reinterpret_cast<sockaddr*>(&local), &ll) == 0 && local.sin_family == AF_INET &&
            getpeername(b, reinterpret_cast<sockaddr*>(&peer), &pl) == 0 && peer.sin_family == AF_INET;
    wrote = send_str(b, "banner");
  }, &p);
  char buf[16] = {};
  pollfd pf{p.a, POLLIN, 0};
  ssize_t n = made && poll(&pf, 1, 5000) == 1 ? recv(p.a, buf, sizeof buf, 0) : -1;
  return opts && names && wrote && n == 6 && memcmp(buf, "banner", 6) == 0;
}

// Only with READINESS_LATE_CONFIRM=1, under smc_run with
// SMCR_TEST_CONFIRM_DELAY_MS above the server's SMCR_CLC_TIMEOUT_MS (a
// client that sends its Confirm too late): accept() still returns at once,
// the server's read fails with ECONNRESET when its CLC deadline passes, and
// the client is not left hanging.
bool case_late_confirm_resets() {
  auto now_ms = [] {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
  };
  Pair first;  // a first contact: the client delays only later Confirms
  if (!make_pair(&first)) return false;
  long t0 = now_ms(), accepted_after = -1;
  ssize_t got = 0;
  int got_errno = 0;
  Pair p;
  bool made = accept_then(0, [&](int b) {
    accepted_after = now_ms() - t0;
    char c;
    got = recv(b, &c, 1, 0);
    got_errno = errno;
  }, &p);
  pollfd pf{p.a, POLLIN, 0};
  char c;
  bool client_ends = made && poll(&pf, 1, 10000) == 1 && recv(p.a, &c, 1, MSG_DONTWAIT) <= 0;
  printf("late_confirm: accepted_after_ms=%ld server_recv=%zd errno=%d client_ends=%d\n", accepted_after, got,
         got_errno, client_ends ? 1 : 0);
  return made && accepted_after >= 0 && accepted_after < 900 && got == -1 && got_errno == ECONNRESET && client_ends;
}

}  // namespace

int main() {
  g_listener = socket(AF_INET, SOCK_STREAM, 0);
  g_addr.sin_family = AF_INET;
  g_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(g_listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = sizeof g_addr;
  if (bind(g_listener, reinterpret_cast<sockaddr*>(&g_addr), sizeof g_addr) != 0 || listen(g_listener, 16) != 0 ||
      getsockname(g_listener, reinterpret_cast<sockaddr*>(&g_addr), &len) != 0) {
    perror("listen");
    return 2;
  }
  g_only = getenv("READINESS_ONLY");
  struct Case {
    const char* name;
    bool (*run)();
  } cases[] = {
      {"epoll_et", case_et},
      {"epoll_oneshot", case_oneshot},
      {"epoll_exclusive", case_exclusive},
      {"epoll_nested", case_nested},
      {"epoll_shared_by_threads", case_shared_epoll_threads},
      {"epoll_pwait_pwait2_ppoll_pselect", case_pwait_pwait2_ppoll_pselect},
      {"parked_epoll_sleeper_wakes", case_parked_epoll_sleeper_wakes},
      {"parked_read_while_other_thread_sleeps", case_parked_read_while_other_thread_sleeps},
      {"parked_then_poll_select_blocking_read", case_parked_then_poll_select_read},
      {"parked_then_nested_closed_or_moved", case_parked_then_nested_closed_moved},
      {"blocking_reader_then_epoll_registration", case_blocking_reader_then_epoll_registration},
      {"epoll_ping_pong", case_epoll_ping_pong},
      {"epoll_virtual_registrations", case_epoll_virtual_registrations},
      {"epoll_churned_ping_pong", case_epoll_churned_ping_pong},
      {"epoll_virtual_eof_with_accept", case_epoll_virtual_eof_with_accept},
      {"epoll_parked_stress_one_reader", [] { return epoll_parked_stress(1); }},
      {"epoll_parked_stress_two_readers", [] { return epoll_parked_stress(2); }},
      {"rdhup_after_peer_shutdown", case_rdhup},
      {"hup_and_econnreset_after_abort", case_reset},
      {"data_before_reset_is_read_first", case_data_then_reset},
      {"fin_before_reset_reads_eof_send_epipe", case_fin_then_reset},
      {"reset_error_reported_once", case_reset_reported_once},
      {"write_after_peer_close_accepted_once", case_write_after_peer_close},
      {"sigpipe_and_msg_nosignal", case_sigpipe},
      {"eintr_without_sa_restart", [] { return eintr_case(false); }},
      {"restart_with_sa_restart", [] { return eintr_case(true); }},
      {"so_error_after_nonblocking_connect", case_so_error_nonblocking_connect},
      {"threads_writing_one_connection", case_threads_writing},
      {"buffer_sizes", case_buffer_sizes},
      {"urgent_data", case_urgent_data},
      {"cork_more_nodelay_mapped", case_cork_more_nodelay_mapped},
      {"ioctl_siocinq_siocoutq", case_ioctl_inq_outq},
      {"threads_reading_and_writing", case_threads_reading_and_writing},
      {"close_right_after_accept", case_close_right_after_accept},
      {"dup2_over_fresh_accept", case_dup2_over_fresh_accept},
      {"fresh_accept_nonblocking_readiness", case_fresh_accept_nonblocking_readiness},
      {"fresh_accept_used_at_once", case_fresh_accept_used_at_once},
  };
  // READINESS_ONLY: a comma-separated list of cases.
  auto selected = [](const char* name) {
    if (!g_only) return true;
    std::string list = std::string(",") + g_only + ",";
    return list.find(std::string(",") + name + ",") != std::string::npos;
  };
  const char* late = getenv("READINESS_LATE_CONFIRM");
  if (late && strcmp(late, "1") == 0) {
    report("late_confirm_resets", case_late_confirm_resets());
  } else {
    for (const Case& c : cases)
      if (selected(c.name)) report(c.name, c.run());
  }
  printf("fails=%d\n", g_fails);
  return g_fails == 0 ? 0 : 1;
}
