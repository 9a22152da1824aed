// Socket calls beyond read/write, against an echo server (echo_tool server):
// glibc's _FORTIFY_SOURCE entry points (this file is built with
// -D_FORTIFY_SOURCE=2 -O2 so fixed-size buffers make read/recv/recvfrom
// calls into __read_chk/__recv_chk/__recvfrom_chk), sendfile with and
// without an offset, splice in both directions, sendmmsg/recvmmsg,
// MSG_PEEK, MSG_WAITALL and FIONREAD. Each case prints "case=NAME ok=0|1";
// the last line sums up and carries TCP_INFO's byte counts so the caller
// can tell SMC-R from TCP. Run plain (TCP) and under smc_run: same results.
//
//   semantics_tool --port P [--host A]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int connect_to(const char* host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, std::to_string(port).c_str(), &hints, &res) != 0) return -1;
  int fd = socket(res->ai_family, SOCK_STREAM, 0);
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly n bytes into a heap buffer (plain read: size unknown).
bool read_exact(int fd, std::string* out, size_t n) {
  out->assign(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, &(*out)[got], n - got);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

std::string pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

int g_fails = 0;
void report(const char* name, bool ok) {
  printf("case=%s ok=%d\n", name, ok ? 1 : 0);
  if (!ok) ++g_fails;
}

// Fixed-size stack buffers and lengths the compiler cannot bound: with
// _FORTIFY_SOURCE these become __*_chk calls (a provably safe length would
// compile to the plain call).
volatile size_t g_twelve = 12;

bool fortified_read(int fd) {
  if (!write_all(fd, "fortify-read", 12)) return false;
  std::string got;
  while (got.size() < 12) {
    char buf[12];
    ssize_t r = read(fd, buf, g_twelve - got.size());
    if (r <= 0) return false;
    got.append(buf, static_cast<size_t>(r));
  }
  return got == "fortify-read";
}

bool fortified_recv(int fd) {
  if (!write_all(fd, "fortify-recv", 12)) return false;
  char buf[12];
  ssize_t r = recv(fd, buf, g_twelve, MSG_WAITALL);
  return r == 12 && memcmp(buf, "fortify-recv", 12) == 0;
}

bool fortified_recvfrom(int fd) {
  if (!write_all(fd, "fortify-from", 12)) return false;
  char buf[12];
  sockaddr_storage ss;
  socklen_t len = sizeof ss;
  ssize_t r = recvfrom(fd, buf, g_twelve, MSG_WAITALL, reinterpret_cast<sockaddr*>(&ss), &len);
  return r == 12 && memcmp(buf, "fortify-from", 12) == 0;
}

bool peek_then_read(int fd) {
  if (!write_all(fd, "peekaboo", 8)) return false;
  char a[8], b[8];
  // TCP waits for the whole length with MSG_PEEK | MSG_WAITALL.
  if (recv(fd, a, sizeof a, MSG_PEEK | MSG_WAITALL) != 8) return false;
  int avail = -1;
  ioctl(fd, FIONREAD, &avail);
  ssize_t r = recv(fd, b, sizeof b, MSG_WAITALL);
  return r == 8 && memcmp(a, "peekaboo", 8) == 0 && memcmp(b, "peekaboo", 8) == 0 && avail == 8;
}

bool waitall_large(int fd) {
  std::string data = pattern(200000, 7);
  std::thread w([&] { write_all(fd, data.data(), data.size()); });
  std::string got(data.size(), '\0');
  ssize_t r = recv(fd, &got[0], got.size(), MSG_WAITALL);
  w.join();
  return r == static_cast<ssize_t>(data.size()) && got == data;
}

bool sendfile_case(int fd, bool with_offset) {
  char path[] = "/tmp/smcr-sendfile-XXXXXX";
  int f = mkstemp(path);
  if (f < 0) return false;
  unlink(path);
  const size_t skip = with_offset ? 1000 : 0;
  std::string data = pattern(3 * 1024 * 1024 + 123, with_offset ? 2 : 1);
  if (!write_all(f, data.data(), data.size())) return false;
  std::string expect = data.substr(skip);
  std::string got;
  bool read_ok = false;
  std::thread r([&] { read_ok = read_exact(fd, &got, expect.size()); });
  off_t off = static_cast<off_t>(skip);
  size_t left = expect.size();
  bool ok = true;
  if (with_offset) lseek(f, static_cast<off_t>(data.size()), SEEK_SET);
  else lseek(f, 0, SEEK_SET);
  while (left > 0) {
    ssize_t n = with_offset ? sendfile(fd, f, &off, left) : sendfile(fd, f, nullptr, left);
    if (n <= 0) {
      ok = false;
      break;
    }
    left -= static_cast<size_t>(n);
  }
  r.join();
  // With an offset the file position must not move; without, it must.
  off_t pos = lseek(f, 0, SEEK_CUR);
  close(f);
  // Either way the file was written to its end first.
  bool pos_ok = pos == static_cast<off_t>(data.size()) && (!with_offset || off == static_cast<off_t>(data.size()));
  return ok && read_ok && got == expect && pos_ok;
}

bool splice_case(int fd) {
  int to_sock[2], from_sock[2];
  if (pipe(to_sock) != 0 || pipe(from_sock) != 0) return false;
  std::string data = pattern(1024 * 1024, 3);
  // pipe -> socket
  std::thread feeder([&] {
    write_all(to_sock[1], data.data(), data.size());
    close(to_sock[1]);
  });
  // socket -> pipe -> collected
  std::string got;
  std::thread drain([&] {
    std::vector<char> b(65536);
    while (got.size() < data.size()) {
      ssize_t n = read(from_sock[0], b.data(), b.size());
      if (n <= 0) break;
      got.append(b.data(), static_cast<size_t>(n));
    }
  });
  bool ok = true;
  std::thread back([&] {
    size_t moved = 0;
    while (moved < data.size()) {
      ssize_t n = splice(fd, nullptr, from_sock[1], nullptr, 65536, 0);
      if (n <= 0) {
        ok = false;
        break;
      }
      moved += static_cast<size_t>(n);
    }
  });
  size_t sent = 0;
  for (;;) {
    ssize_t n = splice(to_sock[0], nullptr, fd, nullptr, 65536, 0);
    if (n == 0) break;
    if (n < 0) {
      ok = false;
      break;
    }
    sent += static_cast<size_t>(n);
  }
  feeder.join();
  back.join();
  close(from_sock[1]);
  drain.join();
  close(to_sock[0]);
  close(from_sock[0]);
  // A socket cannot have an offset (EINVAL), a pipe neither (ESPIPE).
  loff_t off = 0;
  int p[2];
  bool offsets = pipe(p) == 0 && splice(p[0], nullptr, fd, &off, 1, SPLICE_F_NONBLOCK) == -1 && errno == EINVAL &&
                 splice(p[0], &off, fd, nullptr, 1, SPLICE_F_NONBLOCK) == -1 && errno == ESPIPE;
  close(p[0]);
  close(p[1]);
  if (!offsets) fprintf(stderr, "splice offsets: errno %d\n", errno);
  return ok && sent == data.size() && got == data && offsets;
}

bool mmsg_case(int fd) {
  const char* parts[4] = {"one.", "two..", "three...", "four...."};
  iovec iov[4];
  mmsghdr out[4]{};
  size_t total = 0;
  for (int i = 0; i < 4; ++i) {
    iov[i] = {const_cast<char*>(parts[i]), strlen(parts[i])};
    out[i].msg_hdr.msg_iov = &iov[i];
    out[i].msg_hdr.msg_iovlen = 1;
    total += iov[i].iov_len;
  }
  if (sendmmsg(fd, out, 4, 0) != 4) return false;
  for (int i = 0; i < 4; ++i)
    if (out[i].msg_len != strlen(parts[i])) return false;
  std::string got;
  char bufs[4][16];
  while (got.size() < total) {
    iovec riov[4];
    mmsghdr in[4]{};
    for (int i = 0; i < 4; ++i) {
      riov[i] = {bufs[i], sizeof bufs[i]};
      in[i].msg_hdr.msg_iov = &riov[i];
      in[i].msg_hdr.msg_iovlen = 1;
    }
    int n = recvmmsg(fd, in, 4, MSG_WAITFORONE, nullptr);
    if (n <= 0) return false;
    for (int i = 0; i < n; ++i) got.append(bufs[i], in[i].msg_len);
  }
  return got == "one.two..three...four....";
}

// With _FILE_OFFSET_BITS=64, fcntl() is glibc's fcntl64: O_NONBLOCK set
// through it must make an empty socket's recv() fail with EAGAIN at once.
bool fcntl64_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) return false;
  char b;
  ssize_t r = recv(fd, &b, 1, 0);
  bool eagain = r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  fcntl(fd, F_SETFL, fl);
  // Blocking again: the echo of one byte waits for it.
  bool blocking = write_all(fd, "z", 1) && recv(fd, &b, 1, 0) == 1 && b == 'z';
  return eagain && blocking;
}

}  // namespace

