#include "core/handshake.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <variant>
#include <vector>

#include "core/clc.h"
#include "core/connection.h"
#include "core/cpu_relax.h"
#include "core/engine.h"
#include "core/env.h"
#include "core/fabric_shm.h"
#ifdef SMCR_HAVE_VERBS
#include "core/fabric_verbs.h"
#endif
#include "core/link_group.h"
#include "core/llc.h"
#include "core/random.h"
#include "core/rmb.h"
#include "core/smc_v2.h"
#include "core/sys.h"

namespace smcr {

namespace {

// The RMB size of the handshake running on this thread (handshakes run on the
// application thread inside connect()/accept(), one at a time per thread).
thread_local uint32_t t_rmb_size = 0;
struct ScopedRmbSize {
  explicit ScopedRmbSize(uint32_t size) { t_rmb_size = size; }
  ~ScopedRmbSize() { t_rmb_size = 0; }
};
uint32_t conn_rmb_size() { return t_rmb_size ? t_rmb_size : handshake_config().rmb_size; }


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

enum class Recv { kMessage, kNotClc, kMalformedHeader, kEof, kTimeout, kError };

// SMCR_CLC_SPIN_US (0: never; default 100): how long a handshake watches
// for the peer's next CLC message before it sleeps.
int64_t clc_spin_ns() {
  static const int64_t ns = int64_t{1000} * env_long("SMCR_CLC_SPIN_US", 100, 0, 10000);
  return ns;
}

// Watching the socket for the peer's next CLC bytes, up to SMCR_CLC_SPIN_US.
// A peer on this host answers within tens of microseconds, less than a
// sleep and wake-up costs here. Past the first 5 µs the watch yields the CPU
// between looks: on a busy machine the peer we wait for may be waiting for
// this very CPU.
//
// A watch that is only a wait (the caller sleeps after it anyway) may skip
// itself when the last ones saw nothing (`backoff`): on a loaded machine
// the peer rarely answers within the spin, and each look and yield is a
// system call.
class ClcSpin {
 public:
  explicit ClcSpin(bool on = true, SpinBackoff* backoff = nullptr)
      : backoff_(on && backoff && backoff->worth_trying() ? backoff : nullptr),
        start_(sys::now_ns()),
        until_(start_ + (on && (!backoff || backoff_) ? clc_spin_ns() : 0)) {}
  ~ClcSpin() {
    if (backoff_ && !expired_) backoff_->hit();
  }
  // After a look that found nothing: false once the spin is over, else
  // pauses or yields before the next look.
  bool again() {
    int64_t now = sys::now_ns();
    if (now >= until_) {
      if (backoff_ && !expired_) backoff_->missed();
      expired_ = true;
      return false;
    }
    if (now - start_ >= 5000) sched_yield();
    else cpu_relax();
    return true;
  }

