// af_smc_echo: an echo server / client on the Linux kernel's own SMC sockets
// (socket(AF_SMC, SOCK_STREAM, SMCPROTO_SMC)), the "real peer" of the Linux
// interop tests (tests/guest/interop_test.sh). It runs inside a QEMU guest
// whose kernel has net/smc (modprobe smc smc_diag).
//
//   af_smc_echo server IP PORT [CONNS]   echo CONNS connections (default 1), one
//                                        after the other, then exit 0
//   af_smc_echo client IP PORT BYTES     send BYTES deterministic bytes, half-close,
//                                        read the echo to EOF and verify it
//
// Every connection prints one line (stdout):
//   af_smc_echo: <role> ok=0|1 sent=N received=N mismatch_at=-1|OFF
//     mode=SMCR|TCP_FALLBACK|SMCD|? fallback_reason=0x........ peer_diagnosis=0x........
// The mode and the two codes are the kernel's own view of the socket, read over
// the smc_diag netlink interface (NETLINK_SOCK_DIAG, family AF_SMC) and matched
// by socket inode; "?" when smc_diag is not available.
// Exit status: 0 intact, 1 data error / socket error, 2 usage, 3 AF_SMC not
// available (no smc module), 4 timeout (SIGALRM; AF_SMC_ECHO_TIMEOUT seconds,
// default 120).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_SMC
#define AF_SMC 43
#endif
#define SMCPROTO_SMC 0  // IPv4

// From <linux/smc_diag.h> (declared here so that the program builds without it).
struct my_smc_diag_req {
  uint8_t diag_family;
  uint8_t pad[2];
  uint8_t diag_ext;
  struct inet_diag_sockid id;
};
struct my_smc_diag_msg {
  uint8_t diag_family;
  uint8_t diag_state;
  uint8_t diag_mode;
  uint8_t diag_shutdown;
  struct inet_diag_sockid id;
  uint32_t diag_uid;
  uint64_t diag_inode __attribute__((aligned(8)));
};
enum { MY_SMC_DIAG_CONNINFO = 1, MY_SMC_DIAG_FALLBACK = 5 };
struct my_smc_diag_cursor {
  uint16_t reserved;
  uint16_t wrap;
  uint32_t count;
};
struct my_smc_diag_conninfo {
  uint32_t token, sndbuf_size, rmbe_size, peer_rmbe_size;
  struct my_smc_diag_cursor rx_prod, rx_cons, tx_prod, tx_cons;
  uint8_t rx_prod_flags, rx_conn_state_flags, tx_prod_flags, tx_conn_state_flags;
  struct my_smc_diag_cursor tx_prep, tx_sent, tx_fin;
};

static const char *g_role = "?";

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "af_smc_echo: TIMEOUT (SIGALRM)\n";
  ssize_t r = write(2, msg, sizeof msg - 1);
  (void)r;
  _exit(4);
}

static uint8_t pattern(uint64_t i) {  // deterministic, not periodic at any small power of two
  uint64_t x = i * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  return (uint8_t)(x ^ (i >> 16));
}

struct smc_info {
  const char *mode;
  uint32_t reason, peer_diagnosis;
  int found;
  // From SMC_DIAG_CONNINFO (SMC-R only): the bytes the producer cursors
  // account for. Linux's cursors run from 0 and wrap at the RMBE size, so
  // N bytes through an RMBE of L bytes read wrap = N / L, count = N % L.
  int have_cursors;
  uint64_t tx_cursor_bytes, rx_cursor_bytes;
  uint32_t rmbe_size, peer_rmbe_size;
};

