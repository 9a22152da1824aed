// smcr_connbench: short-lived and idle connection benchmarks for
// scripts/bench.sh. A plain TCP program (no smcr code in it): run both ends
// under smc_run to measure SMC-R, or without it to measure loopback TCP.
//
//   smcr_connbench serve PORT [REPLY_BYTES]
//       epoll server on 127.0.0.1:PORT: for each connection, reads one
//       request (any bytes), writes REPLY_BYTES (default 64) and closes once
//       the client has closed. Exits on SIGINT/SIGTERM.
//   smcr_connbench loop PORT SECS [REQ_BYTES] [REPLY_BYTES]
//       for SECS seconds, one connection at a time: socket, connect, send
//       REQ_BYTES (default 32), read REPLY_BYTES (default 64), close. Prints
//       key=value: conns, secs, rate (connections/s), and in microseconds
//       first_byte_{p50,p99,avg} (from the start of connect() to the first
//       reply byte) and connect_{p50,p99} (connect() alone), errors.
//   Both take a last argument `clc`: every connection first exchanges three
//       messages of the sizes of SMC-R's CLC handshake (Proposal 52 bytes,
//       client to server; Accept 68 back; Confirm 68 to the server) over the
//       TCP connection before the request: plain TCP doing the work RFC 7609
//       adds to a connection's start, the floor under any SMC-R
//       implementation's short-lived connection on this machine (its data
//       path may be cheaper than TCP's; its handshake cannot be).
//   smcr_connbench idle-serve PORT N
//       accepts N connections (blocking), then reports its memory before and
//       after, and holds them idle until SIGINT/SIGTERM.
//   smcr_connbench idle-connect PORT N
//       opens N connections (blocking connect, one after another), reports
//       memory, holds them idle until SIGINT/SIGTERM.
// Memory lines (key=value, KiB): rss_{before,after} (VmRSS), rss_shmem_after
// (RssShmem), pss_{before,after} (smaps_rollup Pss), pss_anon_shmem_{before,
// after} (Pss_Anon + Pss_Shmem: without shared library pages, whose Pss moves
// as other processes map them), pss_shmem_after, memfd_mapped_after (sum
// of mapped memfd: regions, i.e. RMBs mapped in this process, touched or not).
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

void install_signals() {
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

double now_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

int listen_on(int port, bool nonblock) {
  int fd = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) { perror("socket"); exit(1); }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = loopback(port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) { perror("bind"); exit(1); }
  if (listen(fd, 4096) < 0) { perror("listen"); exit(1); }
  return fd;
}

// /proc/self/status "Key:   N kB" -> N, or -1.
long status_kb(const char* file, const char* key) {
  FILE* f = fopen(file, "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  size_t n = strlen(key);
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, key, n) == 0 && line[n] == ':') { v = strtol(line + n + 1, nullptr, 10); break; }
  }
  fclose(f);
  return v;
}

long memfd_mapped_kb() {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[1024];
  unsigned long total = 0;
  while (fgets(line, sizeof line, f)) {
    if (!strstr(line, "/memfd:")) continue;
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2) total += hi - lo;
  }
  fclose(f);
  return static_cast<long>(total / 1024);
}

struct Mem { long rss, rss_shmem, pss, pss_anon, pss_shmem, memfd; };
Mem mem_now() {
  return {status_kb("/proc/self/status", "VmRSS"),          status_kb("/proc/self/status", "RssShmem"),
          status_kb("/proc/self/smaps_rollup", "Pss"),       status_kb("/proc/self/smaps_rollup", "Pss_Anon"),
          status_kb("/proc/self/smaps_rollup", "Pss_Shmem"), memfd_mapped_kb()};
}

void print_mem(const char* who, int n, const Mem& b, const Mem& a) {
  printf("%s conns=%d rss_before=%ld rss_after=%ld rss_shmem_after=%ld pss_before=%ld pss_after=%ld "
         "pss_anon_shmem_before=%ld pss_anon_shmem_after=%ld pss_shmem_after=%ld memfd_mapped_after=%ld\n",
         who, n, b.rss, a.rss, a.rss_shmem, b.pss, a.pss, b.pss_anon + b.pss_shmem, a.pss_anon + a.pss_shmem,
         a.pss_shmem, a.memfd);
  fflush(stdout);
}

