// Readiness as TCP reports it, whenever the interest was registered: a
// matrix of registration point x event x trigger mode, printed one line per
// cell ("cell=POINT/EVENT/MODE first=0x.. again=0x.."), so that a run over
// plain TCP and one under smc_run can be compared line by line
// (semantics_test.sh). The peer is a thread of this process.
//
// Registration points: the client's socket before a blocking connect(),
// before a non-blocking one, after connect(), the accepted socket right
// after accept(), a client socket registered before connect() in an
// epoll set that is itself nested in another (the outer set is waited on),
// and a client socket that, after a first exchange, is deleted from its set
// and added and modified again, as event loops do around every request
// (under smc_run the registration is then kept in memory: "virtual").
// Events: the peer's data (EPOLLIN), more data after the reader asked
// SIOCINQ and read part of what was there (a new edge), writability after the send window
// filled and the peer read it all (EPOLLOUT), the peer's shutdown(SHUT_WR)
// (EPOLLRDHUP), the peer's abortive close (EPOLLHUP, EPOLLERR).
// Modes: level-triggered, EPOLLET, EPOLLONESHOT (re-armed with
// EPOLL_CTL_MOD before each event, as event loops do), and poll().
//
// `first` is what the first wait after the event reports, `again` what a
// second wait reports right after (nothing for ET and ONESHOT, the same for
// level-triggered).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int g_listener = -1;
sockaddr_in g_addr{};

enum class Point { kBeforeConnect, kBeforeNonblockingConnect, kAfterConnect, kAccepted, kNestedBeforeConnect, kChurned };
enum class Event { kIn, kInAfterInq, kInAfterPartial, kOutAfterFull, kRdhup, kHup };
enum class Mode { kLevel, kEdge, kOneshot, kPoll };

const char* name(Point p) {
  switch (p) {
    case Point::kBeforeConnect: return "before_connect";
    case Point::kBeforeNonblockingConnect: return "before_nonblocking_connect";
    case Point::kAfterConnect: return "after_connect";
    case Point::kAccepted: return "accepted";
    case Point::kNestedBeforeConnect: return "nested_before_connect";
    case Point::kChurned: return "after_del_add";
  }
  return "?";
}
const char* name(Event e) {
  switch (e) {
    case Event::kIn: return "in";
    case Event::kInAfterInq: return "in_after_inq";
    case Event::kInAfterPartial: return "in_after_partial";
    case Event::kOutAfterFull: return "out_after_full";
    case Event::kRdhup: return "rdhup";
    case Event::kHup: return "hup";
  }
  return "?";
}
const char* name(Mode m) {
  switch (m) {
    case Mode::kLevel: return "lt";
    case Mode::kEdge: return "et";
    case Mode::kOneshot: return "oneshot";
    case Mode::kPoll: return "poll";
  }
  return "?";
}

// The readiness under test: one epoll set (or two, nested), or poll().
struct Watch {
  Mode mode;
  int fd = -1;            // the socket watched
  int inner = -1;         // the epoll set the socket is in
  int outer = -1;         // nested: the set waited on
  uint32_t interest = 0;  // epoll events asked for

  explicit Watch(Mode m, bool nested) : mode(m) {
    if (mode == Mode::kPoll) return;
    inner = epoll_create1(EPOLL_CLOEXEC);
    if (nested) {
      outer = epoll_create1(EPOLL_CLOEXEC);
      epoll_event e{EPOLLIN, {.fd = inner}};
      epoll_ctl(outer, EPOLL_CTL_ADD, inner, &e);
    }
    interest = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
    if (mode == Mode::kEdge) interest |= EPOLLET;
    if (mode == Mode::kOneshot) interest |= EPOLLONESHOT;
  }
  ~Watch() {
    if (outer >= 0) close(outer);
    if (inner >= 0) close(inner);
  }
  void add(int sock) {
    fd = sock;
    if (mode == Mode::kPoll) return;
    epoll_event e{interest, {.fd = sock}};
    if (epoll_ctl(inner, EPOLL_CTL_ADD, sock, &e) != 0) perror("epoll_ctl ADD");
  }
  // Out of the set and back in, then modified (the same interest).
  void churn() {
    epoll_event e{interest, {.fd = fd}};
    if (epoll_ctl(inner, EPOLL_CTL_DEL, fd, nullptr) != 0) perror("epoll_ctl DEL");
    if (epoll_ctl(inner, EPOLL_CTL_ADD, fd, &e) != 0) perror("epoll_ctl ADD");
    if (epoll_ctl(inner, EPOLL_CTL_MOD, fd, &e) != 0) perror("epoll_ctl MOD");
  }
  void rearm() {
    if (mode != Mode::kOneshot) return;
    epoll_event e{interest, {.fd = fd}};
    if (epoll_ctl(inner, EPOLL_CTL_MOD, fd, &e) != 0) perror("epoll_ctl MOD");
  }
  // The events of one wait (0: none within `ms`).
  uint32_t wait(int ms) {
    if (mode == Mode::kPoll) {
      pollfd p{fd, POLLIN | POLLOUT | POLLRDHUP, 0};
      if (poll(&p, 1, ms) != 1) return 0;
      uint32_t r = 0;
      if (p.revents & POLLIN) r |= EPOLLIN;
      if (p.revents & POLLOUT) r |= EPOLLOUT;
      if (p.revents & POLLRDHUP) r |= EPOLLRDHUP;
      if (p.revents & POLLHUP) r |= EPOLLHUP;
      if (p.revents & POLLERR) r |= EPOLLERR;
      return r;
    }
    epoll_event e{};
    if (outer >= 0) {
      if (epoll_wait(outer, &e, 1, ms) != 1) return 0;
      ms = 0;
    }
    return epoll_wait(inner, &e, 1, ms) == 1 ? e.events : 0;
  }
};