 private:
  SpinBackoff* backoff_;
  int64_t start_, until_;
  bool expired_ = false;
};

// The waits for a CLC answer in this process: how their spins have fared.
SpinBackoff g_answer_spins;

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

// A whole CLC message server_may_run_inline() has just peeked at (on this
// thread, before clc_server reads it): recv_clc need not look again.
struct PeekedMessage {
  int fd = -1;
  size_t length = 0;
};
thread_local PeekedMessage t_peeked;

// Reads one whole CLC message from the stream, or leaves the stream untouched
// when the next bytes are not CLC (so the application still gets them).
Recv recv_clc(int fd, int64_t deadline, std::vector<uint8_t>* out, clc::Header* hdr, bool spin = true) {
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

HandshakeOutcome fallback(Fallback why, uint32_t diag = 0) {
  HandshakeOutcome o;
  o.kind = HandshakeOutcome::Kind::kFallback;
  o.reason = why;
  o.diagnosis = diag;
  return o;
}

// True when the TCP connection under a handshake has ended: the peer's FIN
// or reset is queued (no CLC message is due while we wait on the link).
bool tcp_peer_gone(int fd) {
  char b;
  ssize_t n = sys::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
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
HandshakeOutcome decline(int fd, uint32_t code, Fallback why, int64_t deadline, uint8_t version = 1) {
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
HandshakeOutcome decline_no_randomness(int fd, int64_t deadline, uint8_t version = 1) {
  return decline(fd, clc::decline::kInternalError, Fallback::kInternal, deadline, version);
}

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

// One side's fabric resources while the handshake runs; whatever is still
// here when the handshake fails is released by the destructor.
struct FabricSetup {
  std::unique_ptr<Link> link;
  LocalRmb rmb;     // ours, RMBE index 1
  RemoteRmb peer;   // the peer's RMBE
  clc::Gid gid{};   // what we announce for the link
  clc::Mac mac{};
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint8_t mtu_code = 5;
  std::optional<clc::Ece> ece;  // agreed and applied to the link's QP
  int memfd = -1;       // shm: ConnRmbs::memfd, peer_memfd
  int peer_memfd = -1;
  ~FabricSetup() {
    sys::close_reset(&memfd);
    sys::close_reset(&peer_memfd);
    if (peer.addr && link) link->release_remote_rmb(&peer);
    else if (peer.addr) shm_unmap_remote(&peer);
    if (rmb.addr && link) link->free_local_rmb(&rmb);
    else if (rmb.addr) shm_free_rmb(&rmb);
  }
};

bool same_id(const clc::Gid& a, const clc::Gid& b) { return a == b; }

bool local_address(int fd, sockaddr_storage* ss) {
  socklen_t len = sizeof *ss;
  return sys::getsockname(fd, reinterpret_cast<sockaddr*>(ss), &len) == 0;
}

// SMC-Rv2's v2_direct: whether the client's GID (its IPv4 part) is in the
// subnet of the interface that carries the TCP connection, so that no
// gateway sits between the GIDs (a Linux client then sends to our CLC MAC;
// otherwise it resolves the route). Unknown subnets count as direct, as
// before a route is known.
bool same_ipv4_subnet(int fd, const clc::Gid& peer_gid) {
  sockaddr_storage local{};
  if (!local_address(fd, &local)) return true;
  clc::Proposal mine;
  fill_ip_area(local, &mine);
  if (mine.ipv4_prefix_len == 0 || mine.ipv4_prefix_len > 32) return true;
  uint32_t peer = uint32_t{peer_gid[12]} << 24 | uint32_t{peer_gid[13]} << 16 | uint32_t{peer_gid[14]} << 8 | peer_gid[15];
  uint32_t mask = mine.ipv4_prefix_len == 32 ? ~0u : ~(~0u >> mine.ipv4_prefix_len);
  return (peer & mask) == (mine.ipv4_subnet & mask);
}

#ifdef SMCR_HAVE_VERBS
enum class FabricPreference { kAuto, kShm, kVerbs };

// SMCR_FABRIC=auto (default: shm between processes of this host, verbs to
// other hosts), shm, or verbs (e.g. to exercise RoCE between two processes of
// one host, as the guest tests do).
FabricPreference fabric_preference() {
  static const FabricPreference pref = [] {
    const char* v = env("SMCR_FABRIC");
    if (!v || !*v || strcmp(v, "auto") == 0) return FabricPreference::kAuto;
    if (strcmp(v, "shm") == 0) return FabricPreference::kShm;
    if (strcmp(v, "verbs") == 0) return FabricPreference::kVerbs;
    SMCR_LOG(1, "SMCR_FABRIC=%s ignored (auto, shm or verbs)", v);
    return FabricPreference::kAuto;
  }();
  return pref;
}

// A connect() address that names the peer as getpeername() would: not an
// unspecified one (0.0.0.0 and :: reach this host's loopback).
bool names_peer(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(&a)->sin_addr.s_addr != htonl(INADDR_ANY);
  if (a.ss_family != AF_INET6) return false;
  const in6_addr& p = reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr;
  return !IN6_IS_ADDR_UNSPECIFIED(&p) && !(IN6_IS_ADDR_V4MAPPED(&p) && p.s6_addr32[3] == 0);
}

// Is the TCP peer a process of this host (loopback, or one of our addresses)?
// `known`: the address connect() was given, if it names the peer.
bool peer_is_this_host(int fd, const sockaddr_storage& local, const sockaddr_storage& known) {
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  if (names_peer(known)) peer = known;
  else if (sys::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return false;
  if (peer.ss_family != local.ss_family) return false;
  if (peer.ss_family == AF_INET) {
    auto* p = reinterpret_cast<sockaddr_in*>(&peer);
    auto* l = reinterpret_cast<const sockaddr_in*>(&local);
    return (ntohl(p->sin_addr.s_addr) >> 24) == 127 || p->sin_addr.s_addr == l->sin_addr.s_addr;
  }
  if (peer.ss_family == AF_INET6) {
    auto* p = reinterpret_cast<sockaddr_in6*>(&peer);
    auto* l = reinterpret_cast<const sockaddr_in6*>(&local);
    return IN6_IS_ADDR_LOOPBACK(&p->sin6_addr) || std::memcmp(&p->sin6_addr, &l->sin6_addr, 16) == 0 ||
           (IN6_IS_ADDR_V4MAPPED(&p->sin6_addr) && p->sin6_addr.s6_addr[12] == 127);
  }
  return false;
}

std::optional<VerbsPort> verbs_port_for(int fd) {
  if (fabric_preference() == FabricPreference::kShm) return std::nullopt;
  sockaddr_storage local{};
  if (!local_address(fd, &local)) return std::nullopt;
  std::string why;
  auto port = verbs_port_for_local_address(reinterpret_cast<sockaddr*>(&local), &why);
  if (!port) SMCR_LOG(1, "verbs: %s", why.c_str());
  return port;
}
#endif

// Waits for the peer's CONFIRM LINK request on the new link (client side),
// or a Decline on TCP: the server may still fall back until it has sent it.
// Returns the request, or sets *failure.
std::optional<llc::ConfirmLink> await_confirm_link(int fd, Link* link, const clc::AcceptConfirm& acc, int64_t deadline,
                                                   HandshakeOutcome* failure) {
  const bool v2 = acc.v2.has_value();
  int64_t llc_deadline = sys::now_ms() + handshake_config().llc_timeout_ms;
  for (;;) {
    int64_t left = llc_deadline - sys::now_ms();
    pollfd p[2] = {{link->notify_fd(), POLLIN, 0}, {fd, POLLIN, 0}};
    int n = left > 0 ? sys::poll(p, 2, static_cast<int>(left)) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *failure = decline(fd, clc::decline::kTimeoutConfirmLink, Fallback::kTimeout, deadline);
      return std::nullopt;
    }
    if (p[1].revents) {
      std::vector<uint8_t> msg;
      clc::Header h{};
      Recv rr = recv_clc(fd, sys::now_ms() + 1000, &msg, &h);
      *failure = from_unexpected(fd, rr, msg, h, deadline, "CONFIRM LINK");
      return std::nullopt;
    }
    uint8_t raw[kLinkMessageLen];
    // A completion-channel event can carry no message (a send completion).
    if (!link->wait_message(raw, 0)) {
      if (!link->failed()) continue;
      *failure = decline(fd, clc::decline::kNoActiveLink, Fallback::kNoFabric, deadline);
      return std::nullopt;
    }
    auto m = v2 ? llc::v2::decode(raw) : llc::decode(raw);
    auto* cl = m ? std::get_if<llc::ConfirmLink>(&*m) : nullptr;
    if (!cl || cl->reply || cl->sender_qpn != acc.qpn || !same_id(cl->sender_gid, acc.gid)) {
      *failure = decline(fd, clc::decline::kProtocolError, Fallback::kProtocolError, deadline);
      return std::nullopt;
    }
    counters().llc_received.fetch_add(1);
    return *cl;
  }
}

// The handshake succeeded: the link becomes a link group, the RMBs a
// connection, and the engine starts watching the link.
// Our Accept or Confirm: the link we name (GID, MAC, QPN, PSN, MTU) and our
// RMB (RToken, RMBE index 1, Bsize) with a fresh alert token.
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
  return m;
}

// Drawn before the RMB and link it will name are set up: a handshake that
// cannot have one declines with nothing to undo.
bool new_alert_token(uint32_t* token) {
  if (!random_u32(token)) return false;
  *token |= 1;
  return true;
}

// A connection's RMBs as each link of its group names them (RKeys are per link).
struct ConnRmbs {
  std::array<LocalRmb, kMaxGroupLinks> local{};
  std::array<RemoteRmb, kMaxGroupLinks> peer{};
  // shm: both RMBs' memfds, kept for an exec that may take the connection
  // along (ConnectionSetup); -1 where the RMB came from a pool without one.
  int memfd = -1;
  int peer_memfd = -1;
};

// Releases what a failed handshake registered.
void free_conn_rmbs(LinkGroup* g, ConnRmbs* r) {
  g->free_rmbs(&r->local, &r->peer);
  sys::close_reset(&r->memfd);
  sys::close_reset(&r->peer_memfd);
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

// What the peer's RMB is called on each link, from what we know of it.
PeerRmbTokens tokens_of(const ConnRmbs& r) {
  PeerRmbTokens t;
  for (size_t i = 0; i < r.peer.size(); ++i) {
    if (!r.peer[i].size) continue;
    t.has[i] = true;
    t.rkey[i] = r.peer[i].rkey;
    t.vaddr[i] = r.peer[i].vaddr;
  }
  return t;
}

// Subsequent contact (RFC 3.5.2): a new RMB registered with every link of
// the group, announced with CONFIRM RKEY (Figure 13; other links' RTokens in
// the same message) before our Accept/Confirm names it.
bool add_rmb_to_group(LinkGroup* g, ConnRmbs* r) {
  // An RMB the peer already knows (its earlier connection ended in order).
  if (g->shm() && g->take_pooled_rmb(conn_rmb_size(), &r->local)) {
    counters().rmb_reused.fetch_add(1, std::memory_order_relaxed);
    r->memfd = r->local[0].handle;  // the memfd its last connection left with it, or -1
    r->local[0].handle = -1;
    return true;
  }
  int primary = g->primary_slot();
  LocalRmb& rmb = r->local[static_cast<size_t>(primary)];
  bool ok;
  if (g->shm()) {
    ok = shm_alloc_rmb(conn_rmb_size(), &rmb);
  } else {
#ifdef SMCR_HAVE_VERBS
    ok = static_cast<VerbsLink*>(g->link())->register_rmb(conn_rmb_size(), &rmb);
#else
    ok = false;
#endif
  }
  if (!ok) return false;
  llc::ConfirmRkey announce;
  announce.rkey = rmb.rkey;
  announce.vaddr = rmb.vaddr;
  for (int i = 0; i < g->link_slots(); ++i) {
    if (i == primary || !g->link_up(i)) continue;
    LocalRmb& alias = r->local[static_cast<size_t>(i)];
    if (!g->link_at(i)->register_alias(rmb, &alias) || announce.num_tokens >= announce.other_links.size()) continue;
    announce.other_links[announce.num_tokens++] = {g->link_num_at(i), alias.rkey, alias.vaddr};
  }
  if (!g->llc_exchange(g->wire(announce), g->shm() ? rmb.handle : -1, handshake_config().llc_timeout_ms)) {
    free_conn_rmbs(g, r);
    return false;
  }
  if (g->shm()) {  // the peer holds its own reference now; ours is kept for an exec
    r->memfd = rmb.handle;
    rmb.handle = -1;
  }
  return true;
}

// The peer's RMB that its CONFIRM RKEY announced and its Accept/Confirm
// names (by its RToken on the primary link), on every link it was given for.
bool claim_peer_rmb(LinkGroup* g, uint32_t rkey, uint64_t vaddr, uint8_t index, uint32_t size, ConnRmbs* r) {
  int fd = -1;
  PeerRmbTokens t;
  int primary = g->primary_slot();
  RemoteRmb mapped;
  if (!g->take_peer_rtoken(primary, rkey, vaddr, &t, &fd, g->shm() ? &mapped : nullptr)) return false;
  if (g->shm()) {
    RemoteRmb& p = r->peer[static_cast<size_t>(primary)];
    if (mapped.addr) {  // an RMB the peer reuses: mapped by an earlier connection
      if (mapped.size != size) {
        g->return_peer_rmb(&mapped);
        sys::close_reset(&fd);
        return false;
      }
      p = mapped;
      r->peer_memfd = fd;  // the memfd that connection left with it, or -1
      return true;
    }
    p.rkey = rkey;
    p.vaddr = vaddr;
    if (fd < 0 || !shm_map_remote(fd, size, &p, &r->peer_memfd)) return false;
    g->adopt_peer_mapping(p);
    return true;
  }
  for (size_t i = 0; i < t.has.size(); ++i) {
    if (!t.has[i]) continue;
    r->peer[i].rkey = t.rkey[i];
    r->peer[i].vaddr = t.vaddr[i] + uint64_t{index - 1u} * size;
    r->peer[i].size = size;
  }
  return true;
}

constexpr uint8_t kSecondLinkNum = 2;

// SMCR_MAX_LINKS=1 keeps groups to one link (no ADD LINK); default 2.
uint8_t max_links() {
  static const uint8_t n = [] {
    const char* v = env("SMCR_MAX_LINKS");
    return static_cast<uint8_t>(v && strcmp(v, "1") == 0 ? 1 : kMaxGroupLinks);
  }();
  return n;
}

#ifdef SMCR_HAVE_VERBS
// Handshake time, before the engine watches `link`: the next LLC message on
// it, or nullopt on timeout or link failure.
std::optional<llc::Message> next_llc(Link* link, int timeout_ms, std::array<uint8_t, 44>* raw = nullptr) {
  uint8_t b[kLinkMessageLen];
  if (!link->wait_message(b, timeout_ms)) return std::nullopt;
  if (raw) std::copy(std::begin(b), std::end(b), raw->begin());
  if (llc::classify(b[0]) != llc::Opcode::kLlc) return std::nullopt;
  counters().llc_received.fetch_add(1);
  return llc::decode(std::span<const uint8_t>(b, kLinkMessageLen));
}

bool post_llc(Link* link, const std::array<uint8_t, 44>& m) {
  if (!link->post_message(m)) return false;
  counters().llc_sent.fetch_add(1);
  return true;
}

// An LLC message of a type with sender MAC/GID/QPN (ADD LINK, CONFIRM LINK)
// that names `link`.
template <typename M>
M naming(const VerbsLink& link) {
  M m;
  m.sender_mac = link.mac();
  m.sender_gid = link.gid();
  m.sender_qpn = link.qpn();
  return m;
}

// The second link of a first contact (RFC 3.5.1.6, Figure 9), as it stands
// once both sides have confirmed it.
struct SecondLink {
  std::unique_ptr<VerbsLink> link;
  LocalRmb rmb;      // alias of the first link's RMB memory
  RemoteRmb peer;
  LinkIdentity local, remote;
};

// Server side, after the first link is confirmed: ADD LINK on a second
// device (or, with none, the same one: an asymmetric attempt the client may
// reject), the RToken exchange (ADD LINK CONTINUATION) and CONFIRM LINK over
// the new link. Nullopt when the client rejects or anything fails: the group
// then runs on one link (RFC C.8; no retry timer here).
std::optional<SecondLink> server_add_second_link(VerbsLink* first, const LocalRmb& rmb, const clc::AcceptConfirm& conf,
                                                 uint32_t peer_size) {
  const int timeout = handshake_config().llc_timeout_ms;
  uint32_t link_user_id = 0;
  if (!random_u32(&link_user_id)) {
    SMCR_LOG(1, "ADD LINK: no random link user id: the group keeps one link");
    return std::nullopt;
  }
  auto alt = verbs_alternate_port(first->port(), nullptr);
  const VerbsPort& port = alt ? *alt : first->port();
  std::string why;
  SecondLink out;
  out.link = VerbsLink::create(port, &why);
  if (!out.link || !out.link->register_alias(rmb, &out.rmb)) {
    SMCR_LOG(1, "ADD LINK: no second link: %s", out.link ? "cannot register the RMB" : why.c_str());
    return std::nullopt;
  }
  VerbsLink* l2 = out.link.get();
  auto req = naming<llc::AddLink>(*l2);
  req.link_num = kSecondLinkNum;
  req.mtu_code = l2->mtu_code();
  req.initial_psn = l2->psn();
  auto give_up = [&](const char* what) -> std::optional<SecondLink> {
    SMCR_LOG(1, "ADD LINK: %s: the group keeps one link", what);
    counters().add_link_rejected.fetch_add(1);
    return std::nullopt;
  };
  // A link the client already set up is deleted again (on link 1).
  auto delete_second = [&](const char* what) -> std::optional<SecondLink> {
    llc::DeleteLink d;
    d.link_num = kSecondLinkNum;
    d.reason_code = llc::DeleteLink::kReasonLostPath;
    post_llc(first, llc::encode(d));
    return give_up(what);
  };
  if (!post_llc(first, llc::encode(req))) return give_up("cannot send ADD LINK");
  auto m = next_llc(first, timeout);
  auto* got = m ? std::get_if<llc::AddLink>(&*m) : nullptr;
  if (!got || !got->reply || got->link_num != kSecondLinkNum) return give_up("no ADD LINK reply");
  const llc::AddLink reply = *got;  // `m` is reused below
  const llc::AddLink* rep = &reply;
  if (rep->rejected) {
    SMCR_LOG(1, "ADD LINK: client rejected (reason %u%s)", rep->reason_code,
             rep->reason_code == llc::AddLink::kReasonNoAlternatePath ? ": no alternate path" : "");
    return give_up("rejected");
  }
  if (rep->mtu_code < 1 || rep->mtu_code > 5) return delete_second("bad MTU in the ADD LINK reply");
  if (rep->sender_gid == conf.gid && port.device == first->port().device)
    return delete_second("the reply would make a parallel link");
  if (!l2->connect(rep->sender_gid, rep->sender_qpn, rep->initial_psn, std::min(rep->mtu_code, l2->mtu_code()), &why)) {
    SMCR_LOG(1, "verbs: %s", why.c_str());
    return delete_second("cannot connect the new QP");
  }
  // RTokens (one RMB per side on first contact): ours, then the client's.
  llc::AddLinkContinuation cont;
  cont.link_num = kSecondLinkNum;
  cont.num_rtokens = 1;
  cont.pairs[0] = {rmb.rkey, out.rmb.rkey, out.rmb.vaddr};
  if (!post_llc(first, llc::encode(cont))) return delete_second("cannot send ADD LINK CONTINUATION");
  m = next_llc(first, timeout);
  auto* theirs = m ? std::get_if<llc::AddLinkContinuation>(&*m) : nullptr;
  if (!theirs || !theirs->reply || theirs->link_num != kSecondLinkNum || theirs->num_rtokens != 1 ||
      theirs->pairs[0].reference_rkey != conf.rmb_rkey)
    return delete_second("ADD LINK CONTINUATION reply does not name the client's RMB");
  out.peer.rkey = theirs->pairs[0].new_rkey;
  out.peer.vaddr = theirs->pairs[0].new_vaddr + uint64_t{conf.rmbe_index - 1u} * peer_size;
  out.peer.size = peer_size;
  // CONFIRM LINK over the new link proves its path (RFC 3.5.1.6.3).
  auto cl = naming<llc::ConfirmLink>(*l2);
  cl.link_num = kSecondLinkNum;
  cl.link_user_id = link_user_id;
  cl.max_links = max_links();
  if (!post_llc(l2, llc::encode(cl))) return delete_second("cannot send CONFIRM LINK on the new link");
  m = next_llc(l2, timeout);
  auto* clr = m ? std::get_if<llc::ConfirmLink>(&*m) : nullptr;
  if (!clr || !clr->reply || clr->link_num != kSecondLinkNum || clr->sender_qpn != rep->sender_qpn)
    return delete_second("no CONFIRM LINK reply on the new link");
  out.local = {l2->gid(), l2->mac(), l2->qpn(), l2->mtu_code()};
  out.remote = {rep->sender_gid, rep->sender_mac, rep->sender_qpn, rep->mtu_code};
  counters().links_added.fetch_add(1);
  SMCR_LOG(1, "ADD LINK: link %u up on %s (%s asymmetric)", kSecondLinkNum, port.device.c_str(),
           alt ? "not" : "server-side");
  return out;
}

// Client side, after its CONFIRM LINK reply: the server's ADD LINK (RFC
// 3.5.1.6), answered with a QP on another device (or the same one when the
// server offers a different device), RTokens, and CONFIRM LINK on the new
// link; the new link joins `g` before the last reply goes out. Anything
// else leaves the group with one link. A message that is not ADD LINK is
// handed back in *stray for the group to handle.
void client_add_second_link(LinkGroup* g, VerbsLink* first, const clc::AcceptConfirm& acc, uint32_t peer_size,
                            ConnRmbs* rmbs, std::optional<std::array<uint8_t, 44>>* stray) {
  const int timeout = handshake_config().llc_timeout_ms;
  std::array<uint8_t, 44> raw{};
  auto m = next_llc(first, timeout, &raw);
  auto* got = m ? std::get_if<llc::AddLink>(&*m) : nullptr;
  if (!got || got->reply) {
    if (m || raw[0] != 0) *stray = raw;
    SMCR_LOG(1, "ADD LINK: none from the server: the group has one link");
    return;
  }
  const llc::AddLink request = *got;  // `m` is reused below
  const llc::AddLink* req = &request;
  auto reject = [&](uint8_t reason, const char* what) {
    SMCR_LOG(1, "ADD LINK: rejecting (%s)", what);
    llc::AddLink r = *req;
    r.reply = true;
    r.rejected = true;
    r.reason_code = reason;
    post_llc(first, llc::encode(r));
    counters().add_link_rejected.fetch_add(1);
  };
  if (req->mtu_code < 1 || req->mtu_code > 5) return reject(llc::AddLink::kReasonInvalidMtu, "invalid MTU");
  if (req->link_num == 0 || g->slot_of_link_num(req->link_num) >= 0 || max_links() < 2)
    return reject(llc::AddLink::kReasonNoAlternatePath, "no room for another link");
  uint32_t link_user_id = 0;
  if (!random_u32(&link_user_id)) return reject(llc::AddLink::kReasonNoAlternatePath, "no random link user id");
  // RFC 3.5.1.6.2: symmetric if both have a second device; asymmetric if
  // only one side has; a second link between the same two devices would be
  // parallel, which the RFC forbids.
  auto alt = verbs_alternate_port(first->port(), &req->sender_gid);
  bool server_same_device = req->sender_gid == acc.gid && req->sender_mac == acc.mac;
  if (server_same_device && !alt) return reject(llc::AddLink::kReasonNoAlternatePath, "no alternate path");
  const VerbsPort& port = alt ? *alt : first->port();
  std::string why;
  SecondLink l;
  l.link = VerbsLink::create(port, &why);
  if (!l.link || !l.link->register_alias(rmbs->local[0], &l.rmb))
    return reject(llc::AddLink::kReasonNoAlternatePath, l.link ? "cannot register the RMB" : why.c_str());
  VerbsLink* l2 = l.link.get();
  uint8_t mtu = std::min(req->mtu_code, l2->mtu_code());
  if (!l2->connect(req->sender_gid, req->sender_qpn, req->initial_psn, mtu, &why))
    return reject(llc::AddLink::kReasonNoAlternatePath, why.c_str());
  auto rep = naming<llc::AddLink>(*l2);
  rep.reply = true;
  rep.link_num = req->link_num;
  rep.mtu_code = l2->mtu_code();
  rep.initial_psn = l2->psn();
  if (!post_llc(first, llc::encode(rep))) return;
  // The server's RTokens first, then ours (RFC 3.5.5.2.3).
  m = next_llc(first, timeout);
  auto* cont_got = m ? std::get_if<llc::AddLinkContinuation>(&*m) : nullptr;
  const llc::AddLinkContinuation cont_copy = cont_got ? *cont_got : llc::AddLinkContinuation{};
  const llc::AddLinkContinuation* cont = cont_got ? &cont_copy : nullptr;
  if (!cont || cont->reply || cont->link_num != req->link_num || cont->num_rtokens != 1 ||
      cont->pairs[0].reference_rkey != acc.rmb_rkey) {
    SMCR_LOG(1, "ADD LINK: bad or missing ADD LINK CONTINUATION (%s): the group keeps one link",
             !cont ? (m ? "another message" : "none") : cont->reply ? "a reply" : cont->num_rtokens != 1 ? "RToken count"
             : cont->link_num != req->link_num ? "link number" : "reference RKey not the Accept's");
    return;
  }
  llc::AddLinkContinuation mine;
  mine.reply = true;
  mine.link_num = req->link_num;
  mine.num_rtokens = 1;
  mine.pairs[0] = {rmbs->local[0].rkey, l.rmb.rkey, l.rmb.vaddr};
  if (!post_llc(first, llc::encode(mine))) return;
  m = next_llc(l2, timeout);
  auto* cl = m ? std::get_if<llc::ConfirmLink>(&*m) : nullptr;
  if (!cl || cl->reply || cl->link_num != req->link_num || cl->sender_qpn != req->sender_qpn ||
      cl->sender_gid != req->sender_gid) {
    SMCR_LOG(1, "ADD LINK: no CONFIRM LINK on the new link: the group keeps one link");
    return;
  }
  LinkIdentity local{l2->gid(), l2->mac(), l2->qpn(), l2->mtu_code()};
  LinkIdentity remote{req->sender_gid, req->sender_mac, req->sender_qpn, req->mtu_code};
  auto reply = naming<llc::ConfirmLink>(*l2);
  reply.reply = true;
  reply.link_num = cl->link_num;
  reply.link_user_id = link_user_id;
  reply.max_links = std::min(cl->max_links, max_links());
  int slot = g->add_link(std::move(l.link), req->link_num, local, remote);
  if (slot < 0) return;
  rmbs->local[static_cast<size_t>(slot)] = l.rmb;
  RemoteRmb& p = rmbs->peer[static_cast<size_t>(slot)];
  p.rkey = cont->pairs[0].new_rkey;
  p.vaddr = cont->pairs[0].new_vaddr + uint64_t{acc.rmbe_index - 1u} * peer_size;
  p.size = peer_size;
  counters().links_added.fetch_add(1);
  SMCR_LOG(1, "ADD LINK: link %u up on %s", req->link_num, port.device.c_str());
  post_llc(l2, llc::encode(reply));
}
#endif

}  // namespace

uint32_t rmb_size_for(const HandshakeRequest& req) {
  if (req.rmb_size == 0) return handshake_config().rmb_size;
  return *rmb::decode_size(rmb::encode_size(req.rmb_size));
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
      if (b >= rmb::kMinSize && b <= rmb::kMaxSize) c.rmb_size = *rmb::decode_size(rmb::encode_size(static_cast<uint32_t>(b)));
      else SMCR_LOG(1, "SMCR_RMB_SIZE=%s ignored (16K..512K)", v);
    }
    return c;
  }();
  return cfg;
}

// --------------------------------------------------------------- client

// The shm fabric, client side, after the Accept: our RMB, the rendezvous
// (which hands us the server's RMB), the link.
static std::optional<HandshakeOutcome> shm_client_setup(int fd, const clc::AcceptConfirm& acc, uint32_t peer_size,
                                                 int64_t deadline, FabricSetup* fs) {
  const ShmIdentity& id = shm_identity();
  uint32_t qpn = 0, psn = 0;
  if (!random_nonzero_u24(&qpn) || !random_nonzero_u24(&psn)) return decline_no_randomness(fd, deadline);
  if (!shm_alloc_rmb(conn_rmb_size(), &fs->rmb))
    return decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline);
  ShmHello hello;
  hello.server_qpn = acc.qpn;
  hello.server_rkey = acc.rmb_rkey;
  hello.server_vaddr = acc.rmb_vaddr;
  hello.client_qpn = qpn;
  hello.client_rkey = fs->rmb.rkey;
  hello.client_vaddr = fs->rmb.vaddr;
  hello.client_rmb_size = fs->rmb.size;
  int server_rmb_fd = -1;
  fs->link = shm_connect(acc.gid, hello, fs->rmb.handle, deadline, &server_rmb_fd);
  if (!fs->link) return decline(fd, clc::decline::kNoSmcDevice, Fallback::kNoFabric, deadline);
  fs->memfd = fs->rmb.handle;  // the server holds its own reference now
  fs->rmb.handle = -1;
  fs->peer.rkey = acc.rmb_rkey;
  fs->peer.vaddr = acc.rmb_vaddr;
  if (!shm_map_remote(server_rmb_fd, peer_size, &fs->peer, &fs->peer_memfd))
    return decline(fd, clc::decline::kRtokenError, Fallback::kProtocolError, deadline);
  fs->gid = id.gid;
  fs->mac = id.mac;
  fs->qpn = hello.client_qpn;
  fs->psn = psn;
  fs->mtu_code = acc.mtu_code;
  return std::nullopt;
}

#ifdef SMCR_HAVE_VERBS
// A new link on `port` with our RMB registered in its protection domain.
static VerbsLink* verbs_link_with_rmb(int fd, const VerbsPort& port, int64_t deadline, FabricSetup* fs,
                                      std::optional<HandshakeOutcome>* failed, bool linux_v2 = false) {
  std::string why;
  auto link = VerbsLink::create(port, &why, linux_v2 ? VerbsLink::kV2SlotSize : VerbsLink::kSlotSize);
  if (!link) {
    SMCR_LOG(1, "verbs: %s", why.c_str());
    *failed = decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline);
    return nullptr;
  }
  VerbsLink* v = link.get();
  fs->link = std::move(link);
  if (!v->register_rmb(conn_rmb_size(), &fs->rmb)) {
    *failed = decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline);
    return nullptr;
  }
  return v;
}

