// Test peer for the integration suite: an epoll echo server / stream source
// and a multi-connection client that compares SHA-256 of what it sent and
// what came back. Runs unmodified under smc_run, like any application; the
// TCP_INFO it reports comes from the kernel's view of the TCP socket.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/sha256.h"

namespace {

struct Options {
  std::string role;
  std::string mode = "echo";
  std::string host = "127.0.0.1";
  int port = 0;
  uint64_t bytes = 1;
  int conns = 1;
  bool sequential = false;  // client: one connection after another, not all at once
  size_t chunk = 65536;
  bool edge = false;
  bool nonblock_connect = false;
  int max_conns = 0;
  std::string ready_file;
  std::string wait = "none";  // client: wait with poll/select before each read
  std::string banner;  // client: bytes the server sends first (a non-SMC peer's greeting)
  // client: a second phase after the first: then_conns more sequential
  // connections of then_bytes each, pause_ms after the first phase ended.
  int then_conns = 0;
  uint64_t then_bytes = 0;
  int pause_ms = 0;
};

[[noreturn]] void die(const char* what) {
  fprintf(stderr, "echo_tool: %s: %s\n", what, strerror(errno));
  exit(2);
}

class Stream {  // deterministic bytes per (seed)
 public:
  explicit Stream(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  void fill(uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      s_ ^= s_ << 13;
      s_ ^= s_ >> 7;
      s_ ^= s_ << 17;
      p[i] = static_cast<uint8_t>(s_);
    }
  }

 private:
  uint64_t s_;
};

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// IPv4 or IPv6 literal address + port.
socklen_t make_addr(const Options& o, sockaddr_storage* ss) {
  memset(ss, 0, sizeof *ss);
  if (o.host.find(':') != std::string::npos) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(ss);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(static_cast<uint16_t>(o.port));
    if (inet_pton(AF_INET6, o.host.c_str(), &a6->sin6_addr) != 1) die("bad IPv6 address");
    return sizeof *a6;
  }
  auto* a4 = reinterpret_cast<sockaddr_in*>(ss);
  a4->sin_family = AF_INET;
  a4->sin_port = htons(static_cast<uint16_t>(o.port));
  if (inet_pton(AF_INET, o.host.c_str(), &a4->sin_addr) != 1) die("bad IPv4 address");
  return sizeof *a4;
}

int make_listener(const Options& o) {
  sockaddr_storage ss;
  socklen_t len = make_addr(o, &ss);
  int fd = socket(ss.ss_family, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) die("bind");
  // Room for every connection of the largest run (600 at once): a full
  // accept queue makes the kernel answer with SYN cookies, whose SYN-ACK
  // carries no option, and those connections rightly stay TCP, which the
  // runs that expect SMC-R throughout would count as a failure.
  if (listen(fd, 4096) != 0) die("listen");
  if (!o.ready_file.empty()) {
    FILE* f = fopen(o.ready_file.c_str(), "w");
    if (f) {
      fputs("ready\n", f);
      fclose(f);
    }
  }
  return fd;
}

// ---- server: epoll echo ----------------------------------------------------
struct EchoConn {
  std::vector<uint8_t> pending;
  size_t off = 0;
  bool eof = false;
};

