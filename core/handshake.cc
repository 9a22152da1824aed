#include "core/handshake.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <variant>
#include <vector>

#include "core/clc.h"
#include "core/connection.h"
#include "core/engine.h"
#include "core/fabric_shm.h"
#ifdef SMCR_HAVE_VERBS
#include "core/fabric_verbs.h"
#endif
#include "core/link_group.h"
#include "core/llc.h"
#include "core/rmb.h"
#include "core/sys.h"

namespace smcr {

namespace {

uint32_t random_u32() {
  uint32_t v = 0;
  while (::syscall(SYS_getrandom, &v, sizeof v, 0) != sizeof v) {
  }
  return v;
}

uint32_t random_nonzero_u24() {
  uint32_t v;
  do v = random_u32() & 0xFFFFFF;
  while (v == 0);
  return v;
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
    if (left <= 0) return false;
    pollfd p{fd, POLLOUT, 0};
    sys::poll(&p, 1, static_cast<int>(left));
  }
  return true;
}

enum class Recv { kMessage, kNotClc, kMalformedHeader, kEof, kTimeout, kError };

// Waits until `want` bytes can be peeked (SO_RCVLOWAT makes poll wait for
// all of them instead of waking per segment).
Recv peek_bytes(int fd, uint8_t* buf, size_t want, int64_t deadline, size_t* got) {
  int lowat = static_cast<int>(want);
  sys::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
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
      size_t cmp = std::min<size_t>(*got, 4);
      if (std::memcmp(buf, clc::kEyecatcher.data(), cmp) != 0 || *got >= want) {
        result = Recv::kMessage;
        break;
      }
    } else if (errno != EAGAIN && errno != EINTR) {
      result = Recv::kError;
      break;
    }
    int64_t left = deadline - sys::now_ms();
    if (left <= 0) break;
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    sys::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 50)));
  }
  int one = 1;
  sys::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
  return result;
}