// The verbs fabric, client side, after the Accept: QP, RMB registered in its
// PD, QP to RTR/RTS against the server's QPN/PSN/GID.
static std::optional<HandshakeOutcome> verbs_client_setup(int fd, const VerbsPort& port, const clc::AcceptConfirm& acc,
                                                   uint32_t peer_size, int64_t deadline, FabricSetup* fs) {
  std::optional<HandshakeOutcome> failed;
  VerbsLink* v = verbs_link_with_rmb(fd, port, deadline, fs, &failed, acc.v2.has_value());
  if (!v) return failed;
  std::string why;
  if (acc.ece) {
    // The server applied the agreed ECE to its QP; ours must match before RTR.
    if (!v->set_ece(VerbsEce{acc.ece->vendor_id, acc.ece->options}, &why)) {
      SMCR_LOG(1, "verbs: cannot apply the agreed ECE: %s", why.c_str());
      return decline(fd, clc::decline::kOptionUnsupported, Fallback::kNoFabric, deadline);
    }
    SMCR_LOG(1, "verbs: ECE agreed: vendor 0x%06x options 0x%08x", acc.ece->vendor_id, acc.ece->options);
    fs->ece = acc.ece;
  }
  fs->mtu_code = std::min(acc.mtu_code, v->mtu_code());
  if (!v->connect(acc.gid, acc.qpn, acc.psn, fs->mtu_code, &why)) {
    SMCR_LOG(1, "verbs: %s", why.c_str());
    return decline(fd, clc::decline::kNoActiveLink, Fallback::kNoFabric, deadline);
  }
  fs->peer.rkey = acc.rmb_rkey;
  fs->peer.vaddr = acc.rmb_vaddr + uint64_t{acc.rmbe_index - 1u} * peer_size;
  fs->peer.size = peer_size;
  fs->gid = v->gid();
  fs->mac = v->mac();
  fs->qpn = v->qpn();
  fs->psn = v->psn();
  return std::nullopt;
}
#endif