// The kernel's view of one AF_SMC socket (matched by inode).
static struct smc_info smc_query(int fd) {
  struct smc_info info = {"?", 0, 0, 0, 0, 0, 0, 0, 0};
  struct stat st;
  if (fstat(fd, &st) != 0) return info;
  int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return info;
  struct timeval tv = {2, 0};
  setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct {
    struct nlmsghdr nlh;
    struct my_smc_diag_req req;
  } msg;
  memset(&msg, 0, sizeof msg);
  msg.nlh.nlmsg_len = sizeof msg;
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  msg.nlh.nlmsg_seq = 1;
  msg.req.diag_family = AF_SMC;
  msg.req.diag_ext = 1 << (MY_SMC_DIAG_CONNINFO - 1);
  struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
  if (sendto(nl, &msg, sizeof msg, 0, (struct sockaddr *)&sa, sizeof sa) < 0) {
    close(nl);
    return info;
  }
  static char buf[65536] __attribute__((aligned(8)));
  int done = 0;
  while (!done) {
    ssize_t n = recv(nl, buf, sizeof buf, 0);
    if (n <= 0) break;
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
        done = 1;
        break;
      }
      /* Netlink aligns messages to 4 bytes only; the struct holds a u64: copy it out. */
      struct my_smc_diag_msg mm;
      const struct my_smc_diag_msg *m = &mm;
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof mm)) continue;
      memcpy(&mm, NLMSG_DATA(h), sizeof mm);
      if (m->diag_inode != (uint64_t)st.st_ino) continue;
      info.found = 1;
      info.mode = m->diag_mode == 0 ? "SMCR" : m->diag_mode == 1 ? "TCP_FALLBACK" : m->diag_mode == 2 ? "SMCD" : "?";
      size_t off = NLMSG_ALIGN(sizeof mm);
      while (off + sizeof(struct nlattr) <= h->nlmsg_len - NLMSG_HDRLEN) {
        struct nlattr *a = (struct nlattr *)((char *)NLMSG_DATA(h) + off);
        if (a->nla_len < sizeof *a) break;
        if ((a->nla_type & NLA_TYPE_MASK) == MY_SMC_DIAG_FALLBACK && a->nla_len >= sizeof *a + 8) {
          memcpy(&info.reason, (char *)a + NLA_HDRLEN, 4);
          memcpy(&info.peer_diagnosis, (char *)a + NLA_HDRLEN + 4, 4);
        }
        if ((a->nla_type & NLA_TYPE_MASK) == MY_SMC_DIAG_CONNINFO &&
            a->nla_len >= sizeof *a + sizeof(struct my_smc_diag_conninfo)) {
          struct my_smc_diag_conninfo ci;
          memcpy(&ci, (char *)a + NLA_HDRLEN, sizeof ci);
          info.have_cursors = 1;
          info.rmbe_size = ci.rmbe_size;
          info.peer_rmbe_size = ci.peer_rmbe_size;
          info.tx_cursor_bytes = (uint64_t)ci.tx_prod.wrap * ci.peer_rmbe_size + ci.tx_prod.count;
          info.rx_cursor_bytes = (uint64_t)ci.rx_prod.wrap * ci.rmbe_size + ci.rx_prod.count;
        }
        off += NLA_ALIGN(a->nla_len);
      }
    }
  }
  close(nl);
  return info;
}

static double now(void);

// Whether this process runs without the shim: no LD_PRELOAD and no smcr
// library mapped (the kernel, not the shim, must be this end).
static const char *shim_presence(void) {
  const char *pre = getenv("LD_PRELOAD");
  if (pre && *pre) return "present";
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return "?";
  char line[512];
  const char *r = "absent";
  while (fgets(line, sizeof line, f))
    if (strstr(line, "smcr")) r = "present";
  fclose(f);
  return r;
}

// One line per connection, then AF_SMC_ECHO_HOOK (a shell command, run
// while the connection and its link group are still up: a witness of the
// kernel's state, e.g. its link-group dump).
static void report(int fd, int ok, uint64_t sent, uint64_t received, int64_t mismatch, double secs) {
  struct smc_info i = smc_query(fd);
  // A write() returns once the bytes are in the send buffer; the producer
  // cursor moves when they are RDMA-written: give the last ones a moment.
  for (double until = now() + 2; i.have_cursors && i.tx_cursor_bytes < sent && now() < until;) {
    usleep(10000);
    i = smc_query(fd);
  }
  printf("af_smc_echo: %s ok=%d sent=%llu received=%llu mismatch_at=%lld mode=%s fallback_reason=0x%08x "
         "peer_diagnosis=0x%08x secs=%.2f shim=%s",
         g_role, ok, (unsigned long long)sent, (unsigned long long)received, (long long)mismatch, i.mode, i.reason,
         i.peer_diagnosis, secs, shim_presence());
  if (i.have_cursors)
    printf(" tx_cursor_bytes=%llu rx_cursor_bytes=%llu rmbe=%u peer_rmbe=%u", (unsigned long long)i.tx_cursor_bytes,
           (unsigned long long)i.rx_cursor_bytes, i.rmbe_size, i.peer_rmbe_size);
  printf("\n");
  fflush(stdout);
  const char *hook = getenv("AF_SMC_ECHO_HOOK");
  if (hook && *hook) {
    int rc = system(hook);
    (void)rc;
    fflush(stdout);
  }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int smc_socket(void) {
  int fd = socket(AF_SMC, SOCK_STREAM, SMCPROTO_SMC);
  if (fd < 0) {
    fprintf(stderr, "af_smc_echo: socket(AF_SMC): %s\n", strerror(errno));
    exit(errno == EAFNOSUPPORT ? 3 : 1);
  }
  return fd;
}

static struct sockaddr_in addr_of(const char *ip, const char *port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
    fprintf(stderr, "af_smc_echo: bad IPv4 address %s\n", ip);
    exit(2);
  }
  return a;
}

static int serve_one(int c) {
  static char buf[65536];
  uint64_t total = 0;
  double t0 = now();
  for (;;) {
    ssize_t n = read(c, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      fprintf(stderr, "af_smc_echo: server read: %s\n", strerror(errno));
      report(c, 0, total, total, -1, now() - t0);
      return 1;
    }
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(c, buf + off, (size_t)(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        fprintf(stderr, "af_smc_echo: server write: %s\n", strerror(errno));
        report(c, 0, total, total, -1, now() - t0);
        return 1;
      }
      off += w;
    }
    total += (uint64_t)n;
  }
  report(c, 1, total, total, -1, now() - t0);
  shutdown(c, SHUT_WR);
  return 0;
}

