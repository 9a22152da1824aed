#include "core/handshake_internal.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "core/cdc_mem.h"
#include "core/clc.h"
#include "core/connection.h"
#include "core/env.h"
#include "core/fabric_shm.h"
#include "core/link_group.h"
#include "core/llc.h"
#include "core/peer_fd.h"
#include "core/process.h"
#include "core/random.h"
#include "core/rmb.h"
#include "core/sys.h"

namespace smcr {

constinit thread_local uint32_t t_rmb_size = 0;  // handshake_internal.h
constinit thread_local int t_bell_fd = -1;
uint32_t conn_rmb_size() { return t_rmb_size ? t_rmb_size : handshake_config().rmb_size; }

int rkey_exchange_budget_ms(int64_t deadline, int64_t margin_ms) {
  int64_t left = deadline - margin_ms - sys::now_ms();
  return static_cast<int>(std::clamp<int64_t>(left, 0, handshake_config().llc_timeout_ms));
}

// Kernel randomness, fetched 256 bytes at a time: a token per connection
// would otherwise cost a system call per handshake. A forked child's pool
// is refilled (it must not repeat its parent's tokens). False when the
// kernel gives none (core/random.h): the handshake then declines.
bool random_u32(uint32_t* out) {
  struct Pool {
    uint32_t words[64];
    size_t left = 0;
    uint64_t generation = 0;
  };
  thread_local Pool pool;
  if (pool.left == 0 || pool.generation != process_generation()) {
    pool.left = 0;
    if (!random_bytes(pool.words, sizeof pool.words)) return false;
    pool.left = std::size(pool.words);
    pool.generation = process_generation();
  }
  *out = pool.words[--pool.left];
  pool.words[pool.left] = 0;  // used once
  return true;
}

bool random_nonzero_u24(uint32_t* out) {
  do {
    if (!random_u32(out)) return false;
    *out &= 0xFFFFFF;
  } while (*out == 0);
  return true;
}

// ------------------------------------------------------------ TCP byte I/O

bool send_all(int fd, const std::vector<uint8_t>& bytes, int64_t deadline) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = sys::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
    int64_t left = deadline - sys::now_ms();
    if (left <= 0) {
      errno = ETIMEDOUT;
      return false;
    }
    pollfd p{fd, POLLOUT, 0};
    sys::poll(&p, 1, static_cast<int>(left));
  }
  return true;
}

// SMCR_CLC_SPIN_US (0: never; default 100): how long a handshake watches
// for the peer's next CLC message before it sleeps.
int64_t clc_spin_ns() {
  static const int64_t ns = int64_t{1000} * env_long("SMCR_CLC_SPIN_US", 100, 0, 10000);
  return ns;
}

// The waits for a CLC answer in this process: how their spins have fared.
SpinBackoff g_answer_spins;

namespace {

// Waits until `want` bytes can be peeked (SO_RCVLOWAT makes poll wait for
// all of them instead of waking per segment).
Recv peek_bytes(int fd, uint8_t* buf, size_t want, int64_t deadline, size_t* got) {
  bool lowat_set = false;
  Recv result = Recv::kTimeout;
  for (;;) {
    ssize_t n = sys::recv(fd, buf, want, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) {
      result = Recv::kEof;
      break;
    }
    if (n > 0) {
      *got = static_cast<size_t>(n);
      // Enough to decide that this is not CLC? Then do not wait for more.
      if (!clc::starts_like_clc(std::span<const uint8_t>(buf, *got)) || *got >= want) {
        result = Recv::kMessage;
        break;
      }
    } else if (errno != EAGAIN && errno != EINTR) {
      result = Recv::kError;
      break;
    }
    int64_t left = deadline - sys::now_ms();
    if (left <= 0) break;
    if (!lowat_set) {  // only when we must wait: usually the bytes are there
      int lowat = static_cast<int>(want);
      sys::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
      lowat_set = true;
    }
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    sys::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 50)));
  }
  if (lowat_set) {
    int one = 1;
    sys::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
  }
  return result;
}

}  // namespace

constinit thread_local PeekedMessage t_peeked;