// An F=0 Accept for a link of our group `g`: claim the server's announced
// RMB, announce ours, then Confirm naming the group's link. No CONFIRM LINK.
static HandshakeOutcome client_subsequent_contact(int fd, LinkGroup* g, const clc::AcceptConfirm& acc,
                                                  uint32_t peer_size, int64_t deadline) {
  uint32_t token = 0;
  if (!new_alert_token(&token)) return decline_no_randomness(fd, deadline);
  ConnRmbs rmbs;
  if (!claim_peer_rmb(g, acc.rmb_rkey, acc.rmb_vaddr, acc.rmbe_index, peer_size, &rmbs))
    return decline(fd, clc::decline::kRtokenError, Fallback::kProtocolError, deadline);
  if (!add_rmb_to_group(g, &rmbs)) {
    free_conn_rmbs(g, &rmbs);
    return decline(fd, clc::decline::kRtokenError, Fallback::kResources, deadline);
  }
  clc::AcceptConfirm conf =
      rmb_message(clc::Type::kConfirm, false, g->local(), 0, rmbs.local[static_cast<size_t>(g->primary_slot())], token);
  if (acc.v2) conf.v2 = v2::confirm_for(acc, g->local().gid);
  g->expect_token(conf.rmbe_alert_token);
  // SMCR_TEST_CONFIRM_DELAY_MS (fault injection for tests, default 0): a
  // slow or hostile client, so that a test sees the server's accept()
  // return before the Confirm arrives (HandshakeRequest::may_defer_confirm).
  static const long confirm_delay_ms = env_long("SMCR_TEST_CONFIRM_DELAY_MS", 0, 0, 60000);
  if (confirm_delay_ms > 0) {
    timespec ts{confirm_delay_ms / 1000, (confirm_delay_ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  if (!send_all(fd, clc::encode(conf), deadline)) {
    g->forget_token(conf.rmbe_alert_token);
    free_conn_rmbs(g, &rmbs);
    return send_failed();
  }
  return establish_on(g, &rmbs, conf.rmbe_alert_token, acc.rmbe_alert_token, fd, false);
}

// A client handshake between its Proposal and the server's answer.
struct ClientContinuation {
  HandshakeRequest req;
  bool offered_v2 = false;  // our Proposal offered SMC-Rv2 too
#ifdef SMCR_HAVE_VERBS
  std::optional<VerbsPort> port;
#endif
};

namespace {

// Client, after its Proposal: whether the server's first bytes (or its end
// of stream) come within `wait_us`: the CLC spin's watch (client_spoke
// serves either side), then poll for the rest.
bool server_answered(int fd, int wait_us) {
  int64_t until = sys::now_ns() + int64_t{1000} * wait_us;
  if (client_spoke(fd, &g_answer_spins)) return true;
  for (;;) {
    int64_t left_us = (until - sys::now_ns()) / 1000;
    if (left_us <= 0) return false;
    pollfd pf{fd, POLLIN | POLLRDHUP, 0};
    timespec ts{0, static_cast<long>(std::min<int64_t>(left_us, 999999) * 1000)};
    int n = static_cast<int>(::syscall(SYS_ppoll, &pf, 1, &ts, nullptr, 0));
    if (n > 0 || (n < 0 && errno != EINTR)) return true;  // bytes, end of stream or an error: decide now
  }
}

}  // namespace

static HandshakeOutcome client_after_proposal(int fd, const ClientContinuation& state, int64_t deadline);

HandshakeOutcome clc_client(int fd, const HandshakeRequest& req) {
  const HandshakeConfig& cfg = handshake_config();
  ScopedRmbSize sized(rmb_size_for(req));
  const bool have_resources = req.have_resources;
  int64_t deadline = sys::now_ms() + cfg.timeout_ms;
  const ShmIdentity& id = shm_identity();
  if (!have_resources) return decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline);
  // The Proposal names us by this identity.
  if (!id.ok) return decline_no_randomness(fd, deadline);
  // Without the engine thread nothing would ever serve the connection's
  // link: it would hang at its first wait for the peer.
  if (!Engine::get().thread_running()) return decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline);

  // The Proposal names one GID: ours on the shm fabric for a peer on this
  // host, the RoCE v2 GID of our interface otherwise (or when told to).
  clc::Proposal prop;
  prop.peer_id = id.peer_id;
  prop.gid = id.gid;
  prop.mac = id.mac;
  sockaddr_storage local_addr{};
  bool have_local = local_address(fd, &local_addr);
#ifdef SMCR_HAVE_VERBS
  std::optional<VerbsPort> port;
  bool want_verbs = fabric_preference() == FabricPreference::kVerbs ||
                    (fabric_preference() == FabricPreference::kAuto && !(have_local && peer_is_this_host(fd, local_addr, req.peer)));
  if (want_verbs) port = verbs_port_for(fd);
  if (port) {
    prop.gid = port->gid;
    prop.mac = port->mac;
    // ECE travels in the Proposal's gap (see clc.h), only where the device has it.
    if (auto ece = verbs_device_ece(*port)) prop.ece = clc::Ece{ece->vendor_id, ece->options};
    // SMC-Rv2 too where we share a UEID with the network (a Linux kernel
    // peer takes nothing else over RoCE v2): Linux's version-2 layout, whose
    // SMC-D area takes the gap ECE would ride in.
    prop.v2 = v2::client_offer(port->gid);
    if (prop.v2) prop.ece.reset();
  }
#endif
  if (have_local) fill_ip_area(local_addr, &prop);
  if (!send_all(fd, clc::encode(prop), deadline)) return send_failed();

  ClientContinuation state;
  state.req = req;
  state.offered_v2 = prop.v2.has_value();
#ifdef SMCR_HAVE_VERBS
  state.port = port;
#endif
  if (req.answer_wait_us >= 0 && !server_answered(fd, req.answer_wait_us)) {
    HandshakeOutcome o;
    o.kind = HandshakeOutcome::Kind::kPendingClient;
    o.client_pending = new ClientContinuation(std::move(state));
    return o;
  }
  return client_after_proposal(fd, state, deadline);
}

HandshakeOutcome clc_client_finish(int fd, ClientContinuation* p) {
  std::unique_ptr<ClientContinuation> state(p);
  ScopedRmbSize sized(rmb_size_for(state->req));
  // The server's application may call accept() late; a TCP client would
  // wait that long too. The answer itself must come while the connection
  // lives; the rest of the handshake has the usual deadline.
  static const int64_t answer_wait_ms = env_long("SMCR_CLC_ANSWER_WAIT_MS", 300000, 1, 3600000);
  pollfd pf{fd, POLLIN | POLLRDHUP, 0};
  int64_t until = sys::now_ms() + answer_wait_ms;
  for (;;) {
    int64_t left = until - sys::now_ms();
    if (left <= 0) break;
    int n = sys::poll(&pf, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (n > 0 || (n < 0 && errno != EINTR)) break;
  }
  return client_after_proposal(fd, *state, sys::now_ms() + handshake_config().timeout_ms);
}

static HandshakeOutcome client_after_proposal(int fd, const ClientContinuation& state, int64_t deadline) {
  const ShmIdentity& id = shm_identity();
#ifdef SMCR_HAVE_VERBS
  const std::optional<VerbsPort>& port = state.port;
#endif
  std::vector<uint8_t> msg;
  clc::Header h{};
  Recv r = recv_clc(fd, deadline, &msg, &h);
  if (r != Recv::kMessage || h.type != clc::Type::kAccept)
    return from_unexpected(fd, r, msg, h, deadline, "SMC Accept");
  clc::DecodeError err;
  auto acc = clc::decode_accept_confirm(msg, clc::Type::kAccept, &err);
  if (!acc) return undecodable(fd, "Accept", err, deadline);
  auto peer_size = rmb::decode_size(acc->rmbe_size_code);
  if (!peer_size) return decline(fd, clc::decline::kProtocolError, Fallback::kProtocolError, deadline);
  // SMC-Rv2 (a Linux peer took our v2 offer): Declines in version 2 from here.
  const bool v2 = acc->v2.has_value();
  const uint8_t answer_version = v2 ? 2 : 1;
  if (v2 && !state.offered_v2)
    return decline(fd, clc::decline::kModeUnsupported, Fallback::kProtocolError, deadline, answer_version);
  if (uint32_t bad = v2::check_accept(*acc))
    return decline(fd, bad, Fallback::kProtocolError, deadline, answer_version);
  if (!acc->first_contact) {
    LinkGroup* g = LinkGroup::acquire_for_client(acc->peer_id, acc->gid, acc->mac, acc->qpn);
    if (g && g->llc_version() != (v2 ? llc::v2::kVersion : 1)) {
      g->release_hold();
      g = nullptr;
    }
    if (!g) {
      // An F=0 Accept naming a link we do not have: out of sync (RFC C.4).
      clc::Decline d;
      d.peer_id = id.peer_id;
      d.diagnosis = clc::decline::kSyncError;
      d.out_of_sync = true;
      d.version = answer_version;
      if (v2) d.os_type = clc::kOsLinux;
      send_all(fd, clc::encode(d), deadline);
      return fallback(Fallback::kProtocolError, d.diagnosis);
    }
    HandshakeOutcome o = client_subsequent_contact(fd, g, *acc, *peer_size, deadline);
    g->release_hold();
    return o;
  }

  uint32_t token = 0, link_user_id = 0;
  if (!new_alert_token(&token) || !random_u32(&link_user_id)) return decline_no_randomness(fd, deadline, answer_version);
  FabricSetup fs;
  std::optional<HandshakeOutcome> failed;
  if (shm_gid_is_local(acc->gid)) {
    failed = shm_client_setup(fd, *acc, *peer_size, deadline, &fs);
#ifdef SMCR_HAVE_VERBS
  } else if (port) {
    failed = verbs_client_setup(fd, *port, *acc, *peer_size, deadline, &fs);
#endif
  } else if (v2) {
    return decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline, answer_version);
  } else {
    return decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline);
  }
  if (failed) return *failed;

  LinkIdentity local{fs.gid, fs.mac, fs.qpn, fs.mtu_code};
  clc::AcceptConfirm conf = rmb_message(clc::Type::kConfirm, false, local, fs.psn, fs.rmb, token);
  if (v2) conf.v2 = v2::confirm_for(*acc, fs.gid);
  if (!send_all(fd, clc::encode(conf), deadline)) return send_failed();

  HandshakeOutcome failure;
  auto cl = await_confirm_link(fd, fs.link.get(), *acc, deadline, &failure);
  if (!cl) return failure;
  // Linux announces its RMBE model (no eyecatcher, cursors from 0) with
  // flag 0x03 and requires it back; an SMC-Rv2 peer without it is not one
  // whose RMBEs we could address.
  if (v2 && !cl->no_rmbe_eyecatcher)
    return decline(fd, clc::decline::kRmbeEyecatcher, Fallback::kProtocolError, deadline, answer_version);
  llc::ConfirmLink reply;
  reply.reply = true;
  reply.sender_mac = fs.mac;
  reply.sender_gid = fs.gid;
  reply.sender_qpn = fs.qpn;
  reply.link_num = cl->link_num;
  reply.link_user_id = link_user_id;
  reply.max_links = std::min(cl->max_links, max_links());
  if (v2) {
    const v2::GroupLimits limits = v2::limits_of(*acc->v2);
    reply.no_rmbe_eyecatcher = true;
    reply.max_links = limits.max_links;
    reply.max_conns = limits.max_conns;
  }
  ConnRmbs rmbs;
  rmbs.local[0] = fs.rmb;
  rmbs.peer[0] = fs.peer;
  std::swap(rmbs.memfd, fs.memfd);
  std::swap(rmbs.peer_memfd, fs.peer_memfd);
  fs.rmb = LocalRmb{};
  fs.peer = RemoteRmb{};
  Link* link = fs.link.get();
  bool shm = std::strcmp(link->fabric_name(), "shm") == 0;
  LinkIdentity remote{acc->gid, acc->mac, acc->qpn, acc->mtu_code};
  auto* group = new LinkGroup(Role::kClient, acc->peer_id, std::move(fs.link), cl->link_num, local, remote);
  if (v2) group->set_linux_v2();
  // The group is registered before the reply goes out: the server may answer
  // the next connection with an F=0 Accept as soon as its setup is done.
  LinkGroup::register_group(group);
  // If the reply cannot be sent the server resets the TCP connection; the link
  // is broken and the connection will report it.
  if (link->post_message(group->wire(reply))) counters().llc_sent.fetch_add(1);
  SMCR_LOG(1, "LLC: CONFIRM LINK reply sent: link %u, link uid %08x (the server's %08x)", reply.link_num,
           reply.link_user_id, cl->link_user_id);
  std::optional<std::array<uint8_t, 44>> stray;
#ifdef SMCR_HAVE_VERBS
  // A version-2 group keeps one link (an ADD LINK the peer sends anyway is
  // rejected by the group).
  if (!shm && !v2 && reply.max_links >= 2)
    client_add_second_link(group, static_cast<VerbsLink*>(link), *acc, *peer_size, &rmbs, &stray);
#endif
  (void)shm;
  group->note_peer_rmb(tokens_of(rmbs), group->shm() ? &rmbs.peer[0] : nullptr);
  HandshakeOutcome o = establish_on(group, &rmbs, conf.rmbe_alert_token, acc->rmbe_alert_token, fd, true);
  // The engine does not watch the group yet: this thread may still act for it.
  if (stray) group->dispatch(0, *stray);
  Engine::get().add_group(group);
  return o;
}