static int server(const char *ip, const char *port, int conns) {
  g_role = "server";
  int fd = smc_socket();
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = addr_of(ip, port);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0) {
    fprintf(stderr, "af_smc_echo: bind/listen %s:%s: %s\n", ip, port, strerror(errno));
    return 1;
  }
  printf("af_smc_echo: server listening on %s:%s\n", ip, port);
  fflush(stdout);
  int rc = 0;
  for (int i = 0; i < conns; i++) {
    int c = accept(fd, NULL, NULL);
    if (c < 0) {
      if (errno == EINTR) { i--; continue; }
      fprintf(stderr, "af_smc_echo: accept: %s\n", strerror(errno));
      return 1;
    }
    if (serve_one(c) != 0) rc = 1;
    close(c);
  }
  close(fd);
  return rc;
}

static int client(const char *ip, const char *port, uint64_t bytes) {
  g_role = "client";
  struct sockaddr_in a = addr_of(ip, port);
  int fd = -1;
  double t0 = now();
  // The server may not listen yet (guests boot in parallel): retry refusals.
  for (int attempt = 0;; attempt++) {
    fd = smc_socket();
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) break;
    int e = errno;
    close(fd);
    if ((e == ECONNREFUSED || e == EHOSTUNREACH || e == ENETUNREACH) && attempt < 300) {
      usleep(200000);
      continue;
    }
    fprintf(stderr, "af_smc_echo: connect %s:%s: %s\n", ip, port, strerror(e));
    return 1;
  }
  double t1 = now();
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  static uint8_t out[65536], in[65536];
  uint64_t sent = 0, received = 0;
  int64_t mismatch = -1;
  int wr_closed = 0;
  for (;;) {
    if (!wr_closed && sent == bytes) {
      shutdown(fd, SHUT_WR);
      wr_closed = 1;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN | (wr_closed ? 0 : POLLOUT)};
    int pr = poll(&p, 1, -1);
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) break;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = read(fd, in, sizeof in);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        // spurious
      } else if (n < 0) {
        fprintf(stderr, "af_smc_echo: client read: %s\n", strerror(errno));
        break;
      } else if (n == 0) {
        break;
      } else {
        for (ssize_t k = 0; k < n; k++) {
          if (mismatch < 0 && (received + (uint64_t)k >= bytes || in[k] != pattern(received + (uint64_t)k)))
            mismatch = (int64_t)(received + (uint64_t)k);
        }
        received += (uint64_t)n;
      }
    }
    if (!wr_closed && (p.revents & POLLOUT)) {
      size_t len = sizeof out;
      if (bytes - sent < len) len = (size_t)(bytes - sent);
      for (size_t k = 0; k < len; k++) out[k] = pattern(sent + k);
      ssize_t w = write(fd, out, len);
      if (w < 0 && errno != EAGAIN && errno != EINTR) {
        fprintf(stderr, "af_smc_echo: client write: %s\n", strerror(errno));
        break;
      }
      if (w > 0) sent += (uint64_t)w;
    }
  }
  int ok = sent == bytes && received == bytes && mismatch < 0;
  printf("af_smc_echo: client connect_secs=%.2f\n", t1 - t0);
  report(fd, ok, sent, received, mismatch, now() - t0);
  double t2 = now();
  // A close() that takes long waits inside net/smc: a watchdog child shows
  // where (the kernel stack of this process after 3 s).
  pid_t parent = getpid(), dog = fork();
  if (dog == 0) {
    sleep(3);
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/stack", (int)parent);
    FILE *f = fopen(path, "r");
    if (f) {
      printf("af_smc_echo: close still waiting after 3 s, kernel stack:");
      while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        printf(" %s |", line);
      }
      printf("\n");
      fclose(f);
    }
    fflush(stdout);
    _exit(0);
  }
  close(fd);
  if (dog > 0) {
    kill(dog, SIGKILL);
    waitpid(dog, NULL, 0);
  }
  // AF_SMC's close waits for the peer's side of the SMC close (and for the
  // link group's LLC flows): a peer that leaves it hanging shows here.
  printf("af_smc_echo: client close_secs=%.2f\n", now() - t2);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  signal(SIGALRM, on_alarm);
  const char *t = getenv("AF_SMC_ECHO_TIMEOUT");
  alarm(t ? (unsigned)atoi(t) : 120);
  if (argc >= 4 && strcmp(argv[1], "server") == 0)
    return server(argv[2], argv[3], argc >= 5 ? atoi(argv[4]) : 1);
  if (argc == 5 && strcmp(argv[1], "client") == 0) {
    char *end;
    uint64_t n = strtoull(argv[4], &end, 10);
    if (*end == 'K' || *end == 'k') n <<= 10;
    else if (*end == 'M' || *end == 'm') n <<= 20;
    return client(argv[2], argv[3], n);
  }
  fprintf(stderr, "usage: af_smc_echo server IP PORT [CONNS] | af_smc_echo client IP PORT BYTES[K|M]\n");
  return 2;
}
