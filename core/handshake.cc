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

struct RmbGuard {
  LocalRmb rmb;
  ~RmbGuard() {
    if (rmb.addr) shm_free_rmb(&rmb);
  }
};

bool same_id(const clc::Gid& a, const clc::Gid& b) { return a == b; }

// The handshake succeeded: the link becomes a link group, the RMBs a
// connection, and the engine starts watching the link.
HandshakeOutcome establish(Role role, const clc::PeerId& peer_id, std::unique_ptr<Link> link, uint8_t link_num,
                           LocalRmb* rmb, const RemoteRmb& peer_rmb, uint32_t local_token, uint32_t peer_token,
                           int tcp_fd) {
  const char* fabric = link->fabric_name();
  auto* group = new LinkGroup(role, peer_id, std::move(link), link_num);
  ConnectionSetup s;
  s.group = group;
  s.rmb = *rmb;
  s.peer_rmb = peer_rmb;
  s.local_token = local_token;
  s.peer_token = peer_token;
  s.rmbe_base = 4;
  s.tcp_fd = tcp_fd;
  s.active = role == Role::kClient;
  *rmb = LocalRmb{};  // owned by the connection now
  HandshakeOutcome o;
  o.kind = HandshakeOutcome::Kind::kSmc;
  o.conn = Connection::create(s);
  Engine::get().add_group(group);
  (s.active ? counters().smc_active : counters().smc_passive).fetch_add(1);
  SMCR_LOG(1, "CLC: %s SMC-R over %s (token %08x, RMB %u, peer RMB %u)", s.active ? "client" : "server", fabric,
           local_token, s.rmb.size, peer_rmb.size);
  return o;
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

HandshakeOutcome clc_client(int fd, bool have_resources) {
  const HandshakeConfig& cfg = handshake_config();
  int64_t deadline = sys::now_ms() + cfg.timeout_ms;
  const ShmIdentity& id = shm_identity();
  if (!have_resources) return decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline);

  clc::Proposal prop;
  prop.peer_id = id.peer_id;
  prop.gid = id.gid;
  prop.mac = id.mac;
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
  if (!shm_gid_is_local(acc->gid))
    return decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline);
  if (!acc->first_contact) {
    // We never keep a link group across connections yet: an F=0 Accept
    // names a link we do not have (RFC C.4).
    clc::Decline d;
    d.peer_id = id.peer_id;
    d.diagnosis = clc::decline::kSyncError;
    d.out_of_sync = true;
    send_all(fd, clc::encode(d), deadline);
    return fallback(Fallback::kProtocolError, d.diagnosis);
  }
  auto peer_size = rmb::decode_size(acc->rmbe_size_code);
  if (!peer_size) return decline(fd, clc::decline::kProtocolError, Fallback::kProtocolError, deadline);

  RmbGuard local;
  if (!shm_alloc_rmb(cfg.rmb_size, &local.rmb)) return decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline);
  ShmHello hello;
  hello.server_qpn = acc->qpn;
  hello.server_rkey = acc->rmb_rkey;
  hello.server_vaddr = acc->rmb_vaddr;
  hello.client_qpn = random_nonzero_u24();
  hello.client_rkey = local.rmb.rkey;
  hello.client_vaddr = local.rmb.vaddr;
  hello.client_rmb_size = local.rmb.size;
  int server_rmb_fd = -1;
  std::unique_ptr<ShmLink> link = shm_connect(acc->gid, hello, local.rmb.handle, deadline, &server_rmb_fd);
  if (!link) return decline(fd, clc::decline::kNoSmcDevice, Fallback::kNoFabric, deadline);
  shm_release_handle(&local.rmb);  // the server holds its own reference now
  RemoteRmb peer;
  peer.rkey = acc->rmb_rkey;
  peer.vaddr = acc->rmb_vaddr;
  if (!shm_map_remote(server_rmb_fd, *peer_size, &peer))
    return decline(fd, clc::decline::kRtokenError, Fallback::kProtocolError, deadline);

  clc::AcceptConfirm conf;
  conf.type = clc::Type::kConfirm;
  conf.peer_id = id.peer_id;
  conf.gid = id.gid;
  conf.mac = id.mac;
  conf.qpn = hello.client_qpn;
  conf.rmb_rkey = local.rmb.rkey;
  conf.rmbe_index = 1;
  conf.rmbe_alert_token = random_u32() | 1;
  conf.rmbe_size_code = rmb::encode_size(local.rmb.size);
  conf.mtu_code = acc->mtu_code;
  conf.rmb_vaddr = local.rmb.vaddr;
  conf.psn = random_nonzero_u24();
  if (!send_all(fd, clc::encode(conf), deadline)) {
    shm_unmap_remote(&peer);
    return terminate(Fallback::kTimeout, ETIMEDOUT);
  }

  // First contact: wait for the server's CONFIRM LINK on the new link, or a
  // Decline on TCP (the server may still fall back until it has sent it).
  int64_t llc_deadline = sys::now_ms() + cfg.llc_timeout_ms;
  for (;;) {
    int64_t left = llc_deadline - sys::now_ms();
    pollfd p[2] = {{link->notify_fd(), POLLIN, 0}, {fd, POLLIN, 0}};
    int n = left > 0 ? sys::poll(p, 2, static_cast<int>(left)) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      shm_unmap_remote(&peer);
      return decline(fd, clc::decline::kTimeoutConfirmLink, Fallback::kTimeout, deadline);
    }
    if (p[1].revents) {
      Recv rr = recv_clc(fd, sys::now_ms() + 1000, &msg, &h);
      shm_unmap_remote(&peer);
      return from_unexpected(fd, rr, msg, h, deadline, "CONFIRM LINK");
    }
    uint8_t raw[kLinkMessageLen];
    if (!link->wait_message(raw, 0)) {
      shm_unmap_remote(&peer);
      return decline(fd, clc::decline::kNoActiveLink, Fallback::kNoFabric, deadline);
    }
    auto m = llc::decode(raw);
    auto* cl = m ? std::get_if<llc::ConfirmLink>(&*m) : nullptr;
    if (!cl || cl->reply || cl->sender_qpn != acc->qpn || !same_id(cl->sender_gid, acc->gid)) {
      shm_unmap_remote(&peer);
      return decline(fd, clc::decline::kProtocolError, Fallback::kProtocolError, deadline);
    }
    llc::ConfirmLink reply;
    reply.reply = true;
    reply.sender_mac = id.mac;
    reply.sender_gid = id.gid;
    reply.sender_qpn = hello.client_qpn;
    reply.link_num = cl->link_num;
    reply.link_user_id = random_u32();
    reply.max_links = cl->max_links;
    if (!link->post_message(llc::encode(reply))) {
      shm_unmap_remote(&peer);
      return decline(fd, clc::decline::kNoActiveLink, Fallback::kNoFabric, deadline);
    }
    counters().llc_received.fetch_add(1);
    counters().llc_sent.fetch_add(1);
    return establish(Role::kClient, acc->peer_id, std::move(link), cl->link_num, &local.rmb, peer,
                     conf.rmbe_alert_token, acc->rmbe_alert_token, fd);
  }
}