// --------------------------------------------------------------- server

// The shm fabric, server side, before the Accept: our RMB and a pending
// rendezvous that only the holder of this Accept can claim.
static std::optional<HandshakeOutcome> shm_server_prepare(int fd, int64_t deadline, FabricSetup* fs) {
  if (!Engine::get().serve_shm_rendezvous())
    return decline(fd, clc::decline::kNoSmcDevice, Fallback::kNoFabric, deadline);
  if (!random_nonzero_u24(&fs->psn)) return decline_no_randomness(fd, deadline);
  if (!shm_alloc_rmb(conn_rmb_size(), &fs->rmb))
    return decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline);
  fs->qpn = ShmRendezvous::instance().expect(fs->rmb.rkey, fs->rmb.vaddr, fs->rmb.handle);
  if (fs->qpn == 0) return decline_no_randomness(fd, deadline);
  fs->gid = shm_identity().gid;
  fs->mac = shm_identity().mac;
  fs->mtu_code = 5;
  return std::nullopt;
}

// After the Confirm: the client's rendezvous must match what it confirmed.
static std::optional<HandshakeOutcome> shm_server_complete(int fd, const clc::AcceptConfirm& conf, const clc::Gid& proposed_gid,
                                                    uint32_t peer_size, int64_t deadline, FabricSetup* fs) {
  ShmRendezvous::Pending arrived;
  if (!ShmRendezvous::instance().wait_arrival(fs->qpn, deadline, &arrived))
    return decline(fd, clc::decline::kTimeoutConfirmLink, Fallback::kTimeout, deadline);
  fs->link = std::make_unique<ShmLink>(arrived.link_fd);
  fs->memfd = fs->rmb.handle;  // passed to the client; the mapping stays
  fs->rmb.handle = -1;
  if (arrived.hello.client_qpn != conf.qpn || arrived.hello.client_rkey != conf.rmb_rkey ||
      arrived.hello.client_vaddr != conf.rmb_vaddr || peer_size != arrived.hello.client_rmb_size ||
      !same_id(conf.gid, proposed_gid)) {
    sys::close(arrived.client_rmb_fd);
    return decline(fd, clc::decline::kRtokenError, Fallback::kProtocolError, deadline);
  }
  fs->peer.rkey = conf.rmb_rkey;
  fs->peer.vaddr = conf.rmb_vaddr;
  if (!shm_map_remote(arrived.client_rmb_fd, peer_size, &fs->peer, &fs->peer_memfd))
    return decline(fd, clc::decline::kRtokenError, Fallback::kProtocolError, deadline);
  return std::nullopt;
}

