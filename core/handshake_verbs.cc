// The verbs fabric's steps of the CLC handshake (handshake_internal.h): the
// port a Proposal names, a link with our RMB on each side, and the second
// link of a first contact (RFC 7609 3.5.1.6; Linux: smc_llc.c's add link).
// Built only where rdma-core's headers are (core/CMakeLists.txt).
#include "core/handshake_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "core/clc.h"
#include "core/env.h"
#include "core/fabric_verbs.h"
#include "core/link_group.h"
#include "core/llc.h"
#include "core/smc_v2.h"
#include "core/sys.h"

namespace smcr {

namespace {

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
  auto* l2 = static_cast<VerbsLink*>(out.link.get());
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
  auto* l2 = static_cast<VerbsLink*>(l.link.get());
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

}  // namespace

bool verbs_fabric_built() { return true; }

// Client, building its Proposal.
VerbsPortRef verbs_client_offer(int fd, bool have_local, const sockaddr_storage& local_addr,
                                const sockaddr_storage& peer, clc::Proposal* prop) {
  std::optional<VerbsPort> port;
  bool want_verbs = fabric_preference() == FabricPreference::kVerbs ||
                    (fabric_preference() == FabricPreference::kAuto && !(have_local && peer_is_this_host(fd, local_addr, peer)));
  if (want_verbs) port = verbs_port_for(fd);
  if (!port) return nullptr;
  prop->gid = port->gid;
  prop->mac = port->mac;
  // ECE travels in the Proposal's gap (see clc.h), only where the device has it.
  if (auto ece = verbs_device_ece(*port)) prop->ece = clc::Ece{ece->vendor_id, ece->options};
  // SMC-Rv2 too where we share a UEID with the network (a Linux kernel
  // peer takes nothing else over RoCE v2): Linux's version-2 layout, whose
  // SMC-D area takes the gap ECE would ride in.
  prop->v2 = v2::client_offer(port->gid);
  if (prop->v2) prop->ece.reset();
  return std::make_shared<const VerbsPort>(std::move(*port));
}

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
  if (!v->alloc_rmb(conn_rmb_size(), &fs->rmb)) {
    *failed = decline(fd, clc::decline::kNoMemory, Fallback::kResources, deadline);
    return nullptr;
  }
  return v;
}

// The verbs fabric, client side, after the Accept: QP, RMB registered in its
// PD, QP to RTR/RTS against the server's QPN/PSN/GID.
std::optional<HandshakeOutcome> verbs_client_setup(int fd, const VerbsPort& port, const clc::AcceptConfirm& acc,
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

std::optional<HandshakeOutcome> verbs_server_prepare(int fd, const std::optional<clc::Ece>& client_ece, bool linux_v2,
                                                     uint8_t answer_version, int64_t deadline, FabricSetup* fs) {
  auto port = verbs_port_for(fd);
  if (port && linux_v2 && !v2::ipv4_mapped(port->gid)) port.reset();
  if (!port) return decline(fd, clc::decline::kNoSmcRDevice, Fallback::kNoFabric, deadline, answer_version);
  std::optional<HandshakeOutcome> failed;
  VerbsLink* v = verbs_link_with_rmb(fd, *port, deadline, fs, &failed, linux_v2);
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

std::optional<HandshakeOutcome> verbs_server_complete(int fd, const clc::AcceptConfirm& conf, uint32_t peer_size,
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

void verbs_client_add_second_link(LinkGroup* g, Link* first, const clc::AcceptConfirm& acc, uint32_t peer_size,
                                  ConnRmbs* rmbs, std::optional<std::array<uint8_t, 44>>* stray) {
  client_add_second_link(g, static_cast<VerbsLink*>(first), acc, peer_size, rmbs, stray);
}

std::optional<SecondLink> verbs_server_add_second_link(Link* first, const LocalRmb& rmb,
                                                       const clc::AcceptConfirm& conf, uint32_t peer_size) {
  return server_add_second_link(static_cast<VerbsLink*>(first), rmb, conf, peer_size);
}

}  // namespace smcr