// Reads one whole CLC message from the stream, or leaves the stream untouched
// when the next bytes are not CLC (so the application still gets them).
Recv recv_clc(int fd, int64_t deadline, std::vector<uint8_t>* out, clc::Header* hdr) {
  uint8_t head[clc::kHeaderLen];
  size_t got = 0;
  Recv r = peek_bytes(fd, head, sizeof head, deadline, &got);
  if (r != Recv::kMessage) return r;
  if (std::memcmp(head, clc::kEyecatcher.data(), std::min<size_t>(got, 4)) != 0) return Recv::kNotClc;
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

HandshakeOutcome terminate(Fallback why, int error) {
  HandshakeOutcome o;
  o.kind = HandshakeOutcome::Kind::kTerminate;
  o.reason = why;
  o.error = error;
  return o;
}

// Sends a Decline instead of our next CLC message and falls back (RFC C.1).
HandshakeOutcome decline(int fd, uint32_t code, Fallback why, int64_t deadline) {
  clc::Decline d;
  d.peer_id = shm_identity().peer_id;
  d.diagnosis = code;
  SMCR_LOG(1, "CLC: declining (%08x %.*s)", code, static_cast<int>(clc::decline_reason(code).size()),
           clc::decline_reason(code).data());
  if (!send_all(fd, clc::encode(d), deadline)) return terminate(why, ETIMEDOUT);
  return fallback(why, code);
}

HandshakeOutcome from_unexpected(int fd, Recv r, const std::vector<uint8_t>& msg, const clc::Header& h,
                                 int64_t deadline, const char* waiting_for) {
  switch (r) {
    case Recv::kNotClc:
      SMCR_LOG(1, "CLC: peer sent non-CLC bytes while we waited for %s: plain TCP", waiting_for);
      return fallback(Fallback::kPeerNotClc);
    case Recv::kEof:
      SMCR_LOG(1, "CLC: peer closed while we waited for %s", waiting_for);
      return fallback(Fallback::kPeerNotClc);
    case Recv::kTimeout:
      SMCR_LOG(1, "CLC: timeout waiting for %s", waiting_for);
      return terminate(Fallback::kTimeout, ETIMEDOUT);
    case Recv::kMalformedHeader:
      // Cannot tell where the message ends: the stream is unusable (C.6).
      SMCR_LOG(1, "CLC: malformed CLC header while waiting for %s", waiting_for);
      return terminate(Fallback::kProtocolError, ECONNRESET);
    case Recv::kError:
      return terminate(Fallback::kInternal, errno ? errno : ECONNRESET);
    case Recv::kMessage:
      break;
  }
  if (h.type == clc::Type::kDecline) {
    auto d = clc::decode_decline(msg);
    uint32_t code = d ? d->diagnosis : 0;
    SMCR_LOG(1, "CLC: peer declined (%08x %.*s) instead of %s", code,
             static_cast<int>(clc::decline_reason(code).size()), clc::decline_reason(code).data(), waiting_for);
    return fallback(Fallback::kPeerDeclined, code);
  }
  SMCR_LOG(1, "CLC: unexpected CLC type %d while waiting for %s", static_cast<int>(h.type), waiting_for);
  return decline(fd, clc::decline::kProtocolError, Fallback::kProtocolError, deadline);
}

// The IPv4 subnet of the interface that owns `addr` (RFC 3.5.1.2; Linux
// sends the subnet number).
void fill_ip_area(int fd, clc::Proposal* p) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (sys::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return;
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
  ~FabricSetup() {
    if (peer.addr && link) link->release_remote_rmb(&peer);
    else if (peer.addr) shm_unmap_remote(&peer);
    if (rmb.addr && link) link->free_local_rmb(&rmb);
    else if (rmb.addr) shm_free_rmb(&rmb);
  }
};

bool same_id(const clc::Gid& a, const clc::Gid& b) { return a == b; }

#ifdef SMCR_HAVE_VERBS
enum class FabricPreference { kAuto, kShm, kVerbs };

// SMCR_FABRIC=auto (default: shm between processes of this host, verbs to
// other hosts), shm, or verbs (e.g. to exercise RoCE between two processes of
// one host, as the guest tests do).
FabricPreference fabric_preference() {
  static const FabricPreference pref = [] {
    const char* v = getenv("SMCR_FABRIC");
    if (!v || !*v || strcmp(v, "auto") == 0) return FabricPreference::kAuto;
    if (strcmp(v, "shm") == 0) return FabricPreference::kShm;
    if (strcmp(v, "verbs") == 0) return FabricPreference::kVerbs;
    SMCR_LOG(1, "SMCR_FABRIC=%s ignored (auto, shm or verbs)", v);
    return FabricPreference::kAuto;
  }();
  return pref;
}

bool local_address(int fd, sockaddr_storage* ss) {
  socklen_t len = sizeof *ss;
  return sys::getsockname(fd, reinterpret_cast<sockaddr*>(ss), &len) == 0;
}

// Is the TCP peer a process of this host (loopback, or one of our addresses)?
bool peer_is_this_host(int fd) {
  sockaddr_storage peer{}, local{};
  socklen_t len = sizeof peer;
  if (sys::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 || !local_address(fd, &local)) return false;
  if (peer.ss_family == AF_INET) {
    auto* p = reinterpret_cast<sockaddr_in*>(&peer);
    auto* l = reinterpret_cast<sockaddr_in*>(&local);
    return (ntohl(p->sin_addr.s_addr) >> 24) == 127 || p->sin_addr.s_addr == l->sin_addr.s_addr;
  }
  if (peer.ss_family == AF_INET6) {
    auto* p = reinterpret_cast<sockaddr_in6*>(&peer);
    auto* l = reinterpret_cast<sockaddr_in6*>(&local);
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
    auto m = llc::decode(raw);
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
                               const LocalRmb& rmb) {
  clc::AcceptConfirm m;
  m.type = type;
  m.first_contact = first_contact;
  m.peer_id = shm_identity().peer_id;
  m.gid = link.gid;
  m.mac = link.mac;
  m.qpn = link.qpn;
  m.rmb_rkey = rmb.rkey;
  m.rmbe_index = 1;
  m.rmbe_alert_token = random_u32() | 1;
  m.rmbe_size_code = rmb::encode_size(rmb.size);
  m.mtu_code = link.mtu_code;
  m.rmb_vaddr = rmb.vaddr;
  m.psn = psn;
  return m;
}

// The handshake succeeded on `group`: the RMBs become a connection.
HandshakeOutcome establish_on(LinkGroup* group, LocalRmb* rmb, const RemoteRmb& peer_rmb, uint32_t local_token,
                              uint32_t peer_token, int tcp_fd, bool first_contact) {
  ConnectionSetup s;
  s.group = group;
  s.rmb = *rmb;
  s.peer_rmb = peer_rmb;
  s.local_token = local_token;
  s.peer_token = peer_token;
  s.rmbe_base = 4;
  s.tcp_fd = tcp_fd;
  s.active = group->role() == Role::kClient;
  *rmb = LocalRmb{};  // owned by the connection now
  HandshakeOutcome o;
  o.kind = HandshakeOutcome::Kind::kSmc;
  o.conn = Connection::create(s);
  (s.active ? counters().smc_active : counters().smc_passive).fetch_add(1);
  (first_contact ? counters().lgr_created : counters().lgr_reused).fetch_add(1);
  SMCR_LOG(1, "CLC: %s SMC-R over %s, %s contact (token %08x, RMB %u, peer RMB %u)",
           s.active ? "client" : "server", group->link()->fabric_name(), first_contact ? "first" : "subsequent",
           local_token, s.rmb.size, peer_rmb.size);
  return o;
}

// First contact: the new link becomes a link group, registered for the
// subsequent contacts, and the engine starts watching it.
HandshakeOutcome establish(Role role, const clc::PeerId& peer_id, std::unique_ptr<Link> link, uint8_t link_num,
                           const LinkIdentity& local, const LinkIdentity& remote, LocalRmb* rmb,
                           const RemoteRmb& peer_rmb, uint32_t local_token, uint32_t peer_token, int tcp_fd) {
  auto* group = new LinkGroup(role, peer_id, std::move(link), link_num, local, remote);
  group->note_peer_rkey(peer_rmb.rkey);
  HandshakeOutcome o = establish_on(group, rmb, peer_rmb, local_token, peer_token, tcp_fd, true);
  LinkGroup::register_group(group);
  Engine::get().add_group(group);
  return o;
}

// Subsequent contact (RFC 3.5.2): a new RMB on an existing group's link,
// announced with CONFIRM RKEY (Figure 13) before our Accept/Confirm names it.
bool add_rmb_to_group(LinkGroup* g, LocalRmb* rmb) {
  bool ok;
  if (g->shm()) {
    ok = shm_alloc_rmb(handshake_config().rmb_size, rmb);
  } else {
#ifdef SMCR_HAVE_VERBS
    ok = static_cast<VerbsLink*>(g->link())->register_rmb(handshake_config().rmb_size, rmb);
#else
    ok = false;
#endif
  }
  if (!ok) return false;
  llc::ConfirmRkey announce;
  announce.rkey = rmb->rkey;
  announce.vaddr = rmb->vaddr;
  if (!g->llc_exchange(llc::encode(announce), g->shm() ? rmb->handle : -1, handshake_config().llc_timeout_ms)) {
    g->link()->free_local_rmb(rmb);
    return false;
  }
  if (g->shm()) shm_release_handle(rmb);  // the peer holds its own reference now
  return true;
}

// The peer's RMB that its CONFIRM RKEY announced and its Accept/Confirm names.
bool claim_peer_rmb(LinkGroup* g, uint32_t rkey, uint64_t vaddr, uint8_t index, uint32_t size, RemoteRmb* out) {
  int fd = -1;
  if (!g->take_peer_rtoken(rkey, vaddr, &fd)) return false;
  out->rkey = rkey;
  out->vaddr = vaddr;
  if (g->shm()) return fd >= 0 && shm_map_remote(fd, size, out);
  out->vaddr = vaddr + uint64_t{index - 1u} * size;
  out->size = size;
  return true;
}

}  // namespace

const HandshakeConfig& handshake_config() {
  static const HandshakeConfig cfg = [] {
    HandshakeConfig c;
    if (const char* v = getenv("SMCR_CLC_TIMEOUT_MS")) {
      long ms = strtol(v, nullptr, 10);
      if (ms >= 10 && ms <= 600000) c.timeout_ms = static_cast<int>(ms);
      else SMCR_LOG(1, "SMCR_CLC_TIMEOUT_MS=%s ignored (10..600000)", v);
    }
    if (const char* v = getenv("SMCR_RMB_SIZE")) {
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
  if (!shm_alloc_rmb(handshake_config().rmb_size, &fs->rmb))
    return decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline);
  ShmHello hello;
  hello.server_qpn = acc.qpn;
  hello.server_rkey = acc.rmb_rkey;
  hello.server_vaddr = acc.rmb_vaddr;
  hello.client_qpn = random_nonzero_u24();
  hello.client_rkey = fs->rmb.rkey;
  hello.client_vaddr = fs->rmb.vaddr;
  hello.client_rmb_size = fs->rmb.size;
  int server_rmb_fd = -1;
  fs->link = shm_connect(acc.gid, hello, fs->rmb.handle, deadline, &server_rmb_fd);
  if (!fs->link) return decline(fd, clc::decline::kNoSmcDevice, Fallback::kNoFabric, deadline);
  shm_release_handle(&fs->rmb);  // the server holds its own reference now
  fs->peer.rkey = acc.rmb_rkey;
  fs->peer.vaddr = acc.rmb_vaddr;
  if (!shm_map_remote(server_rmb_fd, peer_size, &fs->peer))
    return decline(fd, clc::decline::kRtokenError, Fallback::kProtocolError, deadline);
  fs->gid = id.gid;
  fs->mac = id.mac;
  fs->qpn = hello.client_qpn;
  fs->psn = random_nonzero_u24();
  fs->mtu_code = acc.mtu_code;
  return std::nullopt;
}

#ifdef SMCR_HAVE_VERBS
// A new link on `port` with our RMB registered in its protection domain.
static VerbsLink* verbs_link_with_rmb(int fd, const VerbsPort& port, int64_t deadline, FabricSetup* fs,
                                      std::optional<HandshakeOutcome>* failed) {
  std::string why;
  auto link = VerbsLink::create(port, &why);
  if (!link) {
    SMCR_LOG(1, "verbs: %s", why.c_str());
    *failed = decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline);
    return nullptr;
  }
  VerbsLink* v = link.get();
  fs->link = std::move(link);
  if (!v->register_rmb(handshake_config().rmb_size, &fs->rmb)) {
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
  VerbsLink* v = verbs_link_with_rmb(fd, port, deadline, fs, &failed);
  if (!v) return failed;
  std::string why;
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
  RemoteRmb peer;
  if (!claim_peer_rmb(g, acc.rmb_rkey, acc.rmb_vaddr, acc.rmbe_index, peer_size, &peer))
    return decline(fd, clc::decline::kRtokenError, Fallback::kProtocolError, deadline);
  LocalRmb rmb;
  if (!add_rmb_to_group(g, &rmb)) {
    g->link()->release_remote_rmb(&peer);
    return decline(fd, clc::decline::kRtokenError, Fallback::kResources, deadline);
  }
  clc::AcceptConfirm conf = rmb_message(clc::Type::kConfirm, false, g->local(), 0, rmb);
  g->expect_token(conf.rmbe_alert_token);
  if (!send_all(fd, clc::encode(conf), deadline)) {
    g->forget_token(conf.rmbe_alert_token);
    g->link()->release_remote_rmb(&peer);
    g->link()->free_local_rmb(&rmb);
    return terminate(Fallback::kTimeout, ETIMEDOUT);
  }
  return establish_on(g, &rmb, peer, conf.rmbe_alert_token, acc.rmbe_alert_token, fd, false);
}

HandshakeOutcome clc_client(int fd, bool have_resources) {
  const HandshakeConfig& cfg = handshake_config();
  int64_t deadline = sys::now_ms() + cfg.timeout_ms;
  const ShmIdentity& id = shm_identity();
  if (!have_resources) return decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline);

  // The Proposal names one GID: ours on the shm fabric for a peer on this
  // host, the RoCE v2 GID of our interface otherwise (or when told to).
  clc::Proposal prop;
  prop.peer_id = id.peer_id;
  prop.gid = id.gid;
  prop.mac = id.mac;
#ifdef SMCR_HAVE_VERBS
  std::optional<VerbsPort> port;
  bool want_verbs = fabric_preference() == FabricPreference::kVerbs ||
                    (fabric_preference() == FabricPreference::kAuto && !peer_is_this_host(fd));
  if (want_verbs) port = verbs_port_for(fd);
  if (port) {
    prop.gid = port->gid;
    prop.mac = port->mac;
  }
#endif
  fill_ip_area(fd, &prop);
  if (!send_all(fd, clc::encode(prop), deadline)) return terminate(Fallback::kTimeout, ETIMEDOUT);

  std::vector<uint8_t> msg;
  clc::Header h{};
  Recv r = recv_clc(fd, deadline, &msg, &h);
  if (r != Recv::kMessage || h.type != clc::Type::kAccept)
    return from_unexpected(fd, r, msg, h, deadline, "SMC Accept");
  clc::DecodeError err;
  auto acc = clc::decode_accept_confirm(msg, clc::Type::kAccept, &err);
  if (!acc) {
    SMCR_LOG(1, "CLC: bad Accept: %.*s", static_cast<int>(clc::to_string(err).size()), clc::to_string(err).data());
    return decline(fd, clc::decline::kProtocolError,
                   err == clc::DecodeError::kReservedValue ? Fallback::kReservedValue : Fallback::kProtocolError, deadline);
  }
  auto peer_size = rmb::decode_size(acc->rmbe_size_code);
  if (!peer_size) return decline(fd, clc::decline::kProtocolError, Fallback::kProtocolError, deadline);
  if (!acc->first_contact) {
    LinkGroup* g = LinkGroup::acquire_for_client(acc->peer_id, acc->gid, acc->mac, acc->qpn);
    if (!g) {
      // An F=0 Accept naming a link we do not have: out of sync (RFC C.4).
      clc::Decline d;
      d.peer_id = id.peer_id;
      d.diagnosis = clc::decline::kSyncError;
      d.out_of_sync = true;
      send_all(fd, clc::encode(d), deadline);
      return fallback(Fallback::kProtocolError, d.diagnosis);
    }
    HandshakeOutcome o = client_subsequent_contact(fd, g, *acc, *peer_size, deadline);
    g->release_hold();
    return o;
  }

  FabricSetup fs;
  std::optional<HandshakeOutcome> failed;
  if (shm_gid_is_local(acc->gid)) {
    failed = shm_client_setup(fd, *acc, *peer_size, deadline, &fs);
#ifdef SMCR_HAVE_VERBS
  } else if (port) {
    failed = verbs_client_setup(fd, *port, *acc, *peer_size, deadline, &fs);
#endif
  } else {
    return decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline);
  }
  if (failed) return *failed;

  LinkIdentity local{fs.gid, fs.mac, fs.qpn, fs.mtu_code};
  clc::AcceptConfirm conf = rmb_message(clc::Type::kConfirm, false, local, fs.psn, fs.rmb);
  if (!send_all(fd, clc::encode(conf), deadline)) return terminate(Fallback::kTimeout, ETIMEDOUT);

  HandshakeOutcome failure;
  auto cl = await_confirm_link(fd, fs.link.get(), *acc, deadline, &failure);
  if (!cl) return failure;
  llc::ConfirmLink reply;
  reply.reply = true;
  reply.sender_mac = fs.mac;
  reply.sender_gid = fs.gid;
  reply.sender_qpn = fs.qpn;
  reply.link_num = cl->link_num;
  reply.link_user_id = random_u32();
  reply.max_links = cl->max_links;
  // The group is registered before the reply goes out: the server may answer
  // the next connection with an F=0 Accept as soon as the reply arrives.
  Link* link = fs.link.get();
  LinkIdentity remote{acc->gid, acc->mac, acc->qpn, acc->mtu_code};
  HandshakeOutcome o = establish(Role::kClient, acc->peer_id, std::move(fs.link), cl->link_num, local, remote,
                                 &fs.rmb, fs.peer, conf.rmbe_alert_token, acc->rmbe_alert_token, fd);
  fs.peer = RemoteRmb{};  // owned by the connection now
  // If the reply cannot be sent the server resets the TCP connection; the link
  // is broken and the connection will report it.
  if (link->post_message(llc::encode(reply))) counters().llc_sent.fetch_add(1);
  return o;
}