#ifdef SMCR_HAVE_VERBS
static std::optional<HandshakeOutcome> verbs_server_prepare(int fd, const VerbsPort& port,
                                                            const std::optional<clc::Ece>& client_ece, int64_t deadline,
                                                            FabricSetup* fs, bool linux_v2) {
  std::optional<HandshakeOutcome> failed;
  VerbsLink* v = verbs_link_with_rmb(fd, port, deadline, fs, &failed, linux_v2);
  if (!v) return failed;
  // ECE (IBTA; as RDMA-CM does it): the passive side applies the
  // intersection before RTR and returns it; without ECE on either side the
  // link is set up without it.
  if (client_ece && !v->ece_supported()) {
    SMCR_LOG(1, "verbs: the client offers ECE; %s", v->ece_status().c_str());
  } else if (client_ece) {
    auto agreed = verbs_ece_agree(VerbsEce{client_ece->vendor_id, client_ece->options}, v->ece());
    std::string why;
    if (agreed && v->set_ece(*agreed, &why)) {
      fs->ece = clc::Ece{agreed->vendor_id, agreed->options};
      SMCR_LOG(1, "verbs: ECE agreed: vendor 0x%06x options 0x%08x", agreed->vendor_id, agreed->options);
    } else {
      SMCR_LOG(1, "verbs: no ECE agreement (%s)", agreed ? why.c_str() : "different vendor or version");
    }
  }
  fs->gid = v->gid();
  fs->mac = v->mac();
  fs->qpn = v->qpn();
  fs->psn = v->psn();
  fs->mtu_code = v->mtu_code();
  return std::nullopt;
}

static std::optional<HandshakeOutcome> verbs_server_complete(int fd, const clc::AcceptConfirm& conf, uint32_t peer_size,
                                                      int64_t deadline, FabricSetup* fs) {
  auto* v = static_cast<VerbsLink*>(fs->link.get());
  std::string why;
  if (!v->connect(conf.gid, conf.qpn, conf.psn, std::min(conf.mtu_code, v->mtu_code()), &why)) {
    SMCR_LOG(1, "verbs: %s", why.c_str());
    return decline(fd, clc::decline::kNoActiveLink, Fallback::kNoFabric, deadline);
  }
  fs->peer.rkey = conf.rmb_rkey;
  fs->peer.vaddr = conf.rmb_vaddr + uint64_t{conf.rmbe_index - 1u} * peer_size;
  fs->peer.size = peer_size;
  return std::nullopt;
}
#endif

// Accept F=0 on the group's link with a new RMB announced by CONFIRM RKEY;
// the Confirm must name the group's link and the client's announced RMB.
// After our Accept we may no longer Decline (RFC C.3): failures reset.
// A subsequent contact whose Accept is sent: what the Confirm completes.
class PendingConfirm {
 public:
  LinkGroup* group = nullptr;  // held (acquire_for_server) until the end
  ConnRmbs rmbs;
  uint32_t token = 0;          // our RMBE's alert token, named in the Accept
  int fd = -1;
  int64_t deadline = 0;