// Reads one whole CLC message from the stream, or leaves the stream untouched
// when the next bytes are not CLC (so the application still gets them).
Recv recv_clc(int fd, int64_t deadline, std::vector<uint8_t>* out, clc::Header* hdr, bool spin) {
  if (t_peeked.fd == fd) {
    // Nobody else reads the socket before accept() returns it: the bytes
    // are those seen, decoded again from what is read.
    size_t length = t_peeked.length;
    t_peeked = {};
    out->assign(length, 0);
    if (sys::recv(fd, out->data(), length, MSG_DONTWAIT) != static_cast<ssize_t>(length)) return Recv::kError;
    clc::DecodeError err;
    auto h = clc::decode_header(std::span<const uint8_t>(out->data(), length), &err);
    if (!h || h->length != length) return Recv::kMalformedHeader;
    *hdr = *h;
    return Recv::kMessage;
  }
  // Usually the whole message is queued at once: one peek shows it; else
  // watch for it a while (ClcSpin) before sleeping.
  ClcSpin watch(spin, &g_answer_spins);
  for (;;) {
    uint8_t quick[512];
    ssize_t n = sys::recv(fd, quick, sizeof quick, MSG_PEEK | MSG_DONTWAIT);
    clc::DecodeError err;
    auto h = n >= static_cast<ssize_t>(clc::kHeaderLen) ? clc::decode_header(std::span<const uint8_t>(quick, static_cast<size_t>(n)), &err)
                                                         : std::nullopt;
    if (h && h->length <= static_cast<size_t>(n)) {
      out->assign(h->length, 0);
      if (sys::recv(fd, out->data(), h->length, MSG_DONTWAIT) != static_cast<ssize_t>(h->length)) return Recv::kError;
      *hdr = *h;
      return Recv::kMessage;
    }
    // Part of a message, not CLC, end of stream or an error: the careful
    // path below decides.
    if (n >= 0 || (errno != EAGAIN && errno != EINTR)) break;
    if (watch.again()) continue;
    // Nothing yet: sleep until the first bytes come. A CLC message from a
    // peer on this host arrives whole, so the quick look above usually
    // takes it; a part of one goes the careful way (SO_RCVLOWAT).
    int64_t left = deadline - sys::now_ms();
    if (left <= 0) return Recv::kTimeout;
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    sys::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 50)));
  }
  uint8_t head[clc::kHeaderLen];
  size_t got = 0;
  Recv r = peek_bytes(fd, head, sizeof head, deadline, &got);
  if (r != Recv::kMessage) return r;
  if (!clc::starts_like_clc(std::span<const uint8_t>(head, got))) return Recv::kNotClc;
  clc::DecodeError err;
  auto h = clc::decode_header(std::span<const uint8_t>(head, got), &err);
  if (!h) return Recv::kMalformedHeader;
  out->assign(h->length, 0);
  r = peek_bytes(fd, out->data(), h->length, deadline, &got);
  if (r != Recv::kMessage) return r;
  if (got < h->length) return Recv::kTimeout;
  ssize_t n = sys::recv(fd, out->data(), h->length, MSG_DONTWAIT);
  if (n != static_cast<ssize_t>(h->length)) return Recv::kError;
  *hdr = *h;
  return Recv::kMessage;
}

// ------------------------------------------------------------ outcomes

HandshakeOutcome fallback(Fallback why, uint32_t diag) {
  HandshakeOutcome o;
  o.kind = HandshakeOutcome::Kind::kFallback;
  o.reason = why;
  o.diagnosis = diag;
  return o;
}

HandshakeOutcome terminate(Fallback why, int error) {
  HandshakeOutcome o;
  o.kind = HandshakeOutcome::Kind::kTerminate;
  o.reason = why;
  o.error = error;
  return o;
}

// After send_all() failed (errno): the deadline passed, or the peer has
// hung up (a client that closed at once, as a port probe does).
HandshakeOutcome send_failed() {
  if (errno == ETIMEDOUT) return terminate(Fallback::kTimeout, ETIMEDOUT);
  SMCR_LOG(1, "CLC: the peer hung up (%s)", strerror(errno));
  return terminate(Fallback::kPeerNotClc, errno == EPIPE ? ECONNRESET : errno);
}