// Accepts one connection on a thread while `connect_fn` connects.
template <typename F>
int accept_while(F&& connect_fn) {
  int b = -1;
  std::atomic<bool> started{false};
  std::thread acc([&] {
    started = true;
    b = accept4(g_listener, nullptr, nullptr, SOCK_CLOEXEC);
  });
  while (!started) std::this_thread::yield();
  usleep(2000);  // the accept thread sleeps in accept() (preload/own_listeners.h)
  connect_fn();
  acc.join();
  return b;
}

uint32_t g_zev = 0;
int g_zread = 0;

// One cell: returns "first=0x.. again=0x..", or an error text.
std::string run_cell(Point point, Event event, Mode mode) {
  Watch w(mode, point == Point::kNestedBeforeConnect);
  int a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC |
                              (point == Point::kBeforeNonblockingConnect ? SOCK_NONBLOCK : 0), 0);
  bool early = point == Point::kBeforeConnect || point == Point::kBeforeNonblockingConnect ||
               point == Point::kNestedBeforeConnect;
  if (early) w.add(a);
  int rc = 0, err = 0;
  int b = accept_while([&] {
    rc = connect(a, reinterpret_cast<sockaddr*>(&g_addr), sizeof g_addr);
    err = errno;
  });
  if (rc != 0 && err == EINPROGRESS) {
    pollfd p{a, POLLOUT, 0};
    poll(&p, 1, 5000);
    rc = 0;
  }
  if (rc != 0 || b < 0) {
    close(a);
    if (b >= 0) close(b);
    return "error=connect";
  }
  // `mine` is the socket watched, `peer` the other end.
  int mine = point == Point::kAccepted ? b : a;
  int peer = point == Point::kAccepted ? a : b;
  int fl = fcntl(mine, F_GETFL);
  fcntl(mine, F_SETFL, fl | O_NONBLOCK);
  if (!early) w.add(mine);
  if (point == Point::kChurned) {
    // A first request, read until empty, and the fd taken out and put back.
    send(peer, "z", 1, MSG_NOSIGNAL);
    g_zev = w.wait(1000);
    char z;
    g_zread = 0;
    while (recv(mine, &z, 1, 0) == 1) ++g_zread;
    if (g_zread == 0) {
      // Later than the wait (a loaded machine, a handshake that ended on a
      // thread): the cell needs it read first, or it is counted in what the
      // cell's own event brings (an SIOCINQ of 1001, a read of too much).
      pollfd p{mine, POLLIN, 0};
      if (poll(&p, 1, 5000) == 1 && recv(mine, &z, 1, 0) == 1) ++g_zread;
    }
    w.churn();
  }
  // The connection's own first events (EPOLLOUT) are not part of the cell.
  usleep(20000);
  while (mode != Mode::kLevel && mode != Mode::kPoll && w.wait(0) != 0) {
  }
  w.rearm();
  char buf[65536];
  long long filled = 0;
  auto fail = [&](const char* what) {
    close(mine);
    if (peer >= 0) close(peer);
    return std::string("error=") + what;
  };
  switch (event) {
    case Event::kIn:
      send(peer, "x", 1, MSG_NOSIGNAL);
      break;
    case Event::kInAfterInq: {
      // nginx's edge-triggered reader: it asks SIOCINQ how much is there,
      // reads that much, and then waits for the next arrival's edge.
      memset(buf, 'q', 1000);
      send(peer, buf, 1000, MSG_NOSIGNAL);
      usleep(20000);
      if (!(w.wait(1000) & EPOLLIN)) return fail("no_first_edge");
      w.rearm();
      int inq = -1;
      ioctl(mine, FIONREAD, &inq);
      if (inq != 1000 || recv(mine, buf, 500, 0) != 500) {
        char what[64];
        snprintf(what, sizeof what, "inq(inq=%d,zread=%d)", inq, g_zread);
        return fail(what);
      }
      send(peer, "y", 1, MSG_NOSIGNAL);
      break;
    }
    case Event::kInAfterPartial: {
      // A reader that takes part of what arrived (or lets an edge pass)
      // and waits for the next: over TCP every arrival is an edge, even
      // with data still unread.
      send(peer, "pq", 2, MSG_NOSIGNAL);
      usleep(20000);
      if (!(w.wait(1000) & EPOLLIN)) return fail("no_first_edge");
      w.rearm();
      if (recv(mine, buf, 1, 0) != 1) return fail("partial");
      send(peer, "y", 1, MSG_NOSIGNAL);
      break;
    }
    case Event::kOutAfterFull: {
      memset(buf, 'f', sizeof buf);
      for (;;) {
        ssize_t n = send(mine, buf, sizeof buf, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0) break;
        filled += n;
      }
      // The edge (or the one shot) of the filling itself is not the event.
      usleep(20000);
      while (mode != Mode::kLevel && mode != Mode::kPoll && w.wait(0) != 0) {
      }
      w.rearm();
      uint32_t before = w.wait(0);  // level: not writable now
      if (mode == Mode::kLevel || mode == Mode::kPoll) {
        if (before & EPOLLOUT) return fail("writable_when_full");
        w.rearm();
      }
      for (long long got = 0; got < filled;) {
        ssize_t n = recv(peer, buf, sizeof buf, 0);
        if (n <= 0) return fail("drain");
        got += n;
      }
      break;
    }
    case Event::kRdhup:
      shutdown(peer, SHUT_WR);
      break;
    case Event::kHup: {
      linger l{1, 0};
      setsockopt(peer, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      close(peer);
      peer = -1;
      break;
    }
  }
  usleep(100000);  // everything the event causes has arrived
  uint32_t first = w.wait(1000);
  uint32_t again = w.wait(0);
  if (getenv("MATRIX_DIAG") && first == 0) {  // debugging: what a silent cell left unread
    int inq = -1;
    ioctl(mine, FIONREAD, &inq);
    uint32_t later = w.wait(3000);
    fprintf(stderr, "DIAG inq=%d later=0x%x zev=0x%x zread=%d\n", inq, later, g_zev, g_zread);
  }
  close(mine);
  if (peer >= 0) close(peer);
  char out[64];
  snprintf(out, sizeof out, "first=0x%x again=0x%x", first, again);
  return out;
}

}  // namespace