  // Whatever the end, the group's hold goes; a failed one frees the RMBs.
  HandshakeOutcome fail(HandshakeOutcome o) {
    group->forget_token(token);
    free_conn_rmbs(group, &rmbs);
    return o;
  }
  // The Confirm (or what came instead) is read: the connection, or why not.
  HandshakeOutcome complete(Recv r, const std::vector<uint8_t>& msg, const clc::Header& h) {
    if (r != Recv::kMessage || h.type != clc::Type::kConfirm)
      return fail(from_unexpected(fd, r, msg, h, deadline, "SMC Confirm"));
    clc::DecodeError err;
    auto conf = clc::decode_accept_confirm(msg, clc::Type::kConfirm, &err);
    auto peer_size = conf ? rmb::decode_size(conf->rmbe_size_code) : std::nullopt;
    if (!conf || !peer_size || conf->qpn != group->remote().qpn || conf->gid != group->remote().gid ||
        !claim_peer_rmb(group, conf->rmb_rkey, conf->rmb_vaddr, conf->rmbe_index, *peer_size, &rmbs)) {
      SMCR_LOG(1, "CLC: subsequent-contact Confirm names no RMB or link of the group");
      return fail(terminate(Fallback::kProtocolError, ECONNRESET));
    }
    return establish_on(group, &rmbs, token, conf->rmbe_alert_token, fd, false);
  }
};

// On return the group's hold is still ours, unless kPending took it over.
static HandshakeOutcome server_subsequent_contact(int fd, LinkGroup* g, int64_t deadline, bool defer,
                                                  const std::optional<v2::ServerTerms>& v2_terms) {
  auto p = std::make_unique<PendingConfirm>();
  p->group = g;
  p->fd = fd;
  p->deadline = deadline;
  uint32_t token = 0;
  if (!new_alert_token(&token)) return decline_no_randomness(fd, deadline, v2_terms ? 2 : 1);
  if (!add_rmb_to_group(g, &p->rmbs))
    return v2_terms ? decline(fd, clc::decline::kRegisterBufferError, Fallback::kResources, deadline, 2)
                    : decline(fd, clc::decline::kRtokenError, Fallback::kResources, deadline);
  clc::AcceptConfirm acc =
      rmb_message(clc::Type::kAccept, false, g->local(), 0, p->rmbs.local[static_cast<size_t>(g->primary_slot())], token);
  if (v2_terms) acc.v2 = clc::AcceptConfirmV2{v2_terms->eid, std::nullopt, {}};
  p->token = acc.rmbe_alert_token;
  g->expect_token(p->token);
  if (!send_all(fd, clc::encode(acc), deadline)) return p->fail(send_failed());
  std::vector<uint8_t> msg;
  clc::Header h{};
  // Deferred or not, watch for the Confirm a while first: a client on this
  // host usually sends it within the spin, and finishing here saves the
  // engine thread's wake-up before the application can read (and keeps a
  // Decline a clean fallback).
  Recv r = recv_clc(fd, defer ? 0 : deadline, &msg, &h);
  if (defer && r == Recv::kTimeout) {
    HandshakeOutcome o;
    o.kind = HandshakeOutcome::Kind::kPending;
    o.pending = p.release();
    return o;
  }
  return p->complete(r, msg, h);
}

bool finish_confirm(PendingConfirm* p, int tcp_fd, int64_t now_ms, HandshakeOutcome* out) {
  p->fd = tcp_fd;
  std::vector<uint8_t> msg;
  clc::Header h{};
  Recv r = recv_clc(p->fd, 0, &msg, &h, false);
  if (r == Recv::kTimeout && now_ms < p->deadline) return false;
  HandshakeOutcome o = p->complete(r, msg, h);
  if (o.kind != HandshakeOutcome::Kind::kSmc && o.kind != HandshakeOutcome::Kind::kTerminate) {
    // A Decline or plain bytes where the Confirm belongs: the application
    // already holds the connection as SMC-R, so it cannot become TCP.
    SMCR_LOG(1, "CLC: no Confirm after our Accept: connection reset (the application already holds it)");
    o = terminate(o.reason, ECONNRESET);
  }
  p->group->release_hold();
  delete p;
  *out = o;
  return true;
}

int64_t confirm_deadline(const PendingConfirm* p) { return p->deadline; }

bool client_spoke(int tcp_fd, SpinBackoff* backoff) {
  ClcSpin watch(true, backoff);
  do {
    uint8_t b;
    ssize_t n = sys::recv(tcp_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n >= 0 || (errno != EAGAIN && errno != EINTR)) return true;  // bytes, EOF or an error: decide now
  } while (watch.again());
  return false;
}

bool server_may_run_inline(int tcp_fd) {
  t_peeked = {};
  ClcSpin watch;
  uint8_t buf[clc::kMaxMessageLen];
  do {
    ssize_t n = sys::recv(tcp_fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;  // EOF or an error: decided at once
    if (n < static_cast<ssize_t>(clc::kHeaderLen)) continue;
    std::span<const uint8_t> bytes(buf, static_cast<size_t>(n));
    auto h = clc::decode_header(bytes);
    if (!h || h->type != clc::Type::kProposal) return true;  // not CLC, or a Decline: no wait
    if (h->length > static_cast<size_t>(n)) continue;        // the rest is still to come
    // Inline: clc_server, next on this thread, reads this whole message
    // without a second look (recv_clc).
    auto read_next = [&](bool run_inline) {
      if (run_inline) t_peeked = {tcp_fd, h->length};
      return run_inline;
    };
    auto prop = clc::decode_proposal(bytes.first(h->length));
    v2::ServerTerms terms;
    const bool v2 = prop && prop->v2 && v2::negotiate(*prop->v2, &terms) == 0;
    if (!prop || (!prop->offers_smcr_v1 && !v2)) return read_next(true);  // declined at once
    bool shm = prop->offers_smcr_v1 && shm_gid_is_local(prop->gid);
    if (LinkGroup::serves_client(prop->peer_id, shm, v2 && !shm ? &prop->v2->roce_gid : nullptr))
      return read_next(true);
#ifdef SMCR_HAVE_VERBS
    return read_next(shm && !Engine::get().serve_shm_rendezvous());  // a first contact, unless declined at once
#else
    return read_next(!shm || !Engine::get().serve_shm_rendezvous());
#endif
  } while (watch.again());
  return false;
}

bool decline_instead_of_proposal(int tcp_fd) {
  clc::Decline d;
  d.peer_id = shm_identity().peer_id;
  d.diagnosis = clc::decline::kHandshakeTimeout;
  std::vector<uint8_t> bytes = clc::encode(d);
  SMCR_LOG(1, "CLC: the TCP handshake outlasted a non-blocking connect(): declining in place of the Proposal");
  return sys::send(tcp_fd, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL) ==
         static_cast<ssize_t>(bytes.size());
}

// First contacts with one client are made one at a time (Linux:
// smc_server_lgr_pending): a handshake that finds another first contact
// with the same client under way waits for it and then joins the group it
// made, instead of making a second group. accept() used to serialize them
// by running each handshake inline; handshakes now also run on threads.
class FirstContactTurn {
 public:
  // Waits (until `deadline_ms`) for no other first contact with `peer`.
  FirstContactTurn(const clc::PeerId& peer, bool shm, int64_t deadline_ms) : key_{peer, shm} {
    std::unique_lock<std::mutex> lock(mu());
    while (std::find(busy().begin(), busy().end(), key_) != busy().end()) {
      int64_t left = deadline_ms - sys::now_ms();
      if (left <= 0) return;
      cv().wait_for(lock, std::chrono::milliseconds(left));
    }
    busy().push_back(key_);
    held_ = true;
  }
  ~FirstContactTurn() { release(); }
  // A subsequent contact needs no turn.
  void release() {
    if (!held_) return;
    held_ = false;
    std::lock_guard<std::mutex> lock(mu());
    busy().erase(std::find(busy().begin(), busy().end(), key_));
    cv().notify_all();
  }
  bool held() const { return held_; }

 private:
  using Key = std::pair<clc::PeerId, bool>;
  static std::mutex& mu() {
    static auto* m = new std::mutex;
    return *m;
  }
  static std::condition_variable& cv() {
    static auto* c = new std::condition_variable;
    return *c;
  }
  static std::vector<Key>& busy() {
    static auto* v = new std::vector<Key>;
    return *v;
  }
  Key key_;
  bool held_ = false;
};

HandshakeOutcome clc_server(int fd, const HandshakeRequest& request) {
  const HandshakeConfig& cfg = handshake_config();
  ScopedRmbSize sized(rmb_size_for(request));
  const bool have_resources = request.have_resources, allowed = request.allowed;
  int64_t deadline = sys::now_ms() + cfg.timeout_ms;

  std::vector<uint8_t> msg;
  clc::Header h{};
  Recv r = recv_clc(fd, deadline, &msg, &h);
  if (r != Recv::kMessage || h.type != clc::Type::kProposal)
    return from_unexpected(fd, r, msg, h, deadline, "SMC Proposal");
  clc::DecodeError err;
  auto prop = clc::decode_proposal(msg, &err);
  if (!prop) return undecodable(fd, "Proposal", err, deadline);
  const uint8_t answer_version = prop->version;
  if (!allowed) return decline(fd, clc::decline::kConfigError, Fallback::kPolicy, deadline, answer_version);
  if (!have_resources) return decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline, answer_version);
  if (!shm_identity().ok) return decline_no_randomness(fd, deadline, answer_version);
  if (!Engine::get().thread_running())
    return decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline, answer_version);

  // The server follows the fabric the client's GID names.
  bool shm = prop->offers_smcr_v1 && shm_gid_is_local(prop->gid);
  // SMC-Rv2 (Linux's, over RoCE v2) where the client offers it with a UEID
  // we have, and RFC 7609's version 1 otherwise, as Linux's server prefers.
  std::optional<v2::ServerTerms> v2_terms;
  if (prop->v2 && !shm) {
    v2::ServerTerms t;
    uint32_t no_v2 = v2::negotiate(*prop->v2, &t);
    if (no_v2 == 0) {
      v2_terms = t;
    } else if (!prop->offers_smcr_v1) {
      return decline(fd, no_v2, Fallback::kNoFabric, deadline, answer_version);
    }
  }
  if (!v2_terms && !prop->offers_smcr_v1)
    return decline(fd, clc::decline::kModeUnsupported, Fallback::kNoFabric, deadline, answer_version);
  const clc::Gid* v2_client_gid = v2_terms ? &prop->v2->roce_gid : nullptr;
  FirstContactTurn turn(prop->peer_id, shm, deadline);
  if (!turn.held()) return terminate(Fallback::kTimeout, ETIMEDOUT);
  // Subsequent contact (RFC 3.5.2): a live group with this client.
  if (LinkGroup* g = LinkGroup::acquire_for_server(prop->peer_id, shm, v2_client_gid)) {
    turn.release();
    HandshakeOutcome o = server_subsequent_contact(fd, g, deadline, request.may_defer_confirm, v2_terms);
    if (o.kind != HandshakeOutcome::Kind::kPending) g->release_hold();
    return o;
  }
  uint32_t token = 0, link_user_id = 0;
  if (!new_alert_token(&token) || !random_u32(&link_user_id))
    return decline_no_randomness(fd, deadline, answer_version);
  FabricSetup fs;
  std::optional<HandshakeOutcome> failed;
  if (shm) {
    failed = shm_server_prepare(fd, deadline, &fs);
  } else {
#ifdef SMCR_HAVE_VERBS
    auto port = verbs_port_for(fd);
    if (port && v2_terms && !v2::ipv4_mapped(port->gid)) port.reset();
    if (!port) return decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline, answer_version);
    failed = verbs_server_prepare(fd, *port, v2_terms ? std::nullopt : prop->ece, deadline, &fs, v2_terms.has_value());