// --------------------------------------------------------------- server

// The shm fabric, server side, before the Accept: our RMB and a pending
// rendezvous that only the holder of this Accept can claim.
static std::optional<HandshakeOutcome> shm_server_prepare(int fd, int64_t deadline, FabricSetup* fs) {
  if (!Engine::get().serve_shm_rendezvous())
    return decline(fd, clc::decline::kNoSmcDevice, Fallback::kNoFabric, deadline);
  if (!shm_alloc_rmb(handshake_config().rmb_size, &fs->rmb))
    return decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline);
  fs->qpn = ShmRendezvous::instance().expect(fs->rmb.rkey, fs->rmb.vaddr, fs->rmb.handle);
  fs->gid = shm_identity().gid;
  fs->mac = shm_identity().mac;
  fs->psn = random_nonzero_u24();
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
  shm_release_handle(&fs->rmb);  // passed to the client; the mapping stays
  if (arrived.hello.client_qpn != conf.qpn || arrived.hello.client_rkey != conf.rmb_rkey ||
      arrived.hello.client_vaddr != conf.rmb_vaddr || peer_size != arrived.hello.client_rmb_size ||
      !same_id(conf.gid, proposed_gid)) {
    sys::close(arrived.client_rmb_fd);
    return decline(fd, clc::decline::kRtokenError, Fallback::kProtocolError, deadline);
  }
  fs->peer.rkey = conf.rmb_rkey;
  fs->peer.vaddr = conf.rmb_vaddr;
  if (!shm_map_remote(arrived.client_rmb_fd, peer_size, &fs->peer))
    return decline(fd, clc::decline::kRtokenError, Fallback::kProtocolError, deadline);
  return std::nullopt;
}

