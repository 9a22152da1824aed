// The CLC handshake, client side (RFC 7609 3.5; Linux: af_smc.c's
// smc_connect_*): the Proposal, the server's answer, and the first or a
// subsequent contact it asks for.
#include "core/handshake_internal.h"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <variant>
#include <vector>

#include "core/clc.h"
#include "core/engine.h"
#include "core/env.h"
#include "core/fabric_shm.h"
#include "core/link_group.h"
#include "core/llc.h"
#include "core/rmb.h"
#include "core/smc_v2.h"
#include "core/sys.h"

namespace smcr {

namespace {

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

}  // namespace

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

// SMCR_TEST_CONFIRM_DELAY_MS (fault injection for tests, default 0): a slow
// or hostile client, so that a test sees the server's accept() return
// before the Confirm arrives (HandshakeRequest::may_defer_confirm).
static void test_confirm_delay() {
  static const long confirm_delay_ms = env_long("SMCR_TEST_CONFIRM_DELAY_MS", 0, 0, 60000);
  if (confirm_delay_ms <= 0) return;
  timespec ts{confirm_delay_ms / 1000, (confirm_delay_ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// An F=0 Accept for a link of our group `g`: claim the server's announced
// RMB, announce ours, then Confirm naming the group's link. No CONFIRM LINK.
static HandshakeOutcome client_subsequent_contact(int fd, LinkGroup* g, const clc::AcceptConfirm& acc,
                                                  uint32_t peer_size, int64_t deadline) {
  uint32_t token = 0;
  if (!new_alert_token(&token)) return decline_no_randomness(fd, deadline);
  ConnRmbs rmbs;
  if (!claim_peer_rmb(g, acc.rmb_rkey, acc.rmb_vaddr, acc.rmbe_index, peer_size, &rmbs))
    return decline(fd, clc::decline::kRtokenError, Fallback::kProtocolError, deadline);
  // SMCR_TEST_DECLINE_AFTER_ACCEPT (fault injection for tests, default 0): a
  // client that declines the server's Accept (RFC 7609 C.3: a Decline where
  // the Confirm belongs), after SMCR_TEST_CONFIRM_DELAY_MS.
  static const bool decline_after_accept = env_long("SMCR_TEST_DECLINE_AFTER_ACCEPT", 0, 0, 1) != 0;
  if (decline_after_accept) {
    test_confirm_delay();
    free_conn_rmbs(g, &rmbs);
    return decline(fd, clc::decline::kRtokenError, Fallback::kResources, deadline);
  }
  // The server waits for our Confirm until its own deadline, which began
  // after ours: a Decline sent before ours reaches it in time.
  if (!add_rmb_to_group(g, conn_rmb_size(), rkey_exchange_budget_ms(deadline, kDeclineMarginMs), &rmbs)) {
    free_conn_rmbs(g, &rmbs);
    return decline(fd, clc::decline::kRtokenError, Fallback::kResources, deadline);
  }
  clc::AcceptConfirm conf =
      rmb_message(clc::Type::kConfirm, false, g->local(), 0, rmbs.local[static_cast<size_t>(g->primary_slot())], token);
  if (acc.v2) conf.v2 = v2::confirm_for(acc, g->local().gid);
  g->expect_token(conf.rmbe_alert_token);
  test_confirm_delay();
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
  VerbsPortRef port;  // the verbs port the Proposal named, if any
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
    int n = static_cast<int>(smcr::sys::raw_syscall(SYS_ppoll, &pf, 1, &ts, nullptr, 0));
    if (n > 0 || (n < 0 && errno != EINTR)) return true;  // bytes, end of stream or an error: decide now
  }
}

}  // namespace

static HandshakeOutcome client_after_proposal(int fd, const ClientContinuation& state, int64_t deadline);

HandshakeOutcome clc_client(int fd, const HandshakeRequest& req) {
  const HandshakeConfig& cfg = handshake_config();
  ScopedHandshakeContext context(rmb_size_for(req), req.bell_fd);
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
  VerbsPortRef port = verbs_client_offer(fd, have_local, local_addr, req.peer, &prop);
  if (have_local) fill_ip_area(local_addr, &prop);
  if (!send_all(fd, clc::encode(prop), deadline)) return send_failed();

  ClientContinuation state;
  state.req = req;
  state.offered_v2 = prop.v2.has_value();
  state.port = port;
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
  ScopedHandshakeContext context(rmb_size_for(state->req), state->req.bell_fd);
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
  const VerbsPortRef& port = state.port;
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
  } else if (port) {
    failed = verbs_client_setup(fd, *port, *acc, *peer_size, deadline, &fs);
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
  // A version-2 group keeps one link (an ADD LINK the peer sends anyway is
  // rejected by the group).
  if (!shm && !v2 && reply.max_links >= 2)
    verbs_client_add_second_link(group, link, *acc, *peer_size, &rmbs, &stray);
  group->note_peer_rmb(tokens_of(rmbs), group->shm() ? &rmbs.peer[0] : nullptr);
  HandshakeOutcome o = establish_on(group, &rmbs, conf.rmbe_alert_token, acc->rmbe_alert_token, fd, true);
  // The engine does not watch the group yet: this thread may still act for it.
  if (stray) group->dispatch(0, *stray);
  Engine::get().add_group(group);
  return o;
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

}  // namespace smcr