int main(int argc, char** argv) {
  const char* host = "127.0.0.1";
  int port = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--host")) host = argv[i + 1];
  }
  int fd = connect_to(host, port);
  if (fd < 0) {
    perror("connect");
    return 2;
  }
  report("fortified_read", fortified_read(fd));
  report("fortified_recv", fortified_recv(fd));
  report("fortified_recvfrom", fortified_recvfrom(fd));
  report("peek_then_read_fionread", peek_then_read(fd));
  report("waitall_200k", waitall_large(fd));
  report("sendfile_no_offset_3m", sendfile_case(fd, false));
  report("sendfile_offset_3m", sendfile_case(fd, true));
  report("splice_both_ways_1m", splice_case(fd));
  report("sendmmsg_recvmmsg", mmsg_case(fd));
  alarm(20);  // a recv that ignores O_NONBLOCK would block forever
  report("fcntl64_nonblocking", fcntl64_nonblocking(fd));
  alarm(0);
  struct tcp_info ti{};
  socklen_t len = sizeof ti;
  getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len);
  close(fd);
  printf("fails=%d tcp_bytes_sent=%llu tcp_bytes_received=%llu\n", g_fails,
         static_cast<unsigned long long>(ti.tcpi_bytes_sent), static_cast<unsigned long long>(ti.tcpi_bytes_received));
  return g_fails == 0 ? 0 : 1;
}