// Sends a Decline instead of our next CLC message and falls back (RFC C.1).
// `version`: a server declining a version-2 Proposal answers in version 2, as
// Linux does (44 bytes); everything else is RFC 7609's 28.
HandshakeOutcome decline(int fd, uint32_t code, Fallback why, int64_t deadline, uint8_t version) {
  clc::Decline d;
  d.peer_id = shm_identity().peer_id;
  d.diagnosis = code;
  if (version >= 2) {
    d.version = 2;
    d.os_type = clc::kOsLinux;
  }
  SMCR_LOG(1, "CLC: declining (%08x %.*s)", code, static_cast<int>(clc::decline_reason(code).size()),
           clc::decline_reason(code).data());
  if (!send_all(fd, clc::encode(d), deadline)) return errno == ETIMEDOUT ? terminate(why, ETIMEDOUT) : send_failed();
  return fallback(why, code);
}

// This side cannot make the secrets or identifiers a connection needs
// (random.h logged why, once): a Decline, as for any local failure.
HandshakeOutcome decline_no_randomness(int fd, int64_t deadline, uint8_t version) {
  return decline(fd, clc::decline::kInternalError, Fallback::kInternal, deadline, version);
}

namespace {

// A protocol error (RFC 7609 C.5): once both ends offered SMC-R, what the
// peer sent where a CLC message belongs is neither a message we can take nor
// application data. The TCP connection ends with a reset, as Linux ends it
// (-EPROTO: no Decline, no fallback); the bytes never reach the
// application. Said even without SMCR_DEBUG (the first few, then every
// 1024th): a peer that does this is broken or hostile.
HandshakeOutcome protocol_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
HandshakeOutcome protocol_error(const char* fmt, ...) {
  static std::atomic<uint64_t> said{0};
  uint64_t n = said.fetch_add(1, std::memory_order_relaxed);
  if (n < 8 || n % 1024 == 0 || log_level() >= 1) {
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    log_write(0, "CLC protocol error: %s: connection reset (protocol errors so far: %llu)", what,
              static_cast<unsigned long long>(n + 1));
  }
  return terminate(Fallback::kProtocolError, ECONNRESET);
}

}  // namespace

// A CLC message that did not decode: a reserved value gets a Decline and
// both fall back (RFC C.6); anything else is a protocol error.
HandshakeOutcome undecodable(int fd, const char* what, clc::DecodeError err, int64_t deadline) {
  if (err == clc::DecodeError::kReservedValue) {
    SMCR_LOG(1, "CLC: %s with a reserved value: declining", what);
    return decline(fd, clc::decline::kProtocolError, Fallback::kReservedValue, deadline);
  }
  return protocol_error("malformed %s (%.*s)", what, static_cast<int>(clc::to_string(err).size()),
                        clc::to_string(err).data());
}

HandshakeOutcome from_unexpected(int fd, Recv r, const std::vector<uint8_t>& msg, const clc::Header& h,
                                 int64_t deadline, const char* waiting_for) {
  switch (r) {
    case Recv::kNotClc:
      return protocol_error("the peer sent bytes that are not CLC where its %s belongs", waiting_for);
    case Recv::kEof:
      SMCR_LOG(1, "CLC: peer closed while we waited for %s", waiting_for);
      return fallback(Fallback::kPeerNotClc);
    case Recv::kTimeout:
      SMCR_LOG(1, "CLC: timeout waiting for %s", waiting_for);
      return terminate(Fallback::kTimeout, ETIMEDOUT);
    case Recv::kMalformedHeader:
      // Cannot tell where the message ends either.
      return protocol_error("malformed CLC header where the peer's %s belongs", waiting_for);
    case Recv::kError:
      return terminate(Fallback::kInternal, errno ? errno : ECONNRESET);
    case Recv::kMessage:
      break;
  }
  if (h.type == clc::Type::kDecline) {
    clc::DecodeError err;
    auto d = clc::decode_decline(msg, &err);
    if (!d) return undecodable(fd, "Decline", err, deadline);
    SMCR_LOG(1, "CLC: peer declined (%08x %.*s) instead of %s", d->diagnosis,
             static_cast<int>(clc::decline_reason(d->diagnosis).size()), clc::decline_reason(d->diagnosis).data(),
             waiting_for);
    return fallback(Fallback::kPeerDeclined, d->diagnosis);
  }
  return protocol_error("a CLC message of type %d where the peer's %s belongs", static_cast<int>(h.type),
                        waiting_for);
}