#else
    return decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline, answer_version);
#endif
  }
  if (failed) return *failed;
  // A pending shm rendezvous must not outlive a failed handshake.
  struct Abandon {
    bool active;
    uint32_t qpn;
    ~Abandon() {
      ShmRendezvous::Pending gone;
      if (active && ShmRendezvous::instance().wait_arrival(qpn, 0, &gone)) {
        sys::close(gone.link_fd);
        sys::close(gone.client_rmb_fd);
      }
    }
  } abandon{shm, fs.qpn};

  LinkIdentity local{fs.gid, fs.mac, fs.qpn, fs.mtu_code};
  clc::AcceptConfirm acc = rmb_message(clc::Type::kAccept, true, local, fs.psn, fs.rmb, token);
  acc.ece = fs.ece;
  if (v2_terms) {
    acc.v2 = clc::AcceptConfirmV2{v2_terms->eid, v2::accept_extension(*v2_terms), {}};
    acc.v2->first_contact->v2_direct = same_ipv4_subnet(fd, prop->v2->roce_gid);
  }
  if (!send_all(fd, clc::encode(acc), deadline)) return send_failed();

  r = recv_clc(fd, deadline, &msg, &h);
  if (r != Recv::kMessage || h.type != clc::Type::kConfirm) return from_unexpected(fd, r, msg, h, deadline, "SMC Confirm");
  auto conf = clc::decode_accept_confirm(msg, clc::Type::kConfirm, &err);
  if (!conf) return undecodable(fd, "Confirm", err, deadline);
  auto peer_size = rmb::decode_size(conf->rmbe_size_code);
  if (!peer_size) return decline(fd, clc::decline::kProtocolError, Fallback::kProtocolError, deadline);
  if (v2_terms) {
    if (!conf->v2) return decline(fd, clc::decline::kModeUnsupported, Fallback::kProtocolError, deadline, 2);
    if (uint32_t bad = v2::check_confirm(*conf, *v2_terms)) return decline(fd, bad, Fallback::kProtocolError, deadline, 2);
    // Linux's server takes the client's link GID from the Proposal, not
    // from the Confirm (smc_find_rdma_v2_device_serv): so do we.
    conf->gid = prop->v2->roce_gid;
  }
  if (shm) {
    failed = shm_server_complete(fd, *conf, prop->gid, *peer_size, deadline, &fs);
    abandon.active = false;
#ifdef SMCR_HAVE_VERBS
  } else {
    failed = verbs_server_complete(fd, *conf, *peer_size, deadline, &fs);
#endif
  }
  if (failed) return *failed;

  llc::ConfirmLink req;
  req.sender_mac = fs.mac;
  req.sender_gid = fs.gid;
  req.sender_qpn = fs.qpn;
  req.link_num = 1;
  req.link_user_id = link_user_id;
  req.max_links = max_links();
  if (v2_terms) {
    // Linux's RMBE model (flag 0x03), which a Linux client requires; the
    // limits as CLC settled them (release 0: Linux's 2 and none).
    req.no_rmbe_eyecatcher = true;
    req.max_links = v2_terms->release >= 1 ? v2_terms->max_links : v2::kLinuxMaxLinks;
    req.max_conns = v2_terms->max_conns;
  }
  const uint8_t llc_version = v2_terms ? llc::v2::kVersion : 1;
  if (!fs.link->post_message(LinkGroup::wire_for(llc_version, req)))
    return decline(fd, clc::decline::kNoActiveLink, Fallback::kNoFabric, deadline);
  counters().llc_sent.fetch_add(1);
  uint8_t raw[kLinkMessageLen];
  // RFC C.7.1: a first link whose CONFIRM LINK is not answered ends the TCP connection.
  int64_t llc_deadline = sys::now_ms() + cfg.llc_timeout_ms;
  // A client that gave up (its application closed a connection whose
  // handshake ran off connect(): a port probe) ends its TCP connection; the
  // wait watches that too, not to hold a single-threaded accept() until the
  // LLC timeout.
  bool got = false, peer_gone = false;
  while (!got && !fs.link->failed() && !peer_gone) {
    int64_t left = llc_deadline - sys::now_ms();
    if (left <= 0) break;
    got = fs.link->wait_message(raw, static_cast<int>(std::min<int64_t>(left, 20)));
    peer_gone = !got && tcp_peer_gone(fd);
  }
  if (peer_gone) return terminate(Fallback::kPeerNotClc, ECONNRESET);
  if (!got) return terminate(Fallback::kTimeout, ETIMEDOUT);
  auto m = v2_terms ? llc::v2::decode(raw) : llc::decode(raw);
  auto* cl = m ? std::get_if<llc::ConfirmLink>(&*m) : nullptr;
  if (!cl || !cl->reply || cl->link_num != 1 || cl->sender_qpn != conf->qpn || (v2_terms && !cl->no_rmbe_eyecatcher))
    return terminate(Fallback::kProtocolError, ECONNRESET);
  counters().llc_received.fetch_add(1);
  SMCR_LOG(1, "LLC: CONFIRM LINK confirmed: link 1, link uid %08x (the client's %08x)", req.link_user_id,
           cl->link_user_id);
  LinkIdentity remote{conf->gid, conf->mac, conf->qpn, conf->mtu_code};
  ConnRmbs rmbs;
  rmbs.local[0] = fs.rmb;
  rmbs.peer[0] = fs.peer;
  std::swap(rmbs.memfd, fs.memfd);
  std::swap(rmbs.peer_memfd, fs.peer_memfd);
#ifdef SMCR_HAVE_VERBS
  // RFC 3.5.1.6: a second link before any data flows.
  std::optional<SecondLink> second;
  if (!shm && !v2_terms && (cl->max_links == 0 || cl->max_links >= 2) && max_links() >= 2)
    second = server_add_second_link(static_cast<VerbsLink*>(fs.link.get()), fs.rmb, *conf, *peer_size);
#endif
  fs.rmb = LocalRmb{};
  fs.peer = RemoteRmb{};
  auto* group = new LinkGroup(Role::kServer, prop->peer_id, std::move(fs.link), 1, local, remote);
  if (v2_terms) group->set_linux_v2();
#ifdef SMCR_HAVE_VERBS
  if (second) {
    int slot = group->add_link(std::move(second->link), kSecondLinkNum, second->local, second->remote);
    rmbs.local[static_cast<size_t>(slot)] = second->rmb;
    rmbs.peer[static_cast<size_t>(slot)] = second->peer;
  }
#endif
  group->note_peer_rmb(tokens_of(rmbs), group->shm() ? &rmbs.peer[0] : nullptr);
  HandshakeOutcome o = establish_on(group, &rmbs, acc.rmbe_alert_token, conf->rmbe_alert_token, fd, true);
  LinkGroup::register_group(group);
  Engine::get().add_group(group);
  return o;
}

}  // namespace smcr