int main() {
  signal(SIGPIPE, SIG_IGN);
  g_listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_addr.sin_family = AF_INET;
  g_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof g_addr;
  if (bind(g_listener, reinterpret_cast<sockaddr*>(&g_addr), sizeof g_addr) != 0 || listen(g_listener, 16) != 0 ||
      getsockname(g_listener, reinterpret_cast<sockaddr*>(&g_addr), &len) != 0) {
    perror("listen");
    return 2;
  }
  const char* only = getenv("MATRIX_ONLY");  // a substring of the cell names to run (debugging)
  int cells = 0;
  for (Point p : {Point::kBeforeConnect, Point::kBeforeNonblockingConnect, Point::kAfterConnect, Point::kAccepted,
                  Point::kNestedBeforeConnect, Point::kChurned})
    for (Event e : {Event::kIn, Event::kInAfterInq, Event::kInAfterPartial, Event::kOutAfterFull, Event::kRdhup,
                    Event::kHup})
      for (Mode m : {Mode::kLevel, Mode::kEdge, Mode::kOneshot, Mode::kPoll}) {
        // poll has no registration
        if (m == Mode::kPoll && (p == Point::kNestedBeforeConnect || p == Point::kChurned)) continue;
        std::string cell = std::string(name(p)) + "/" + name(e) + "/" + name(m);
        if (only && cell.find(only) == std::string::npos) continue;
        printf("cell=%s %s\n", cell.c_str(), run_cell(p, e, m).c_str());
        fflush(stdout);
        ++cells;
      }
  printf("cells=%d\n", cells);
  return 0;
}