#ifdef SMCR_HAVE_VERBS
static std::optional<HandshakeOutcome> verbs_server_prepare(int fd, const VerbsPort& port, int64_t deadline, FabricSetup* fs) {
  std::optional<HandshakeOutcome> failed;
  VerbsLink* v = verbs_link_with_rmb(fd, port, deadline, fs, &failed);
  if (!v) return failed;
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
static HandshakeOutcome server_subsequent_contact(int fd, LinkGroup* g, int64_t deadline) {
  LocalRmb rmb;
  if (!add_rmb_to_group(g, &rmb)) return decline(fd, clc::decline::kRtokenError, Fallback::kResources, deadline);
  clc::AcceptConfirm acc = rmb_message(clc::Type::kAccept, false, g->local(), 0, rmb);
  auto fail = [&](HandshakeOutcome o) {
    g->forget_token(acc.rmbe_alert_token);
    g->link()->free_local_rmb(&rmb);
    return o;
  };
  g->expect_token(acc.rmbe_alert_token);
  if (!send_all(fd, clc::encode(acc), deadline)) return fail(terminate(Fallback::kTimeout, ETIMEDOUT));
  std::vector<uint8_t> msg;
  clc::Header h{};
  Recv r = recv_clc(fd, deadline, &msg, &h);
  if (r != Recv::kMessage || h.type != clc::Type::kConfirm)
    return fail(from_unexpected(fd, r, msg, h, deadline, "SMC Confirm"));
  clc::DecodeError err;
  auto conf = clc::decode_accept_confirm(msg, clc::Type::kConfirm, &err);
  auto peer_size = conf ? rmb::decode_size(conf->rmbe_size_code) : std::nullopt;
  RemoteRmb peer;
  if (!conf || !peer_size || conf->qpn != g->remote().qpn || conf->gid != g->remote().gid ||
      !claim_peer_rmb(g, conf->rmb_rkey, conf->rmb_vaddr, conf->rmbe_index, *peer_size, &peer)) {
    SMCR_LOG(1, "CLC: subsequent-contact Confirm names no RMB or link of the group");
    return fail(terminate(Fallback::kProtocolError, ECONNRESET));
  }
  return establish_on(g, &rmb, peer, acc.rmbe_alert_token, conf->rmbe_alert_token, fd, false);
}

HandshakeOutcome clc_server(int fd, bool have_resources) {
  const HandshakeConfig& cfg = handshake_config();
  int64_t deadline = sys::now_ms() + cfg.timeout_ms;

  std::vector<uint8_t> msg;
  clc::Header h{};
  Recv r = recv_clc(fd, deadline, &msg, &h);
  if (r != Recv::kMessage || h.type != clc::Type::kProposal)
    return from_unexpected(fd, r, msg, h, deadline, "SMC Proposal");
  clc::DecodeError err;
  auto prop = clc::decode_proposal(msg, &err);
  if (!prop) {
    SMCR_LOG(1, "CLC: bad Proposal: %.*s", static_cast<int>(clc::to_string(err).size()), clc::to_string(err).data());
    return decline(fd, clc::decline::kProtocolError, Fallback::kProtocolError, deadline);
  }
  if (!have_resources) return decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline);
  if (!prop->offers_smcr_v1) return decline(fd, clc::decline::kModeUnsupported, Fallback::kNoFabric, deadline);

  // The server follows the fabric the client's GID names.
  bool shm = shm_gid_is_local(prop->gid);
  // Subsequent contact (RFC 3.5.2): a live group with this client.
  if (LinkGroup* g = LinkGroup::acquire_for_server(prop->peer_id, shm)) {
    HandshakeOutcome o = server_subsequent_contact(fd, g, deadline);
    g->release_hold();
    return o;
  }
  FabricSetup fs;
  std::optional<HandshakeOutcome> failed;
  if (shm) {
    failed = shm_server_prepare(fd, deadline, &fs);
  } else {
#ifdef SMCR_HAVE_VERBS
    auto port = verbs_port_for(fd);
    if (!port) return decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline);
    failed = verbs_server_prepare(fd, *port, deadline, &fs);
#else
    return decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline);
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
  clc::AcceptConfirm acc = rmb_message(clc::Type::kAccept, true, local, fs.psn, fs.rmb);
  if (!send_all(fd, clc::encode(acc), deadline)) return terminate(Fallback::kTimeout, ETIMEDOUT);

  r = recv_clc(fd, deadline, &msg, &h);
  if (r != Recv::kMessage || h.type != clc::Type::kConfirm) return from_unexpected(fd, r, msg, h, deadline, "SMC Confirm");
  auto conf = clc::decode_accept_confirm(msg, clc::Type::kConfirm, &err);
  if (!conf)
    return decline(fd, clc::decline::kProtocolError,
                   err == clc::DecodeError::kReservedValue ? Fallback::kReservedValue : Fallback::kProtocolError, deadline);
  auto peer_size = rmb::decode_size(conf->rmbe_size_code);
  if (!peer_size) return decline(fd, clc::decline::kProtocolError, Fallback::kProtocolError, deadline);
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
  req.link_user_id = random_u32();
  req.max_links = 2;
  if (!fs.link->post_message(llc::encode(req)))
    return decline(fd, clc::decline::kNoActiveLink, Fallback::kNoFabric, deadline);
  counters().llc_sent.fetch_add(1);
  uint8_t raw[kLinkMessageLen];
  // RFC C.7.1: a first link whose CONFIRM LINK is not answered ends the TCP connection.
  int64_t llc_deadline = sys::now_ms() + cfg.llc_timeout_ms;
  bool got = false;
  while (!got && !fs.link->failed()) {
    int64_t left = llc_deadline - sys::now_ms();
    if (left <= 0) break;
    got = fs.link->wait_message(raw, static_cast<int>(left));
  }
  if (!got) return terminate(Fallback::kTimeout, ETIMEDOUT);
  auto m = llc::decode(raw);
  auto* cl = m ? std::get_if<llc::ConfirmLink>(&*m) : nullptr;
  if (!cl || !cl->reply || cl->link_num != 1 || cl->sender_qpn != conf->qpn)
    return terminate(Fallback::kProtocolError, ECONNRESET);
  counters().llc_received.fetch_add(1);
  LinkIdentity remote{conf->gid, conf->mac, conf->qpn, conf->mtu_code};
  HandshakeOutcome o = establish(Role::kServer, prop->peer_id, std::move(fs.link), 1, local, remote, &fs.rmb, fs.peer,
                                 acc.rmbe_alert_token, conf->rmbe_alert_token, fd);
  fs.peer = RemoteRmb{};
  return o;
}

}  // namespace smcr