void raise_nofile() {
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

void hold_until_signal() {
  while (!g_stop) {
    timespec ts{0, 100 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
}

// ---- serve ----------------------------------------------------------------------
constexpr size_t kProposalBytes = 52, kAcceptBytes = 68, kConfirmBytes = 68;

int cmd_serve(int port, size_t reply, bool clc) {
  install_signals();
  int lfd = listen_on(port, true);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = lfd;
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  std::string out(reply, 'r');
  std::unordered_map<int, bool> replied;  // fd -> reply sent
  // clc: bytes of the Proposal + Confirm still to come (Accept sent after the Proposal).
  std::unordered_map<int, size_t> handshake_left;
  const std::string accept_msg(kAcceptBytes, 'a');
  unsigned long served = 0, errors = 0;
  printf("listening port=%d\n", port);
  fflush(stdout);
  std::vector<epoll_event> evs(256);
  char buf[4096];
  while (!g_stop) {
    int n = epoll_wait(ep, evs.data(), static_cast<int>(evs.size()), 200);
    if (n < 0) {
      if (errno == EINTR) continue;
      perror("epoll_wait");
      return 1;
    }
    for (int i = 0; i < n; ++i) {
      int fd = evs[i].data.fd;
      if (fd == lfd) {
        for (;;) {
          int c = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) ++errors;
            break;
          }
          int one = 1;
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event cev{};
          cev.events = EPOLLIN | EPOLLRDHUP;
          cev.data.fd = c;
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
          replied[c] = false;
          if (clc) handshake_left[c] = kProposalBytes + kConfirmBytes;
        }
        continue;
      }
      bool done = false;
      for (;;) {
        auto hs = clc ? handshake_left.find(fd) : handshake_left.end();
        size_t want = hs != handshake_left.end() ? std::min(sizeof buf, hs->second - (hs->second > kConfirmBytes ? kConfirmBytes : 0))
                                                 : sizeof buf;
        ssize_t r = read(fd, buf, want);
        if (r > 0 && hs != handshake_left.end()) {
          bool proposal_done = hs->second > kConfirmBytes && hs->second - static_cast<size_t>(r) == kConfirmBytes;
          hs->second -= static_cast<size_t>(r);
          if (proposal_done && write(fd, accept_msg.data(), accept_msg.size()) != static_cast<ssize_t>(accept_msg.size())) {
            ++errors;
            done = true;
            break;
          }
          if (hs->second == 0) handshake_left.erase(hs);
          continue;
        }
        if (r > 0) {
          if (!replied[fd]) {
            size_t off = 0;
            while (off < out.size()) {
              ssize_t w = write(fd, out.data() + off, out.size() - off);
              if (w > 0) { off += static_cast<size_t>(w); continue; }
              if (w < 0 && (errno == EAGAIN || errno == EINTR)) continue;  // tiny reply: brief spin
              ++errors;
              done = true;
              break;
            }
            replied[fd] = true;
            ++served;
          }
          if (done) break;
          continue;
        }
        if (r == 0) { done = true; break; }
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        ++errors;
        done = true;
        break;
      }
      if (done) {
        epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
        close(fd);
        replied.erase(fd);
        handshake_left.erase(fd);
      }
    }
  }
  for (auto& [fd, _] : replied) close(fd);
  close(lfd);
  printf("served=%lu errors=%lu\n", served, errors);
  return 0;
}

// ---- loop -----------------------------------------------------------------------
double pct(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

// The client's half of the `clc` exchange: Proposal out, Accept in, Confirm out.
bool client_handshake(int fd) {
  // The Confirm and the request are two writes in a row: Nagle would hold
  // the request for the Confirm's ACK (SMC-R's request never meets Nagle:
  // it goes through memory).
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char msg[kAcceptBytes];
  memset(msg, 'p', sizeof msg);
  if (write(fd, msg, kProposalBytes) != static_cast<ssize_t>(kProposalBytes)) return false;
  size_t got = 0;
  while (got < kAcceptBytes) {
    ssize_t r = read(fd, msg + got, kAcceptBytes - got);
    if (r <= 0) { if (r < 0 && errno == EINTR) continue; return false; }
    got += static_cast<size_t>(r);
  }
  return write(fd, msg, kConfirmBytes) == static_cast<ssize_t>(kConfirmBytes);
}

int cmd_loop(int port, double secs, size_t req, size_t reply, bool clc) {
  signal(SIGPIPE, SIG_IGN);
  std::string out(req, 'q');
  std::vector<char> in(reply + 1);
  std::vector<double> first, conn;
  first.reserve(1 << 20);
  conn.reserve(1 << 20);
  unsigned long errors = 0;
  sockaddr_in a = loopback(port);
  double start = now_us(), end = start + secs * 1e6, t = start;
  while (t < end) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) { perror("socket"); return 1; }
    double t0 = now_us();
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
      ++errors;
      close(fd);
      if (errors > 1000) { fprintf(stderr, "loop: too many errors, last: %s\n", strerror(errno)); break; }
      t = now_us();
      continue;
    }
    double t1 = now_us();
    bool ok = (!clc || client_handshake(fd)) && write(fd, out.data(), out.size()) == static_cast<ssize_t>(out.size());
    size_t got = 0;
    double tfirst = 0;
    while (ok && got < reply) {
      ssize_t r = read(fd, in.data() + got, reply - got);
      if (r <= 0) { if (r < 0 && errno == EINTR) continue; ok = false; break; }
      if (got == 0) tfirst = now_us();
      got += static_cast<size_t>(r);
    }
    close(fd);
    t = now_us();
    if (!ok) { ++errors; if (errors > 1000) break; continue; }
    first.push_back(tfirst - t0);
    conn.push_back(t1 - t0);
  }
  double el = (now_us() - start) / 1e6;
  double avg = 0;
  for (double x : first) avg += x;
  if (!first.empty()) avg /= first.size();
  printf("conns=%zu secs=%.3f rate=%.1f first_byte_p50=%.1f first_byte_p99=%.1f first_byte_avg=%.1f "
         "connect_p50=%.1f connect_p99=%.1f errors=%lu\n",
         first.size(), el, first.size() / el, pct(first, 50), pct(first, 99), avg, pct(conn, 50),
         pct(conn, 99), errors);
  return first.empty() || errors ? 1 : 0;
}