namespace {

// The IPv4 subnet of the interface that owns `addr` (RFC 3.5.1.2; Linux
// sends the subnet number).
void fill_ip_area_uncached(sockaddr_storage ss, clc::Proposal* p) {
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return;
  if (ss.ss_family == AF_INET) {
    uint32_t local = ntohl(reinterpret_cast<sockaddr_in*>(&ss)->sin_addr.s_addr);
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != AF_INET) continue;
      uint32_t a = ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
      uint32_t m = ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr);
      if (a != local) continue;
      p->ipv4_subnet = a & m;
      p->ipv4_prefix_len = static_cast<uint8_t>(__builtin_popcount(m));
      break;
    }
  } else if (ss.ss_family == AF_INET6) {
    auto* l6 = reinterpret_cast<sockaddr_in6*>(&ss);
    const char* owner = nullptr;
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6) continue;
      if (std::memcmp(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, &l6->sin6_addr, 16) == 0) {
        owner = i->ifa_name;
        break;
      }
    }
    for (ifaddrs* i = ifs; owner && i && p->ipv6_prefixes.size() < 8; i = i->ifa_next) {
      if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != AF_INET6 || strcmp(i->ifa_name, owner) != 0)
        continue;
      auto* a = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
      auto* m = reinterpret_cast<sockaddr_in6*>(i->ifa_netmask);
      if (IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr)) continue;
      clc::Ipv6Prefix pre;
      uint8_t bits = 0;
      for (int k = 0; k < 16; ++k) {
        pre.prefix[k] = a->sin6_addr.s6_addr[k] & m->sin6_addr.s6_addr[k];
        bits = static_cast<uint8_t>(bits + __builtin_popcount(m->sin6_addr.s6_addr[k]));
      }
      pre.prefix_len = bits;
      p->ipv6_prefixes.push_back(pre);
    }
  }
  freeifaddrs(ifs);
}

}  // namespace

// The interface table is read (two netlink dumps) at most once a second per
// local address: a client opening many connections asks the same question.
void fill_ip_area(const sockaddr_storage& ss, clc::Proposal* p) {
  struct Cached {
    sockaddr_storage addr{};
    int64_t at_ms = 0;
    uint32_t ipv4_subnet = 0;
    uint8_t ipv4_prefix_len = 0;
    std::vector<clc::Ipv6Prefix> ipv6_prefixes;
  };
  static std::mutex mu;
  static Cached cache;
  auto same = [&](const sockaddr_storage& a) {
    if (a.ss_family != ss.ss_family) return false;
    if (ss.ss_family == AF_INET)
      return reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr ==
             reinterpret_cast<const sockaddr_in&>(ss).sin_addr.s_addr;
    return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr,
                       &reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr, 16) == 0;
  };
  int64_t now = sys::now_ms();
  // try_lock: a child forked while another thread held it must not hang.
  if (std::unique_lock<std::mutex> lock(mu, std::try_to_lock); lock.owns_lock()) {
    if (cache.at_ms && now - cache.at_ms < 1000 && same(cache.addr)) {
      p->ipv4_subnet = cache.ipv4_subnet;
      p->ipv4_prefix_len = cache.ipv4_prefix_len;
      p->ipv6_prefixes = cache.ipv6_prefixes;
      return;
    }
  }
  fill_ip_area_uncached(ss, p);
  std::unique_lock<std::mutex> lock(mu, std::try_to_lock);
  if (!lock.owns_lock()) return;
  cache.addr = ss;
  cache.at_ms = now;
  cache.ipv4_subnet = p->ipv4_subnet;
  cache.ipv4_prefix_len = p->ipv4_prefix_len;
  cache.ipv6_prefixes = p->ipv6_prefixes;
}

