// The CLC handshake, server side (RFC 7609 3.5; Linux: af_smc.c's
// smc_listen_*): the Proposal, our Accept, the client's Confirm, and the
// first link's CONFIRM LINK, or a subsequent contact on a live group.
#include "core/handshake_internal.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <variant>
#include <vector>

#include "core/clc.h"
#include "core/engine.h"
#include "core/fabric_shm.h"
#include "core/link_group.h"
#include "core/llc.h"
#include "core/rmb.h"
#include "core/smc_v2.h"
#include "core/sys.h"

namespace smcr {

namespace {

// True when the TCP connection under a handshake has ended: the peer's FIN
// or reset is queued (no CLC message is due while we wait on the link).
bool tcp_peer_gone(int fd) {
  char b;
  ssize_t n = sys::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
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

}  // namespace

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
  // Our turn on the group (one exchange at a time) may come after others'
  // CONFIRM RKEYs: the client waits for our Accept for long (a client whose
  // server answers late continues on a thread, clc_client_finish), so the
  // queue may take a CLC timeout of its own before the reply's LLC timeout.
  // (Bounded by the CLC deadline, a burst of 50 in the loaded TCG guest
  // declined 18-37 of them.)
  if (!add_rmb_to_group(g, conn_rmb_size(), handshake_config().timeout_ms + handshake_config().llc_timeout_ms,
                        &p->rmbs))
    return v2_terms ? decline(fd, clc::decline::kRegisterBufferError, Fallback::kResources, deadline, 2)
                    : decline(fd, clc::decline::kRtokenError, Fallback::kResources, deadline);
  clc::AcceptConfirm acc =
      rmb_message(clc::Type::kAccept, false, g->local(), 0, p->rmbs.local[static_cast<size_t>(g->primary_slot())], token);
  if (v2_terms) acc.v2 = clc::AcceptConfirmV2{v2_terms->eid, std::nullopt, {}};
  p->token = acc.rmbe_alert_token;
  g->expect_token(p->token);
  if (!send_all(fd, clc::encode(acc), deadline)) return p->fail(send_failed());
  // The client's time for its Confirm runs from our Accept, as Linux's
  // CLC wait does: it may have to queue its CONFIRM RKEY behind its
  // group's other handshakes first, and what it had not spent before our
  // Accept (waiting for it) is not ours to take.
  p->deadline = deadline = sys::now_ms() + handshake_config().timeout_ms;
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
  if (o.kind == HandshakeOutcome::Kind::kFallback && o.reason == Fallback::kPeerDeclined) {
    // The client declined our Accept (RFC 7609 C.3): both go on over TCP,
    // as when the Confirm was awaited inside accept(). The application's
    // number is relayed to the TCP socket (preload/takeover.cc), with what
    // it wrote meanwhile sent first.
  } else if (o.kind != HandshakeOutcome::Kind::kSmc && o.kind != HandshakeOutcome::Kind::kTerminate) {
    // Plain bytes or an end of stream where the Confirm belongs: the
    // client's state is unknown, so neither side may go on over TCP.
    SMCR_LOG(1, "CLC: no Confirm after our Accept: connection reset (the application already holds it)");
    o = terminate(o.reason, ECONNRESET);
  }
  p->group->release_hold();
  delete p;
  *out = o;
  return true;
}

int64_t confirm_deadline(const PendingConfirm* p) { return p->deadline; }

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
    // Without the verbs fabric a client GID not ours on shm is declined at once.
    if (!verbs_fabric_built()) return read_next(!shm || !Engine::get().serve_shm_rendezvous());
    return read_next(shm && !Engine::get().serve_shm_rendezvous());  // a first contact, unless declined at once
  } while (watch.again());
  return false;
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
  ScopedHandshakeContext context(rmb_size_for(request), request.bell_fd);
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
    failed = verbs_server_prepare(fd, v2_terms ? std::nullopt : prop->ece, v2_terms.has_value(), answer_version,
                                  deadline, &fs);
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
  } else {
    failed = verbs_server_complete(fd, *conf, *peer_size, deadline, &fs);
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
  // RFC 3.5.1.6: a second link before any data flows.
  std::optional<SecondLink> second;
  if (!shm && !v2_terms && (cl->max_links == 0 || cl->max_links >= 2) && max_links() >= 2)
    second = verbs_server_add_second_link(fs.link.get(), fs.rmb, *conf, *peer_size);
  fs.rmb = LocalRmb{};
  fs.peer = RemoteRmb{};
  auto* group = new LinkGroup(Role::kServer, prop->peer_id, std::move(fs.link), 1, local, remote);
  if (v2_terms) group->set_linux_v2();
  if (second) {
    int slot = group->add_link(std::move(second->link), kSecondLinkNum, second->local, second->remote);
    rmbs.local[static_cast<size_t>(slot)] = second->rmb;
    rmbs.peer[static_cast<size_t>(slot)] = second->peer;
  }
  group->note_peer_rmb(tokens_of(rmbs), group->shm() ? &rmbs.peer[0] : nullptr);
  HandshakeOutcome o = establish_on(group, &rmbs, acc.rmbe_alert_token, conf->rmbe_alert_token, fd, true);
  LinkGroup::register_group(group);
  Engine::get().add_group(group);
  return o;
}

}  // namespace smcr
