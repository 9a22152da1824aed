// A deliberately misbehaving SMC-R peer for the fallback tests. It opts its
// socket in through the eBPF program (so the TCP option handshake says
// "both SMC-R"), then speaks broken or declining CLC. After a Decline it
// behaves as a plain TCP echo peer so the test can prove the application's
// bytes arrived intact; after a protocol error (bytes that are not a valid
// CLC message) it reports how the connection ended and whether any byte came
// back. It never runs under the shim.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "bpf/option.h"
#include "core/clc.h"
#include "core/fabric_shm.h"

namespace {

using namespace smcr;

[[noreturn]] void die(const char* what) {
  fprintf(stderr, "fake_peer: %s: %s\n", what, strerror(errno));
  exit(2);
}

bool read_exact(int fd, uint8_t* p, size_t n, int timeout_ms = 10000) {
  while (n > 0) {
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, timeout_ms) <= 0) return false;
    ssize_t k = read(fd, p, n);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool write_all(int fd, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Reads one CLC message (header, then the rest by its length).
std::vector<uint8_t> read_clc(int fd) {
  std::vector<uint8_t> m(clc::kHeaderLen);
  if (!read_exact(fd, m.data(), m.size())) return {};
  auto h = clc::decode_header(m);
  if (!h) return {};
  m.resize(h->length);
  if (!read_exact(fd, m.data() + clc::kHeaderLen, h->length - clc::kHeaderLen)) return {};
  return m;
}

void echo_until_eof(int fd) {
  char buf[65536];
  for (;;) {
    ssize_t k = read(fd, buf, sizeof buf);
    if (k <= 0) break;
    if (!write_all(fd, buf, static_cast<size_t>(k))) break;
  }
}

// Random bytes that do not begin like a CLC message (either eyecatcher).
std::vector<uint8_t> random_bytes(size_t n) {
  std::vector<uint8_t> b(n);
  FILE* f = fopen("/dev/urandom", "rb");
  if (!f || fread(b.data(), 1, n, f) != n) die("/dev/urandom");
  fclose(f);
  if (clc::starts_like_clc(b)) b[0] ^= 0xFF;
  return b;
}

clc::Decline make_decline(uint32_t code) {
  clc::Decline d;
  d.peer_id = {0x12, 0x34, 0x02, 0, 0, 0, 0, 0x0B};
  d.diagnosis = code;
  return d;
}

int serve(int port, const std::string& behaviour, int count) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (!bpfopt::opt_in(lfd)) die("opt_in (is the eBPF program loaded?)");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(lfd, 16) != 0) die("bind/listen");
  for (int i = 0; i < count; ++i) {
    int fd = accept(lfd, nullptr, nullptr);
    if (fd < 0) die("accept");
    auto res = bpfopt::read_result(fd);
    fprintf(stderr, "fake_peer: accepted, option result %s\n", bpfopt::to_string(res));
    std::vector<uint8_t> prop = read_clc(fd);
    if (prop.empty() || prop[4] != 1) {
      fprintf(stderr, "fake_peer: no Proposal from the client\n");
      close(fd);
      continue;
    }
    // FAKE_PEER_DELAY_MS: a slow server, its answer that late (the client's
    // handshake goes on a thread after connect() returned).
    if (const char* d = getenv("FAKE_PEER_DELAY_MS")) usleep(static_cast<useconds_t>(atoi(d)) * 1000);
    if (behaviour == "decline") {
      write_all(fd, clc::encode(make_decline(clc::decline::kNoSmcRDevice)).data(), 28);
      echo_until_eof(fd);
    } else if (behaviour == "split-decline") {
      // The Decline in two segments 50 ms apart, cut after FAKE_PEER_SPLIT_AT
      // bytes (inside the header, or after it): the reader must wait for
      // the rest, neither taking the part as a message nor spinning on it.
      auto bytes = clc::encode(make_decline(clc::decline::kNoSmcRDevice));
      const char* at_env = getenv("FAKE_PEER_SPLIT_AT");
      size_t at = std::min<size_t>(at_env ? static_cast<size_t>(atoi(at_env)) : 5, bytes.size() - 1);
      int nodelay = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof nodelay);
      write_all(fd, bytes.data(), at);
      usleep(50000);
      write_all(fd, bytes.data() + at, bytes.size() - at);
      echo_until_eof(fd);
    } else if (behaviour == "garbage" || behaviour == "random-accept") {
      // Not CLC where the Accept belongs: a greeting, or 68 random bytes
      // (an Accept's size). A protocol error: the client resets, and its
      // application never sees these bytes.
      std::vector<uint8_t> bytes;
      if (behaviour == "garbage") {
        const char banner[] = "NOT-SMC-BANNER\n";
        bytes.assign(banner, banner + sizeof banner - 1);
      } else {
        bytes = random_bytes(clc::kAcceptConfirmLen);
      }
      write_all(fd, bytes.data(), bytes.size());
      echo_until_eof(fd);
    } else if (behaviour == "reserved-mtu") {
      clc::AcceptConfirm acc;
      acc.type = clc::Type::kAccept;
      acc.first_contact = true;
      acc.qpn = 0x108;
      acc.rmbe_index = 1;
      acc.rmbe_size_code = 2;
      acc.mtu_code = 3;
      auto bytes = clc::encode(acc);
      bytes[50] = 0x27;  // MTU code 7: reserved
      write_all(fd, bytes.data(), bytes.size());
      std::vector<uint8_t> reply = read_clc(fd);
      bool declined = reply.size() == clc::kDeclineLen && reply[4] == 4;
      fprintf(stderr, "fake_peer: client answered the reserved MTU with %s\n", declined ? "a Decline" : "something else");
      if (!declined) {
        close(fd);
        return 1;
      }
      echo_until_eof(fd);
    } else if (behaviour == "silent") {
      pause();
    } else {
      fprintf(stderr, "fake_peer: unknown behaviour %s\n", behaviour.c_str());
      return 2;
    }
    close(fd);
  }
  return 0;
}