// ---- idle -----------------------------------------------------------------------
int cmd_idle_serve(int port, int n) {
  install_signals();
  raise_nofile();
  int lfd = listen_on(port, false);
  printf("listening port=%d\n", port);
  fflush(stdout);
  Mem before = mem_now();
  std::vector<int> fds;
  while (static_cast<int>(fds.size()) < n && !g_stop) {
    int c = accept(lfd, nullptr, nullptr);
    if (c < 0) {
      if (errno == EINTR) continue;
      perror("accept");
      return 1;
    }
    fds.push_back(c);
  }
  if (g_stop) return 1;
  print_mem("server", n, before, mem_now());
  hold_until_signal();
  for (int fd : fds) close(fd);
  close(lfd);
  return 0;
}

int cmd_idle_connect(int port, int n) {
  install_signals();
  raise_nofile();
  Mem before = mem_now();
  sockaddr_in a = loopback(port);
  std::vector<int> fds;
  double t0 = now_us();
  for (int i = 0; i < n && !g_stop; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) { perror("socket"); return 1; }
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
      fprintf(stderr, "connect #%d: %s\n", i, strerror(errno));
      return 1;
    }
    fds.push_back(fd);
  }
  if (g_stop) return 1;
  double el = (now_us() - t0) / 1e6;
  Mem after = mem_now();
  printf("client connect_secs=%.3f ", el);
  print_mem("client", n, before, after);
  hold_until_signal();
  for (int fd : fds) close(fd);
  return 0;
}

int usage() {
  fprintf(stderr,
          "usage: smcr_connbench serve PORT [REPLY_BYTES] [clc]\n"
          "       smcr_connbench loop PORT SECS [REQ_BYTES] [REPLY_BYTES] [clc]\n"
          "       smcr_connbench idle-serve PORT N\n"
          "       smcr_connbench idle-connect PORT N\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  std::string cmd = argv[1];
  int port = atoi(argv[2]);
  if (port <= 0 || port > 65535) return usage();
  bool clc = std::string(argv[argc - 1]) == "clc";
  if (clc) --argc;
  if (cmd == "serve") return cmd_serve(port, argc > 3 ? strtoul(argv[3], nullptr, 10) : 64, clc);
  if (cmd == "loop" && argc >= 4)
    return cmd_loop(port, atof(argv[3]), argc > 4 ? strtoul(argv[4], nullptr, 10) : 32,
                    argc > 5 ? strtoul(argv[5], nullptr, 10) : 64, clc);
  if (cmd == "idle-serve" && argc >= 4) return cmd_idle_serve(port, atoi(argv[3]));
  if (cmd == "idle-connect" && argc >= 4) return cmd_idle_connect(port, atoi(argv[3]));
  return usage();
}