bool local_address(int fd, sockaddr_storage* ss) {
  socklen_t len = sizeof *ss;
  return sys::getsockname(fd, reinterpret_cast<sockaddr*>(ss), &len) == 0;
}

// The handshake succeeded: the link becomes a link group, the RMBs a
// connection, and the engine starts watching the link.
// Our Accept or Confirm: the link we name (GID, MAC, QPN, PSN, MTU) and our
// RMB (RToken, RMBE index 1, Bsize) with a fresh alert token. Every path
// names its RMB here, so here (before the message leaves) our bell is
// named in the RMB's control page too (publish_bell).
clc::AcceptConfirm rmb_message(clc::Type type, bool first_contact, const LinkIdentity& link, uint32_t psn,
                               const LocalRmb& rmb, uint32_t alert_token) {
  clc::AcceptConfirm m;
  m.type = type;
  m.first_contact = first_contact;
  m.peer_id = shm_identity().peer_id;
  m.gid = link.gid;
  m.mac = link.mac;
  m.qpn = link.qpn;
  m.rmb_rkey = rmb.rkey;
  m.rmbe_index = 1;
  m.rmbe_alert_token = alert_token;
  m.rmbe_size_code = rmb::encode_size(rmb.size);
  m.mtu_code = link.mtu_code;
  m.rmb_vaddr = rmb.vaddr;
  m.psn = psn;
  publish_bell(rmb, alert_token);
  return m;
}

void publish_bell(const LocalRmb& rmb, uint32_t alert_token) {
  // shm only (a control page); one fstat per connection, which the peer's
  // fetch checks against (the number may name another file by then).
  if (!rmb.control || t_bell_fd < 0 || !peer_fd::enabled()) return;
  struct stat st {};
  if (sys::fstat(t_bell_fd, &st) != 0) return;
  cdcmem::publish_bell(rmb.control, alert_token,
                       cdcmem::BellRecord{static_cast<uint32_t>(current_pid()), static_cast<uint32_t>(t_bell_fd),
                                          static_cast<uint64_t>(st.st_ino)});
}

// Drawn before the RMB and link it will name are set up: a handshake that
// cannot have one declines with nothing to undo.
bool new_alert_token(uint32_t* token) {
  if (!random_u32(token)) return false;
  *token |= 1;
  return true;
}

// The handshake succeeded on `group`: the RMBs become a connection on the
// group's primary link.
HandshakeOutcome establish_on(LinkGroup* group, ConnRmbs* rmbs, uint32_t local_token, uint32_t peer_token, int tcp_fd,
                              bool first_contact) {
  ConnectionSetup s;
  s.group = group;
  s.slot = group->primary_slot();
  s.rmbs = rmbs->local;
  s.peer_rmbs = rmbs->peer;
  s.local_token = local_token;
  s.peer_token = peer_token;
  s.rmbe_base = group->rmbe_base();
  s.tcp_fd = tcp_fd;
  s.active = group->role() == Role::kClient;
  s.rmb_memfd = rmbs->memfd;
  s.peer_rmb_memfd = rmbs->peer_memfd;
  *rmbs = ConnRmbs{};  // owned by the connection now
  HandshakeOutcome o;
  o.kind = HandshakeOutcome::Kind::kSmc;
  o.conn = Connection::create(s);
  (s.active ? counters().smc_active : counters().smc_passive).fetch_add(1);
  (first_contact ? counters().lgr_created : counters().lgr_reused).fetch_add(1);
  SMCR_LOG(1, "CLC: %s SMC-R%s over %s, %s contact (token %08x, RMB %u, peer RMB %u, links %d)",
           s.active ? "client" : "server", group->llc_version() == llc::v2::kVersion ? "v2" : "",
           group->link()->fabric_name(), first_contact ? "first" : "subsequent",
           local_token, s.rmbs[static_cast<size_t>(s.slot)].size, s.peer_rmbs[static_cast<size_t>(s.slot)].size,
           group->links_up());
  return o;
}