int serve_echo(const Options& o) {
  int lfd = make_listener(o);
  fcntl(lfd, F_SETFL, O_NONBLOCK);
  int ep = epoll_create1(0);
  epoll_event ev{EPOLLIN, {.fd = lfd}};
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  std::map<int, EchoConn> conns;
  int accepted = 0, closed = 0;
  uint64_t received = 0;  // every byte the application read, all connections
  std::vector<uint8_t> buf(1 << 16);
  uint32_t et = o.edge ? static_cast<uint32_t>(EPOLLET) : 0u;
  for (;;) {
    epoll_event evs[64];
    int n = epoll_wait(ep, evs, 64, -1);
    if (n < 0 && errno == EINTR) continue;
    for (int i = 0; i < n; ++i) {
      int fd = evs[i].data.fd;
      if (fd == lfd) {
        for (;;) {
          int c = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK);
          if (c < 0) break;
          ++accepted;
          conns[c];
          epoll_event cev{EPOLLIN | EPOLLRDHUP | et, {.fd = c}};
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
        }
        continue;
      }
      auto it = conns.find(fd);
      if (it == conns.end()) continue;
      EchoConn& c = it->second;
      bool dead = false;
      // Flush what is pending, then read more while we can.
      for (;;) {
        while (c.off < c.pending.size()) {
          ssize_t k = write(fd, c.pending.data() + c.off, c.pending.size() - c.off);
          if (k > 0) {
            c.off += static_cast<size_t>(k);
            continue;
          }
          if (k < 0 && (errno == EAGAIN || errno == EINTR)) break;
          dead = true;
          break;
        }
        if (dead || c.off < c.pending.size()) break;
        c.pending.clear();
        c.off = 0;
        if (c.eof) break;
        ssize_t r = read(fd, buf.data(), buf.size());
        if (r > 0) {
          received += static_cast<uint64_t>(r);
          c.pending.assign(buf.begin(), buf.begin() + r);
          continue;
        }
        if (r == 0) c.eof = true;
        else if (errno != EAGAIN && errno != EINTR) dead = true;
        break;
      }
      if (dead || (c.eof && c.pending.empty())) {
        epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
        close(fd);
        conns.erase(it);
        if (++closed == o.max_conns) {
          printf("server conns=%d bytes_received=%llu\n", closed, static_cast<unsigned long long>(received));
          fflush(stdout);
          return 0;
        }
        continue;
      }
      epoll_event cev{EPOLLIN | EPOLLRDHUP | et | (c.pending.empty() ? 0u : EPOLLOUT), {.fd = fd}};
      if (c.eof) cev.events &= ~(EPOLLIN | EPOLLRDHUP);
      epoll_ctl(ep, EPOLL_CTL_MOD, fd, &cev);
    }
  }
}

// ---- server: stream source (server writes N bytes and closes first) -------
int serve_source(const Options& o) {
  int lfd = make_listener(o);
  int served = 0;
  // The process ends only once every writer has written all and closed: a
  // process that exits while a thread is still writing ends the stream
  // where the thread was, over TCP too (there its send buffer usually
  // holds the rest by then; a 256 KiB RMB and a slow reader do not).
  static std::atomic<int> finished{0};
  for (;;) {
    int c = accept(lfd, nullptr, nullptr);
    if (c < 0) {
      if (errno == EINTR) continue;
      die("accept");
    }
    std::thread([c, o] {
      Stream s(0);
      std::vector<uint8_t> buf(o.chunk);
      uint64_t left = o.bytes;
      while (left > 0) {
        size_t k = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
        s.fill(buf.data(), k);
        if (!write_all(c, buf.data(), k)) break;
        left -= k;
      }
      close(c);
      finished.fetch_add(1);
    }).detach();
    if (++served == o.max_conns) {
      for (int waited = 0; finished.load() < served && waited < 3000; ++waited) usleep(100000);
      sleep(1);
      return 0;
    }
  }
}

// ---- client ------------------------------------------------------------------
struct Result {
  bool ok = false;
  uint64_t sent = 0, received = 0;
  std::string sha_sent, sha_received;
  uint64_t tcp_acked = 0, tcp_received = 0;
  std::string error;
};