HandshakeOutcome clc_server(int fd, bool have_resources) {
  const HandshakeConfig& cfg = handshake_config();
  int64_t deadline = sys::now_ms() + cfg.timeout_ms;
  const ShmIdentity& id = shm_identity();

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
  if (!shm_gid_is_local(prop->gid)) return decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline);
  if (!Engine::get().serve_shm_rendezvous())
    return decline(fd, clc::decline::kNoSmcDevice, Fallback::kNoFabric, deadline);

  RmbGuard local;
  if (!shm_alloc_rmb(cfg.rmb_size, &local.rmb)) return decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline);
  auto& rv = ShmRendezvous::instance();
  uint32_t qpn = rv.expect(local.rmb.rkey, local.rmb.vaddr, local.rmb.handle);

  clc::AcceptConfirm acc;
  acc.type = clc::Type::kAccept;
  acc.first_contact = true;
  acc.peer_id = id.peer_id;
  acc.gid = id.gid;
  acc.mac = id.mac;
  acc.qpn = qpn;
  acc.rmb_rkey = local.rmb.rkey;
  acc.rmbe_index = 1;
  acc.rmbe_alert_token = random_u32() | 1;
  acc.rmbe_size_code = rmb::encode_size(local.rmb.size);
  acc.mtu_code = 5;
  acc.rmb_vaddr = local.rmb.vaddr;
  acc.psn = random_nonzero_u24();
  ShmRendezvous::Pending arrived;
  auto abandon = [&] { rv.wait_arrival(qpn, 0, &arrived) && (sys::close(arrived.link_fd), sys::close(arrived.client_rmb_fd), true); };
  if (!send_all(fd, clc::encode(acc), deadline)) {
    abandon();
    return terminate(Fallback::kTimeout, ETIMEDOUT);
  }

  r = recv_clc(fd, deadline, &msg, &h);
  if (r != Recv::kMessage || h.type != clc::Type::kConfirm) {
    abandon();
    return from_unexpected(fd, r, msg, h, deadline, "SMC Confirm");
  }
  auto conf = clc::decode_accept_confirm(msg, clc::Type::kConfirm, &err);
  if (!conf) {
    abandon();
    return decline(fd, clc::decline::kProtocolError,
                   err == clc::DecodeError::kReservedValue ? Fallback::kReservedValue : Fallback::kProtocolError, deadline);
  }
  if (!rv.wait_arrival(qpn, deadline, &arrived))
    return decline(fd, clc::decline::kTimeoutConfirmLink, Fallback::kTimeout, deadline);
  auto link = std::make_unique<ShmLink>(arrived.link_fd);
  shm_release_handle(&local.rmb);  // passed to the client; the mapping stays
  auto peer_size = rmb::decode_size(conf->rmbe_size_code);
  if (arrived.hello.client_qpn != conf->qpn || arrived.hello.client_rkey != conf->rmb_rkey ||
      arrived.hello.client_vaddr != conf->rmb_vaddr || !peer_size || *peer_size != arrived.hello.client_rmb_size ||
      !same_id(conf->gid, prop->gid)) {
    sys::close(arrived.client_rmb_fd);
    return decline(fd, clc::decline::kRtokenError, Fallback::kProtocolError, deadline);
  }
  RemoteRmb peer;
  peer.rkey = conf->rmb_rkey;
  peer.vaddr = conf->rmb_vaddr;
  if (!shm_map_remote(arrived.client_rmb_fd, *peer_size, &peer))
    return decline(fd, clc::decline::kRtokenError, Fallback::kProtocolError, deadline);

  llc::ConfirmLink req;
  req.sender_mac = id.mac;
  req.sender_gid = id.gid;
  req.sender_qpn = qpn;
  req.link_num = 1;
  req.link_user_id = random_u32();
  req.max_links = 2;
  if (!link->post_message(llc::encode(req))) {
    shm_unmap_remote(&peer);
    return decline(fd, clc::decline::kNoActiveLink, Fallback::kNoFabric, deadline);
  }
  counters().llc_sent.fetch_add(1);
  uint8_t raw[kLinkMessageLen];
  // RFC C.7.1: a first link whose CONFIRM LINK is not answered ends the TCP connection.
  if (!link->wait_message(raw, cfg.llc_timeout_ms)) {
    shm_unmap_remote(&peer);
    return terminate(Fallback::kTimeout, ETIMEDOUT);
  }
  auto m = llc::decode(raw);
  auto* cl = m ? std::get_if<llc::ConfirmLink>(&*m) : nullptr;
  if (!cl || !cl->reply || cl->link_num != 1 || cl->sender_qpn != conf->qpn) {
    shm_unmap_remote(&peer);
    return terminate(Fallback::kProtocolError, ECONNRESET);
  }
  counters().llc_received.fetch_add(1);
  return establish(Role::kServer, prop->peer_id, std::move(link), 1, &local.rmb, peer, acc.rmbe_alert_token,
                   conf->rmbe_alert_token, fd);
}

}  // namespace smcr