// SMCR_MAX_LINKS=1 keeps groups to one link (no ADD LINK); default 2.
uint8_t max_links() {
  static const uint8_t n = [] {
    const char* v = env("SMCR_MAX_LINKS");
    return static_cast<uint8_t>(v && strcmp(v, "1") == 0 ? 1 : kMaxGroupLinks);
  }();
  return n;
}

uint32_t rmb_size_for(const HandshakeRequest& req) {
  if (req.rmb_size) return *rmb::decode_size(rmb::encode_size(req.rmb_size));  // the application's SO_RCVBUF
  const HandshakeConfig& cfg = handshake_config();
  if (cfg.rmb_size_fixed) return cfg.rmb_size;
  return rmb::size_under_budget(cfg.rmb_size, Connection::live(), cfg.rmb_budget);
}

const HandshakeConfig& handshake_config() {
  static const HandshakeConfig cfg = [] {
    HandshakeConfig c;
    if (const char* v = env("SMCR_CLC_TIMEOUT_MS")) {
      long ms = strtol(v, nullptr, 10);
      if (ms >= 10 && ms <= 600000) c.timeout_ms = static_cast<int>(ms);
      else SMCR_LOG(1, "SMCR_CLC_TIMEOUT_MS=%s ignored (10..600000)", v);
    }
    if (const char* v = env("SMCR_RMB_SIZE")) {
      char* end = nullptr;
      unsigned long b = strtoul(v, &end, 10);
      if (end && (*end == 'k' || *end == 'K')) b *= 1024;
      if (b >= rmb::kMinSize && b <= rmb::kMaxSize) {
        c.rmb_size = *rmb::decode_size(rmb::encode_size(static_cast<uint32_t>(b)));
        c.rmb_size_fixed = true;
      } else {
        SMCR_LOG(1, "SMCR_RMB_SIZE=%s ignored (16K..512K)", v);
      }
    }
    c.rmb_budget = static_cast<size_t>(env_long("SMCR_RMB_BUDGET_MB", 32, 0, 1 << 20)) << 20;
    return c;
  }();
  return cfg;
}

bool client_spoke(int tcp_fd, SpinBackoff* backoff) {
  ClcSpin watch(true, backoff);
  do {
    uint8_t b;
    ssize_t n = sys::recv(tcp_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n >= 0 || (errno != EAGAIN && errno != EINTR)) return true;  // bytes, EOF or an error: decide now
  } while (watch.again());
  return false;
}

#ifndef SMCR_HAVE_VERBS
// ------------------------------------------------ without the verbs fabric
// rdma-core's headers were not found: handshake_verbs.cc is not built and
// these stand in for its steps (handshake_internal.h). No verbs port is ever
// chosen and no group has a verbs link, so only verbs_server_prepare, for a
// client that names a GID of another host, is reached: it declines.

bool verbs_fabric_built() { return false; }

VerbsPortRef verbs_client_offer(int, bool, const sockaddr_storage&, const sockaddr_storage&, clc::Proposal*) {
  return nullptr;
}

std::optional<HandshakeOutcome> verbs_client_setup(int fd, const VerbsPort&, const clc::AcceptConfirm&, uint32_t,
                                                   int64_t deadline, FabricSetup*) {
  return decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline);
}

void verbs_client_add_second_link(LinkGroup*, Link*, const clc::AcceptConfirm&, uint32_t, ConnRmbs*,
                                  std::optional<std::array<uint8_t, 44>>*) {}

std::optional<HandshakeOutcome> verbs_server_prepare(int fd, const std::optional<clc::Ece>&, bool,
                                                     uint8_t answer_version, int64_t deadline, FabricSetup*) {
  return decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline, answer_version);
}

std::optional<HandshakeOutcome> verbs_server_complete(int fd, const clc::AcceptConfirm&, uint32_t, int64_t deadline,
                                                      FabricSetup*) {
  return decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline);
}

std::optional<SecondLink> verbs_server_add_second_link(Link*, const LocalRmb&, const clc::AcceptConfirm&, uint32_t) {
  return std::nullopt;
}

#endif

}  // namespace smcr