int dial(const Options& o) {
  sockaddr_storage ss;
  socklen_t len = make_addr(o, &ss);
  int fd = socket(ss.ss_family, SOCK_STREAM | (o.nonblock_connect ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    if (errno != EINPROGRESS) {
      close(fd);
      return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    poll(&p, 1, 10000);
    int err = 0;
    socklen_t l = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
    if (err) {
      close(fd);
      errno = err;
      return -1;
    }
  }
  if (o.nonblock_connect) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

void read_tcp_info(int fd, Result* r) {
  struct tcp_info ti{};
  socklen_t l = sizeof ti;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) == 0) {
    r->tcp_acked = ti.tcpi_bytes_sent;
    r->tcp_received = ti.tcpi_bytes_received;
  }
}

// The application's own readiness wait, as event loops do it.
bool wait_readable(int fd, const std::string& how) {
  if (how == "poll") {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 10000) == 1 && (p.revents & (POLLIN | POLLHUP | POLLERR));
  }
  if (how == "select") {
    if (fd >= FD_SETSIZE) return false;
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(fd, &rd);
    timeval tv{10, 0};
    return select(fd + 1, &rd, nullptr, nullptr, &tv) == 1 && FD_ISSET(fd, &rd);
  }
  return true;
}

Result run_echo(const Options& o, int idx) {
  Result r;
  int fd = dial(o);
  if (fd < 0) {
    r.error = std::string("connect: ") + strerror(errno);
    return r;
  }
  if (!o.banner.empty()) {
    std::string got(o.banner.size(), '\0');
    size_t have = 0;
    while (have < got.size()) {
      ssize_t k = read(fd, &got[have], got.size() - have);
      if (k <= 0) break;
      have += static_cast<size_t>(k);
    }
    if (got != o.banner) {
      r.error = "banner mismatch: got '" + got.substr(0, have) + "'";
      close(fd);
      return r;
    }
  }
  smcr::test::Sha256 hs, hr;
  std::thread writer([&] {
    Stream s(static_cast<uint64_t>(idx) + 1);
    std::vector<uint8_t> buf(o.chunk);
    uint64_t left = o.bytes;
    while (left > 0) {
      size_t k = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
      s.fill(buf.data(), k);
      hs.update(buf.data(), k);
      if (!write_all(fd, buf.data(), k)) break;
      r.sent += k;
      left -= k;
    }
    // Half-close: the echo keeps flowing back after our FIN.
    if (o.mode == "echo") shutdown(fd, SHUT_WR);
  });
  std::vector<uint8_t> buf(1 << 16);
  for (;;) {
    if (o.mode == "ping" && r.received == o.bytes) break;
    if (!wait_readable(fd, o.wait)) {
      r.error = "readiness wait failed or timed out (" + o.wait + ")";
      break;
    }
    ssize_t k = read(fd, buf.data(), buf.size());
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      r.error = std::string("read: ") + strerror(errno);
      break;
    }
    if (k == 0) break;
    hr.update(buf.data(), static_cast<size_t>(k));
    r.received += static_cast<uint64_t>(k);
  }
  writer.join();
  read_tcp_info(fd, &r);
  close(fd);  // in ping mode the client closes first
  r.sha_sent = hs.hex();
  r.sha_received = hr.hex();
  r.ok = r.error.empty() && r.sent == o.bytes && r.received == o.bytes && r.sha_sent == r.sha_received;
  return r;
}

Result run_source(const Options& o) {
  Result r;
  int fd = dial(o);
  if (fd < 0) {
    r.error = std::string("connect: ") + strerror(errno);
    return r;
  }
  smcr::test::Sha256 expect, got;
  Stream s(0);
  std::vector<uint8_t> buf(1 << 16), ref(1 << 16);
  for (;;) {
    ssize_t k = read(fd, buf.data(), buf.size());
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      if (k < 0) r.error = std::string("read: ") + strerror(errno);
      break;
    }
    got.update(buf.data(), static_cast<size_t>(k));
    r.received += static_cast<uint64_t>(k);
  }
  for (uint64_t left = o.bytes; left > 0;) {
    size_t k = static_cast<size_t>(std::min<uint64_t>(left, ref.size()));
    s.fill(ref.data(), k);
    expect.update(ref.data(), k);
    left -= k;
  }
  read_tcp_info(fd, &r);
  close(fd);
  r.sha_sent = expect.hex();
  r.sha_received = got.hex();
  r.ok = r.error.empty() && r.received == o.bytes && r.sha_sent == r.sha_received;
  return r;
}