// Client roles: connect opted in, misbehave, then check the echo.
int client(int port, const std::string& behaviour) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (!bpfopt::opt_in(fd)) die("opt_in (is the eBPF program loaded?)");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
  fprintf(stderr, "fake_peer: connected, option result %s\n", bpfopt::to_string(bpfopt::read_result(fd)));
  // FAKE_PEER_DELAY_MS: a slow client, silent for a while after connecting
  // (the server's accept() must not wait for it).
  if (const char* d = getenv("FAKE_PEER_DELAY_MS")) usleep(static_cast<useconds_t>(atoi(d)) * 1000);
  if (behaviour == "silent") {
    // Never speaks: the server must give up on the CLC and reset us.
    char c;
    pollfd pf{fd, POLLIN, 0};
    int r = poll(&pf, 1, 20000);
    ssize_t k = r > 0 ? read(fd, &c, 1) : -2;
    printf("silent client: %s\n", k == 0 ? "eof" : k == -1 ? strerror(errno) : k == -2 ? "nothing in 20 s" : "bytes");
    close(fd);
    return k == -2 ? 1 : 0;
  }
  if (behaviour == "half-proposal" || behaviour == "no-confirm") {
    // A stalled handshake: half of a Proposal, or a whole one naming this
    // host's shared-memory fabric (a first contact) and then no Confirm.
    // Holds on until the server gives up (end of stream or a reset) or 20 s.
    clc::Proposal p;
    p.peer_id = shm_identity().peer_id;
    p.gid = shm_identity().gid;
    p.mac = shm_identity().mac;
    p.ipv4_subnet = 0x7f000000;
    p.ipv4_prefix_len = 8;
    auto bytes = clc::encode(p);
    size_t n = behaviour == "half-proposal" ? bytes.size() / 2 : bytes.size();
    write_all(fd, bytes.data(), n);
    std::string got;
    char buf[4096];
    pollfd pf{fd, POLLIN, 0};
    int64_t waited = 0;
    ssize_t k = 1;
    while (waited < 20000 && k > 0) {
      if (poll(&pf, 1, 100) > 0) {
        k = read(fd, buf, sizeof buf);
        if (k > 0) got.append(buf, static_cast<size_t>(k));
      }
      waited += 100;
    }
    printf("%s client: %s after %zu bytes from the server\n", behaviour.c_str(),
           k == 0 ? "eof" : k < 0 ? strerror(errno) : "nothing in 20 s", got.size());
    close(fd);
    return 0;
  }
  if (behaviour == "garbage" || behaviour == "malformed" || behaviour == "bad-eyecatcher" ||
      behaviour == "random") {
    // A protocol error where the Proposal belongs (RFC 7609 C.5): bytes that
    // are not CLC, a Proposal with a bad trailing or leading eyecatcher, or
    // random bytes. The server must reset the connection (a RST: the read
    // here fails with ECONNRESET, no end of file first) without handing
    // any of them to its application (an echo server would send them back)
    // and without a Decline (which would mean "go on over TCP").
    std::vector<uint8_t> bytes;
    if (behaviour == "garbage") {
      const char req[] = "GET / HTTP/1.0\r\n\r\napplication bytes\n";
      bytes.assign(req, req + sizeof req - 1);
    } else if (behaviour == "random") {
      bytes = random_bytes(52);
    } else {
      clc::Proposal p;
      p.ipv4_subnet = 0x7f000000;
      p.ipv4_prefix_len = 8;
      bytes = clc::encode(p);
      if (behaviour == "malformed") bytes[bytes.size() - 1] ^= 0xFF;
      else bytes[0] ^= 0xFF;
    }
    write_all(fd, bytes.data(), bytes.size());
    std::string got;
    char buf[4096];
    ssize_t k = 1;
    for (int waited = 0; waited < 20000 && k > 0; waited += 100) {
      pollfd pf{fd, POLLIN, 0};
      if (poll(&pf, 1, 100) > 0) {
        k = read(fd, buf, sizeof buf);
        if (k > 0) got.append(buf, static_cast<size_t>(k));
      }
    }
    const bool reset = k < 0 && errno == ECONNRESET;
    const char* end = k == 0 ? "eof" : k < 0 ? strerror(errno) : "nothing in 20 s";
    printf("%s client: %s after %zu bytes from the server\n", behaviour.c_str(), end, got.size());
    close(fd);
    return got.empty() && reset ? 0 : 1;
  }
  std::string payload = "application bytes that must arrive intact\n";
  if (behaviour == "smcd-proposal") {
    // Linux's SMC-D-only framing: CLC, offering no SMC-R. The server must
    // answer it with a Decline and fall back.
    clc::Proposal p;
    p.ipv4_subnet = 0x7f000000;
    p.ipv4_prefix_len = 8;
    auto bytes = clc::encode(p);
    bytes[3] = bytes[bytes.size() - 1] = clc::kSmcdEyecatcher[3];
    write_all(fd, bytes.data(), bytes.size());
    std::vector<uint8_t> reply = read_clc(fd);
    bool declined = reply.size() == clc::kDeclineLen && reply[4] == 4;
    fprintf(stderr, "fake_peer: server answered the SMC-D Proposal with %s\n", declined ? "a Decline" : "something else");
    if (!declined) return 1;
  } else if (behaviour == "v2-proposal") {
    // Like a Linux client with a UEID on RoCE v2: an SMC-Rv2-only Proposal
    // (V12's shape). The server declines it in version 2 (44 bytes, as a
    // Linux server answers the Proposal's version) and falls back.
    clc::Proposal p;
    p.offers_smcr_v1 = false;
    p.v2 = clc::SmcrV2Offer{};
    p.v2->roce_gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, 1};
    p.v2->max_conns = 255;
    p.v2->max_links = 2;
    clc::Ueid u;
    u.fill(' ');
    const char name[] = "SMCR-FAKE-PEER";
    std::copy(name, name + sizeof name - 1, u.begin());
    p.v2->ueids = {u};
    auto bytes = clc::encode(p);
    write_all(fd, bytes.data(), bytes.size());
    std::vector<uint8_t> reply = read_clc(fd);
    auto d = clc::decode_decline(reply);
    bool v2_decline = d && d->version == 2 && reply.size() == clc::kDeclineV2Len;
    fprintf(stderr, "fake_peer: server answered the v2 Proposal with %s (%zu bytes)\n",
            v2_decline ? "a v2 Decline" : d ? "a v1 Decline" : "something else", reply.size());
    if (!v2_decline) return 1;
  } else if (behaviour == "decline") {
    // Like a Linux client without a usable device: Decline instead of a Proposal.
    write_all(fd, clc::encode(make_decline(clc::decline::kNoSmcDevice)).data(), 28);
  } else {
    fprintf(stderr, "fake_peer: unknown behaviour %s\n", behaviour.c_str());
    return 2;
  }
  write_all(fd, payload.data(), payload.size());
  shutdown(fd, SHUT_WR);
  std::string echoed;
  char buf[4096];
  for (;;) {
    ssize_t k = read(fd, buf, sizeof buf);
    if (k <= 0) break;
    echoed.append(buf, static_cast<size_t>(k));
  }
  close(fd);
  if (echoed != payload) {
    fprintf(stderr, "fake_peer: echo mismatch: sent %zu bytes, got %zu: '%s'\n", payload.size(), echoed.size(), echoed.c_str());
    return 1;
  }
  printf("echo intact (%zu bytes)\n", echoed.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc < 4) {
    fprintf(stderr, "usage: fake_peer server|client PORT BEHAVIOUR [COUNT]\n"
                    "  server behaviours: decline split-decline garbage random-accept reserved-mtu silent\n"
                    "  client behaviours: decline smcd-proposal v2-proposal garbage malformed bad-eyecatcher random\n"
                    "                     silent half-proposal no-confirm\n"
                    "  (FAKE_PEER_DELAY_MS: a client waits that long first, a server before its answer)\n");
    return 2;
  }
  std::string role = argv[1];
  int port = atoi(argv[2]);
  if (role == "server") return serve(port, argv[3], argc > 4 ? atoi(argv[4]) : 1);
  return client(port, argv[3]);
}