int client(const Options& o) {
  int total = o.conns + o.then_conns;
  std::vector<Result> results(static_cast<size_t>(total));
  std::vector<std::thread> threads;
  auto one = [&](int i) { results[i] = o.mode == "source" ? run_source(o) : run_echo(o, i); };
  for (int i = 0; i < o.conns; ++i) {
    if (o.sequential) one(i);
    else threads.emplace_back(one, i);
  }
  for (auto& t : threads) t.join();
  if (o.then_conns > 0) {
    usleep(static_cast<useconds_t>(o.pause_ms) * 1000);
    Options then = o;
    then.bytes = o.then_bytes;
    for (int i = o.conns; i < total; ++i) results[i] = run_echo(then, i);
  }
  int ok = 0;
  uint64_t acked = 0, rcvd = 0, bytes = 0;
  for (auto& r : results) {
    ok += r.ok;
    acked += r.tcp_acked;
    rcvd += r.tcp_received;
    bytes += r.received;
    if (!r.ok)
      fprintf(stderr, "echo_tool: connection failed: %s sent=%llu received=%llu sha %s vs %s\n", r.error.c_str(),
              (unsigned long long)r.sent, (unsigned long long)r.received, r.sha_sent.c_str(),
              r.sha_received.c_str());
  }
  printf("conns=%d ok=%d payload_bytes=%llu tcp_bytes_sent=%llu tcp_bytes_received=%llu sha=%s\n", total, ok,
         (unsigned long long)bytes, (unsigned long long)acked, (unsigned long long)rcvd,
         results.empty() ? "" : results[0].sha_received.c_str());
  return ok == total ? 0 : 1;
}

uint64_t parse_size(const char* s) {
  char* end;
  uint64_t v = strtoull(s, &end, 10);
  if (*end == 'K' || *end == 'k') v <<= 10;
  if (*end == 'M' || *end == 'm') v <<= 20;
  if (*end == 'G' || *end == 'g') v <<= 30;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2) {
    fprintf(stderr,
            "usage: echo_tool server|client --port P [--host A] [--mode echo|source|ping] [--bytes N[K|M|G]]\n"
            "       [--conns K] [--chunk N] [--et] [--nonblock-connect] [--max-conns K] [--ready-file F]\n"
            "       [--sequential] [--then-conns K --then-bytes N [--pause-ms M]]\n");
    return 2;
  }
  Options o;
  o.role = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? argv[++i] : (fprintf(stderr, "missing value for %s\n", a.c_str()), exit(2), ""); };
    if (a == "--port") o.port = atoi(next());
    else if (a == "--host") o.host = next();
    else if (a == "--mode") o.mode = next();
    else if (a == "--bytes") o.bytes = parse_size(next());
    else if (a == "--conns") o.conns = atoi(next());
    else if (a == "--sequential") o.sequential = true;
    else if (a == "--chunk") o.chunk = parse_size(next());
    else if (a == "--et") o.edge = true;
    else if (a == "--nonblock-connect") o.nonblock_connect = true;
    else if (a == "--max-conns") o.max_conns = atoi(next());
    else if (a == "--ready-file") o.ready_file = next();
    else if (a == "--banner") o.banner = next();
    else if (a == "--wait") o.wait = next();
    else if (a == "--then-conns") o.then_conns = atoi(next());
    else if (a == "--then-bytes") o.then_bytes = parse_size(next());
    else if (a == "--pause-ms") o.pause_ms = atoi(next());
    else {
      fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (o.role == "server") return o.mode == "source" ? serve_source(o) : serve_echo(o);
  if (o.role == "client") return client(o);
  fprintf(stderr, "unknown role %s\n", o.role.c_str());
  return 2;
}
