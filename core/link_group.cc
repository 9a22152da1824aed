#include "core/link_group.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <variant>
#include <vector>

#include "core/cdc.h"
#include "core/cdc_mem.h"
#include "core/connection.h"
#include "core/engine.h"
#include "core/env.h"
#include "core/fabric_shm.h"
#include "core/handoff.h"
#include "core/llc.h"
#include "core/log.h"
#include "core/mutex.h"
#include "core/random.h"
#include "core/sys.h"

namespace smcr {

namespace {

// Lock order: registry, then a group's mu_. A group decides to retire under
// its own mu_ and leaves the registry afterwards, never holding both.
Mutex g_registry_mu;
std::vector<LinkGroup*>& registry() SMCR_REQUIRES(g_registry_mu) {
  static auto* groups = new std::vector<LinkGroup*>();
  return *groups;
}

// Every message on a link is 44 bytes, whichever kind (dispatch).
static_assert(llc::kMessageLen == kLinkMessageLen && cdc::kMessageLen == kLinkMessageLen);
// A group never has more links than LLC can number, and one CONFIRM RKEY
// names a new RMB on every other link (add_rmb_to_group sends no
// CONTINUATION).
static_assert(kMaxGroupLinks <= llc::kMaxLinks);
static_assert(kMaxGroupLinks - 1 <= std::tuple_size_v<decltype(llc::ConfirmRkey{}.other_links)>);

// A server opens another link group with the same client (a first contact)
// rather than add a connection to a group this close to RFC 7609 8.2's limit
// of RMBs: the client's count of our RMBs trails ours by the DELETE RKEYs in
// flight.
constexpr size_t kGroupFullAt = rmb::PeerTable::kMax - 15;

uint64_t next_group_serial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

LinkGroup::LinkGroup(Role role, const clc::PeerId& peer, std::unique_ptr<Link> link, uint8_t link_num,
                     const LinkIdentity& local, const LinkIdentity& remote)
    : role_(role), peer_(peer), owner_generation_(process_generation()), serial_(next_group_serial()) {
  add_link(std::move(link), link_num, local, remote);
}

bool LinkGroup::shm() const { return std::strcmp(links_[0].link->fabric_name(), "shm") == 0; }

int LinkGroup::add_link(std::unique_ptr<Link> link, uint8_t link_num, const LinkIdentity& local,
                        const LinkIdentity& remote) {
  // A client's group is registered while its second link is added:
  // acquire_for_client and describe_all read the links under this lock.
  MutexLock lock(g_registry_mu);
  int slot = slots_used_.load(std::memory_order_relaxed);
  if (slot >= kMaxGroupLinks) return -1;
  GroupLink& l = links_[static_cast<size_t>(slot)];
  l.link = std::move(link);
  l.num = link_num;
  l.local = local;
  l.remote = remote;
  l.up.store(true, std::memory_order_release);
  slots_used_.store(slot + 1, std::memory_order_release);
  return slot;
}

int LinkGroup::slot_of_link_num(uint8_t num) const {
  for (int i = 0; i < link_slots(); ++i)
    if (links_[static_cast<size_t>(i)].num == num) return i;
  return -1;
}

int LinkGroup::primary_slot() const {
  for (int i = 0; i < link_slots(); ++i)
    if (link_up(i)) return i;
  return 0;
}

int LinkGroup::alternate_slot(int slot) const {
  for (int i = 0; i < link_slots(); ++i)
    if (i != slot && link_up(i) && !links_[static_cast<size_t>(i)].link->failed()) return i;
  return -1;
}

int LinkGroup::links_up() const {
  int n = 0;
  for (int i = 0; i < link_slots(); ++i) n += link_up(i) ? 1 : 0;
  return n;
}

namespace {
// A version-2 encoding as the 44 bytes a link posts. Every type we send is 44
// bytes in version 2 too (an ADD LINK with RTokens is the exception, and we
// send none); the continuations have no version-2 form and are never sent on
// such a group.
std::array<uint8_t, llc::kMessageLen> as_message(const std::vector<uint8_t>& v2) {
  std::array<uint8_t, llc::kMessageLen> out{};
  if (v2.size() == out.size()) std::copy(v2.begin(), v2.end(), out.begin());
  return out;
}
}  // namespace

std::array<uint8_t, llc::kMessageLen> LinkGroup::wire_for(uint8_t version, const llc::Message& m) {
  if (version != llc::v2::kVersion) return llc::encode(m);
  return as_message(llc::v2::encode(m));
}

void LinkGroup::post_llc(int slot, const std::array<uint8_t, 44>& msg) {
  // A Linux peer's LLC flows wait for our answers (its close() among them):
  // each message on such a group is worth a line at the default debug level.
  if (llc_version_ == llc::v2::kVersion)
    SMCR_LOG(1, "link %u: LLC out %02x flags %02x", link_num_at(slot), msg[0], msg[3]);
  if (link_at(slot)->post_message(msg)) counters().llc_sent.fetch_add(1, std::memory_order_relaxed);
}

void LinkGroup::register_group(LinkGroup* g) {
  MutexLock lock(g_registry_mu);
  registry().push_back(g);
}

namespace {
std::string hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}
}  // namespace

std::string LinkGroup::describe_all() {
  // Held (not locked) while described: describing takes connection locks,
  // and a connection's holder may be on its way into the registry lock.
  std::vector<LinkGroup*> groups;
  {
    MutexLock lock(g_registry_mu);
    for (LinkGroup* g : registry()) {
      if (g->owner_generation_ != process_generation()) continue;  // the parent's: see farewell_at_exit
      MutexLock glock(g->mu_);
      if (g->retired_) continue;
      ++g->users_;
      groups.push_back(g);
    }
  }
  std::string out;
  for (LinkGroup* g : groups) {
    std::vector<Connection*> conns;
    {
      MutexLock glock(g->mu_);
      for (auto& [token, c] : g->conns_)
        if (c->try_ref()) conns.push_back(c);
      char buf[400];
      snprintf(buf, sizeof buf,
               "group role=%s peer_id=%s links=%d links_up=%d primary_link=%u connections=%zu peer_rmbs=%zu "
               "state=%s\n",
               g->role_ == Role::kServer ? "server" : "client", hex(g->peer_.data(), 8).c_str(), g->link_slots(),
               g->links_up(), g->link_num(), g->conns_.size(), g->peer_rmbs_.size(), g->failed_ ? "failed" : "up");
      out += buf;
    }
    for (int i = 0; i < g->link_slots(); ++i) {
      const GroupLink& l = g->links_[static_cast<size_t>(i)];
      char buf[300];
      snprintf(buf, sizeof buf, "  link num=%u state=%s local_gid=%s local_qpn=%u remote_gid=%s remote_qpn=%u mtu_code=%u ",
               l.num, l.up ? "up" : "down", hex(l.local.gid.data(), 16).c_str(), l.local.qpn,
               hex(l.remote.gid.data(), 16).c_str(), l.remote.qpn, l.local.mtu_code);
      out += buf + l.link->describe() + "\n";
    }
    for (Connection* c : conns) {
      out += "  conn " + c->describe() + "\n";
      c->unref();
    }
    g->release_hold();
  }
  return out;
}

LinkGroup* LinkGroup::acquire_for_server(const clc::PeerId& client, bool shm, const clc::Gid* v2_client_gid) {
  MutexLock lock(g_registry_mu);
  for (LinkGroup* g : registry()) {
    if (g->role_ != Role::kServer || g->peer_ != client || g->shm() != shm || g->rehomed_ ||
        g->owner_generation_ != process_generation())
      continue;
    if ((g->llc_version_ == llc::v2::kVersion) != (v2_client_gid != nullptr) ||
        (v2_client_gid && g->remote().gid != *v2_client_gid))
      continue;
    MutexLock glock(g->mu_);
    if (g->retired_ || g->failed_) continue;
    if (static_cast<size_t>(g->users_) >= kGroupFullAt || g->peer_rmbs_.held_by_peer() >= kGroupFullAt) continue;
    ++g->users_;
    g->idle_since_ms_ = 0;
    return g;
  }
  return nullptr;
}

bool LinkGroup::serves_client(const clc::PeerId& client, bool shm, const clc::Gid* v2_client_gid) {
  LinkGroup* g = acquire_for_server(client, shm, v2_client_gid);
  if (!g) return false;
  g->release_hold();
  return true;
}

LinkGroup* LinkGroup::acquire_for_client(const clc::PeerId& server, const clc::Gid& gid, const clc::Mac& mac,
                                         uint32_t qpn) {
  MutexLock lock(g_registry_mu);
  for (LinkGroup* g : registry()) {
    if (g->role_ != Role::kClient || g->peer_ != server || g->rehomed_ || g->owner_generation_ != process_generation())
      continue;
    bool names_a_link = false;
    for (int i = 0; i < g->link_slots(); ++i) {
      const LinkIdentity& r = g->links_[static_cast<size_t>(i)].remote;
      names_a_link |= g->link_up(i) && r.gid == gid && r.mac == mac && r.qpn == qpn;
    }
    if (!names_a_link) continue;
    MutexLock glock(g->mu_);
    if (g->retired_ || g->failed_) continue;
    ++g->users_;
    return g;
  }
  return nullptr;
}

// SMCR_LGR_LINGER_MS: how long a server's group outlives its last
// connection (default 10 s; 0: it ends with it).
int64_t LinkGroup::linger_ms() {
  static const int64_t ms = env_long("SMCR_LGR_LINGER_MS", 10000, 0, LONG_MAX);
  return ms;
}

void LinkGroup::maybe_retire_locked() {
  if (users_ > 0 || retired_) return;
  if (role_ == Role::kClient && !failed_) return;  // the server ends the group
  if (!failed_ && linger_ms() > 0 && !rehomed_) {
    if (idle_since_ms_ == 0) idle_since_ms_ = std::max<int64_t>(sys::now_ms(), 1);
    return;
  }
  retired_ = true;
}

// Leaves the registry and hands the group to the engine to end it.
static void retire(LinkGroup* g) {
  {
    MutexLock lock(g_registry_mu);
    auto& r = registry();
    r.erase(std::remove(r.begin(), r.end(), g), r.end());
  }
  Engine::get().retire_group(g);
}

bool LinkGroup::retire_if_idle(int64_t now_ms) {
  int64_t idle_ms;
  {
    MutexLock lock(mu_);
    if (retired_ || users_ > 0 || idle_since_ms_ == 0 || now_ms - idle_since_ms_ < linger_ms()) return false;
    retired_ = true;
    idle_ms = now_ms - idle_since_ms_;
  }
  SMCR_LOG(2, "link group: idle for %lld ms, ending it", static_cast<long long>(idle_ms));
  retire(this);
  return true;
}

void LinkGroup::release_hold() {
  bool now_retired;
  {
    MutexLock lock(mu_);
    --users_;
    bool was = retired_;
    maybe_retire_locked();
    now_retired = retired_ && !was;
  }
  if (now_retired) retire(this);
}

LinkGroup* LinkGroup::make_rehomed(const LinkGroup& like, std::unique_ptr<Link> link) {
  const GroupLink& l = like.links_[static_cast<size_t>(like.primary_slot())];
  return make_carried(like.role_, like.peer_, std::move(link), l.num, l.local, l.remote);
}

LinkGroup* LinkGroup::make_carried(Role role, const clc::PeerId& peer, std::unique_ptr<Link> link, uint8_t link_num,
                                   const LinkIdentity& local, const LinkIdentity& remote) {
  auto* g = new LinkGroup(role, peer, std::move(link), link_num, local, remote);
  g->rehomed_ = true;
  return g;
}

LinkGroup* LinkGroup::rehome_connection(uint32_t token, std::unique_ptr<Link> link, const RemoteRmb& peer_view) {
  LinkGroup* fresh = make_rehomed(*this, std::move(link));
  bool moved = false;
  {
    // `fresh` is not registered yet: nobody else can take its lock.
    MutexLock lock(mu_);
    MutexLock fresh_lock(fresh->mu_);
    auto conn = conns_.find(token);
    moved = !failed_ && !retired_ && conn != conns_.end() && peer_rmbs_.move_sole_user(peer_view, &fresh->peer_rmbs_);
    if (moved) {
      fresh->conns_[token] = conn->second;  // with the group's reference
      ++fresh->users_;
      conns_.erase(conn);
      // users_ is not decremented: it is the caller's hold now.
    }
  }
  if (!moved) {
    // Unlocked: its destructor takes its lock to release what it holds.
    delete fresh;  // closes the link's end
    return nullptr;
  }
  register_group(fresh);
  return fresh;
}

size_t LinkGroup::connection_count() {
  MutexLock lock(mu_);
  return conns_.size();
}

void LinkGroup::expect_token(uint32_t token) {
  MutexLock lock(mu_);
  early_cdcs_[token];
}

void LinkGroup::forget_token(uint32_t token) {
  MutexLock lock(mu_);
  early_cdcs_.erase(token);
  if (auto b = early_bells_.find(token); b != early_bells_.end()) {
    sys::close(b->second);
    early_bells_.erase(b);
  }
}

void LinkGroup::add_connection(uint32_t token, Connection* c) {
  std::vector<std::array<uint8_t, 44>> early;
  int bell = -1;
  {
    MutexLock lock(mu_);
    conns_[token] = c;
    ++users_;
    idle_since_ms_ = 0;
    auto it = early_cdcs_.find(token);
    if (it != early_cdcs_.end()) {
      early.swap(it->second);
      early_cdcs_.erase(it);
    }
    if (auto b = early_bells_.find(token); b != early_bells_.end()) {
      bell = b->second;
      early_bells_.erase(b);
    }
  }
  for (const auto& raw : early)
    if (auto m = cdc::decode(raw)) c->on_cdc(*m);
  if (bell >= 0) c->set_peer_bell(bell);
}

void LinkGroup::remove_connection(uint32_t token) {
  Connection* c = nullptr;
  bool now_retired = false;
  {
    MutexLock lock(mu_);
    auto it = conns_.find(token);
    if (it == conns_.end()) return;
    c = it->second;
    conns_.erase(it);
    --users_;
    bool was = retired_;
    maybe_retire_locked();
    now_retired = retired_ && !was;
  }
  c->unref();  // the group's reference
  if (now_retired) retire(this);
}

bool LinkGroup::llc_exchange(const std::array<uint8_t, 44>& request, int attach_fd, int timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  auto left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
  };
  mu_.lock();
  mu_.wait_for(exchange_cv_, left(), [&]() SMCR_REQUIRES(mu_) { return !exchange_busy_ || failed_.load(); });
  if (exchange_busy_ || failed_) {
    mu_.unlock();
    return false;
  }
  exchange_busy_ = true;
  // A reply is matched by its type, whichever version frames it.
  exchange_type_ = llc_version_ == llc::v2::kVersion && (request[0] >> 4) == llc::v2::kVersion ? request[0] & 0x0F
                                                                                                : request[0];
  exchange_done_ = false;
  exchange_ok_ = false;
  mu_.unlock();
  bool sent = link()->post_message_with_fd(request, attach_fd);
  mu_.lock();
  if (sent) {
    counters().llc_sent.fetch_add(1, std::memory_order_relaxed);
    mu_.wait_for(exchange_cv_, left(), [&]() SMCR_REQUIRES(mu_) { return exchange_done_ || failed_.load(); });
  }
  bool ok = sent && exchange_done_ && exchange_ok_;
  exchange_type_ = 0;
  exchange_busy_ = false;
  mu_.unlock();
  exchange_cv_.notify_all();  // the next in line
  return ok;
}

LinkGroup::~LinkGroup() {
  free_all_rmbs();
  for (auto& [token, fd] : early_bells_) sys::close(fd);
  for (auto& s : peer_ready_sets_) {
    if (uint8_t* page = s.page.load()) munmap(page, readyset::kPageBytes);
    if (int fd = s.bell_fd.load(); fd >= 0) sys::close(fd);
  }
}

bool LinkGroup::peer_ready_set(uint32_t id, uint8_t** page, int* bell_fd) const {
  if (id >= readyset::kMaxPerGroup) return false;
  const PeerReadySet& s = peer_ready_sets_[id];
  *page = s.page.load(std::memory_order_acquire);
  *bell_fd = s.bell_fd.load(std::memory_order_acquire);
  return *page && *bell_fd >= 0;
}

bool LinkGroup::next_ready_set_id(uint32_t* id) {
  uint32_t n = ready_set_ids_used_.fetch_add(1, std::memory_order_relaxed);
  if (n >= readyset::kMaxPerGroup) {
    ready_set_ids_used_.store(readyset::kMaxPerGroup, std::memory_order_relaxed);
    return false;
  }
  *id = n;
  return true;
}

void LinkGroup::install_peer_ready_set(const readyset::Announcement& a, int fd) {
  // Engine thread only. Each part once: a repeated one is dropped.
  PeerReadySet& s = peer_ready_sets_[a.id];
  if (a.part == readyset::Part::kBell) {
    // Whatever it is, it is only ever sent to with MSG_DONTWAIT.
    int expected = -1;
    if (!s.bell_fd.compare_exchange_strong(expected, fd, std::memory_order_release)) sys::close(fd);
    return;
  }
  uint8_t* page = readyset::map_remote(fd);
  sys::close(fd);
  if (!page) {
    SMCR_LOG(1, "link group: the peer's ready set %u is not a sealed page: not used", a.id);
    return;
  }
  uint8_t* none = nullptr;
  if (!s.page.compare_exchange_strong(none, page, std::memory_order_release)) munmap(page, readyset::kPageBytes);
}

bool LinkGroup::keepalive_tick(int slot, int64_t now_ms, int64_t interval_ms) {
  GroupLink& l = links_[static_cast<size_t>(slot)];
  if (!l.up || l.link->failed()) return false;
  if (l.last_rx_ms.load(std::memory_order_relaxed) == 0) l.last_rx_ms.store(now_ms, std::memory_order_relaxed);
  if (l.test_link_mismatch) {
    SMCR_LOG(1, "link %u: TEST LINK reply does not echo our data: link down", l.num);
    return false;
  }
  if (l.test_link_deadline_ms != 0) {
    if (now_ms < l.test_link_deadline_ms) return true;
    if (shm()) {
      // The peer is a process on this host, alive while its end of the
      // link is open (its death hangs the link up): silent means stopped
      // (SIGSTOP, a debugger) or busy, and a loopback TCP connection
      // outlives that. redis' replication test stops a replica for longer
      // than the keepalive interval and expects its link back.
      SMCR_LOG(1, "link %u: no TEST LINK reply within the LLC timeout: the peer process is stopped or busy", l.num);
      l.test_link_deadline_ms = 0;
      l.last_rx_ms.store(now_ms, std::memory_order_relaxed);
      return true;
    }
    SMCR_LOG(1, "link %u: no TEST LINK reply within the LLC timeout: link down", l.num);
    return false;
  }
  if (now_ms - l.last_rx_ms.load(std::memory_order_relaxed) < interval_ms) return true;
  llc::TestLink probe;
  // No probe rather than one whose echo a stale or forged reply could
  // match; the link is not blamed for our missing randomness (the next
  // tick asks again, and a dead link still shows as a failed fd).
  if (!random_bytes(probe.user_data.data(), probe.user_data.size())) return true;
  l.test_link_data = probe.user_data;
  l.test_link_deadline_ms = now_ms + 2000;  // Linux: 2 s for LLC replies after first contact
  if (!l.link->post_message(wire(probe))) return false;
  counters().llc_sent.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void LinkGroup::dispatch(int slot, std::span<const uint8_t> msg) {
  links_[static_cast<size_t>(slot)].last_rx_ms.store(sys::now_ms(), std::memory_order_relaxed);
  if (llc_version_ == llc::v2::kVersion && !msg.empty() && (msg[0] >> 4) == llc::v2::kVersion) {
    // Linux's version-2 LLC, up to 8 KiB (its own length is checked by the
    // decoder).
    counters().llc_received.fetch_add(1, std::memory_order_relaxed);
    handle_llc(slot, msg);
    return;
  }
  if (msg.size() != kLinkMessageLen) {
    SMCR_LOG(1, "link: %zu-byte message (want 44): link down", msg.size());
    on_link_failure(slot);
    return;
  }
  if (auto r = handoff::decode_rehome(msg); r && shm()) {
    // A connection's move to another process of the peer (core/handoff.h).
    int fd = links_[static_cast<size_t>(slot)].link->take_attached_fd();
    if (r->reply) {
      if (fd >= 0) sys::close(fd);
      MutexLock lock(mu_);
      if (exchange_type_ == handoff::kRehomeMessageType) {
        exchange_ok_ = !r->negative;
        exchange_done_ = true;
        exchange_cv_.notify_all();
      }
      return;
    }
    Connection* c = nullptr;
    if (fd >= 0) {
      MutexLock lock(mu_);
      auto it = conns_.find(r->receiver_token);
      if (it != conns_.end() && it->second->try_ref()) c = it->second;
    }
    if (c && c->rehoming()) {  // both ends hand it over at once: both relay
      c->unref();
      c = nullptr;
    }
    if (!c) {
      if (fd >= 0) sys::close(fd);
      handoff::Rehome no;
      no.receiver_token = r->sender_token;
      no.sender_token = r->receiver_token;
      no.reply = no.negative = true;
      post_llc(slot, handoff::encode_rehome(no));
      return;
    }
    c->on_rehome_request(fd, r->sender_token);
    c->unref();
    return;
  }
  if (auto set = readyset::decode(msg); set && shm()) {
    // A ready set of the peer's epoll set (core/ready_set.h).
    int fd = links_[static_cast<size_t>(slot)].link->take_attached_fd();
    if (fd >= 0) install_peer_ready_set(*set, fd);
    return;
  }
  if (auto token = cdcmem::decode_bell(msg); token && shm()) {
    // A connection's readiness socket, for CDCs through memory.
    int fd = links_[static_cast<size_t>(slot)].link->take_attached_fd();
    if (fd < 0) return;
    Connection* c = nullptr;
    {
      MutexLock lock(mu_);
      auto it = conns_.find(*token);
      if (it != conns_.end() && it->second->try_ref()) {
        c = it->second;
      } else if (early_cdcs_.count(*token) && !early_bells_.count(*token)) {
        early_bells_[*token] = fd;
        return;
      }
    }
    if (!c) {
      sys::close(fd);
      return;
    }
    c->set_peer_bell(fd);
    c->unref();
    return;
  }
  switch (llc::classify(msg[0])) {
    case llc::Opcode::kCdc: {
      auto m = cdc::decode(msg);
      if (!m) {
        SMCR_LOG(1, "link: malformed CDC message: link down");
        on_link_failure(slot);
        return;
      }
      if (m->flags.failover_validation && !draining_others_) {
        // The peer moved this connection here from a link that failed (RFC
        // 4.6). What that link delivered before it failed may still wait in
        // its queue: process it first, so the validation sees it.
        draining_others_ = true;
        for (int i = 0; i < link_slots(); ++i)
          if (i != slot) link_at(i)->drain_messages([this, i](std::span<const uint8_t> b) { dispatch(i, b); });
        draining_others_ = false;
      }
      // The sender's readiness socket may ride on its first link CDC
      // (Connection::bell_owed_); it is taken before the CDC, as a bell
      // message sent ahead of it would have been.
      deliver_cdc(*m, msg, shm() ? links_[static_cast<size_t>(slot)].link->take_attached_fd() : -1);
      return;
    }
    case llc::Opcode::kLlc:
      counters().llc_received.fetch_add(1, std::memory_order_relaxed);
      handle_llc(slot, msg);
      return;
    case llc::Opcode::kDiscard:
      SMCR_LOG(2, "link: optional LLC type %02x discarded", msg[0]);
      return;
    case llc::Opcode::kProtocolError:
      SMCR_LOG(1, "link: unknown LLC type %02x: link down", msg[0]);
      on_link_failure(slot);
      return;
  }
}

void LinkGroup::deliver_cdc(const cdc::Message& m, std::span<const uint8_t> msg, int bell) {
  Connection* c = nullptr;
  {
    MutexLock lock(mu_);
    auto it = conns_.find(m.alert_token);
    if (it != conns_.end() && it->second->try_ref()) {
      c = it->second;
    } else if (auto e = early_cdcs_.find(m.alert_token); e != early_cdcs_.end()) {
      // Bounded: a peer cannot make us hold more than a window's worth.
      if (e->second.size() < 4096) {
        std::array<uint8_t, 44> copy;
        std::copy(msg.begin(), msg.end(), copy.begin());
        e->second.push_back(copy);
      }
      if (bell >= 0 && !early_bells_.count(m.alert_token)) {
        early_bells_[m.alert_token] = bell;
        bell = -1;
      }
      if (bell >= 0) sys::close(bell);
      return;
    }
  }
  if (!c) {
    if (bell >= 0) sys::close(bell);
    // A CDC for a connection that has ended (late consumer update) or a
    // forged token: nothing of ours is touched.
    SMCR_LOG(2, "link: CDC for unknown token %08x dropped", m.alert_token);
    return;
  }
  if (bell >= 0) c->set_peer_bell(bell);
  c->on_cdc(m);
  c->unref();
}

bool LinkGroup::take_from_app(std::span<const uint8_t> msg) {
  // Only a whole CDC; a failover validation makes the engine drain the other
  // links first, and a malformed CDC takes the link down: the engine's.
  if (msg.size() != kLinkMessageLen || llc::classify(msg[0]) != llc::Opcode::kCdc) return false;
  auto m = cdc::decode(msg);
  if (!m || m->flags.failover_validation) return false;
  deliver_cdc(*m, msg, -1);
  return true;
}

bool LinkGroup::app_poll(int slot, Link* link) {
  bool engine_owed = false;
  bool handed = link->app_poll([this](std::span<const uint8_t> m) { return take_from_app(m); }, &engine_owed);
  after_app_poll(slot, handed, engine_owed);
  return handed;
}

void LinkGroup::app_poll_end(int slot, Link* link, bool will_sleep) {
  bool engine_owed = false;
  bool handed =
      link->app_poll_end(will_sleep, [this](std::span<const uint8_t> m) { return take_from_app(m); }, &engine_owed);
  after_app_poll(slot, handed, engine_owed);
}

void LinkGroup::after_app_poll(int slot, bool handed, bool engine_owed) {
  if (handed) links_[static_cast<size_t>(slot)].last_rx_ms.store(sys::now_ms(), std::memory_order_relaxed);
  if (engine_owed) Engine::kick_links();
}

void LinkGroup::handle_llc(int slot, std::span<const uint8_t> msg) {
  GroupLink& l = links_[static_cast<size_t>(slot)];
  llc::DecodeError err;
  const bool v2 = llc_version_ == llc::v2::kVersion;
  if (v2) SMCR_LOG(1, "link %u: LLC in %02x flags %02x (%zu bytes)", l.num, msg[0], msg.size() > 3 ? msg[3] : 0, msg.size());
  if (v2 && msg[0] == ((llc::v2::kVersion << 4) | llc::v2::kReqAddLinkType)) {
    // A Linux client with another RNIC asks for a second link. We add none
    // to a version-2 group (we negotiate max_links 1): the bare reply ends
    // its request, which its RKey flows otherwise wait behind.
    auto req = llc::v2::decode_req_add_link(msg, &err);
    if (req && !req->reply) {
      llc::v2::ReqAddLink reply;
      reply.reply = true;
      post_llc(slot, as_message(llc::v2::encode(reply)));
    }
    return;
  }
  auto m = v2 ? llc::v2::decode(msg, &err) : llc::decode(msg, &err);
  if (!m && v2) {
    // Linux drops what it does not know on such a group; so do we.
    SMCR_LOG(1, "link %u: LLC message %02x (%zu bytes) ignored: %.*s", l.num, msg[0], msg.size(),
             static_cast<int>(llc::to_string(err).size()), llc::to_string(err).data());
    return;
  }
  if (!m) {
    SMCR_LOG(1, "link %u: malformed LLC (%.*s): link down", l.num, static_cast<int>(llc::to_string(err).size()),
             llc::to_string(err).data());
    on_link_failure(slot);
    return;
  }
  if (auto* t = std::get_if<llc::TestLink>(&*m)) {
    if (t->reply) {
      if (l.test_link_deadline_ms != 0) {
        l.test_link_mismatch = t->user_data != l.test_link_data;
        l.test_link_deadline_ms = 0;
        if (!l.test_link_mismatch) counters().test_links_answered.fetch_add(1, std::memory_order_relaxed);
      }
      return;
    }
    llc::TestLink reply = *t;
    reply.reply = true;
    post_llc(slot, wire(reply));
    return;
  }
  if (auto* d = std::get_if<llc::DeleteLink>(&*m)) {
    SMCR_LOG(1, "link %u: DELETE LINK %s (link %u, all=%d orderly=%d reason %08x) from peer", l.num,
             d->reply ? "reply" : "request", d->link_num, d->all_links, d->orderly, d->reason_code);
    if (d->all_links) {
      // The group ends (a server after its last connection, or a peer going
      // away): every connection on it has exchanged C, or is reset.
      fail_all_links();
      return;
    }
    if (d->reply) return;  // the peer has freed the link we deleted
    int target = slot_of_link_num(d->link_num);
    if (target < 0) {
      llc::DeleteLink reply = *d;
      reply.reply = true;
      reply.reason_code = llc::DeleteLink::kReasonUnknownLink;
      post_llc(slot, wire(reply));
      return;
    }
    if (role_ == Role::kClient) {
      // The server deletes a link (RFC 3.5.5.1): move off it, then confirm.
      link_down(target, false, "deleted by the server");
      llc::DeleteLink reply = *d;
      reply.reply = true;
      if (int via = alternate_slot(target); via >= 0) post_llc(via, wire(reply));
    } else if (link_up(target)) {
      // A client's DELETE LINK is a notification; the server runs the
      // exchange (RFC 3.5.5.1), with its own request to the client.
      link_down(target, true, "deleted by the client");
    }
    return;
  }
  if (auto* k = std::get_if<llc::ConfirmRkey>(&*m)) {
    if (k->reply) {
      MutexLock lock(mu_);
      if (exchange_type_ == static_cast<uint8_t>(llc::Type::kConfirmRkey)) {
        exchange_ok_ = !k->negative;
        exchange_done_ = true;
        exchange_cv_.notify_all();
      }
      return;
    }
    // The peer added an RMB (RFC 3.5.5.2.1): remember its RTokens on every
    // link (and, on shm, the memfd that came with it) for the Accept/Confirm
    // that names it.
    int fd = l.link->take_attached_fd();
    llc::ConfirmRkey reply = *k;
    reply.reply = true;
    PeerRmbTokens tokens;
    tokens.has[static_cast<size_t>(slot)] = true;
    tokens.rkey[static_cast<size_t>(slot)] = k->rkey;
    tokens.vaddr[static_cast<size_t>(slot)] = k->vaddr;
    for (size_t i = 0; i < std::min<size_t>(k->num_tokens, k->other_links.size()); ++i) {
      int other = slot_of_link_num(k->other_links[i].link_num);
      if (other < 0 || other == slot) continue;  // a link we do not have: it is down for us
      tokens.has[static_cast<size_t>(other)] = true;
      tokens.rkey[static_cast<size_t>(other)] = k->other_links[i].rkey;
      tokens.vaddr[static_cast<size_t>(other)] = k->other_links[i].vaddr;
    }
    {
      MutexLock lock(mu_);
      // Linux takes a repeated announcement as a success (PeerTable::announce).
      reply.negative = !peer_rmbs_.announce(static_cast<size_t>(slot), tokens, &fd, /*renew_repeated=*/v2);
    }
    if (fd >= 0) sys::close(fd);
    post_llc(slot, wire(reply));
    return;
  }
  if (auto* d = std::get_if<llc::DeleteRkey>(&*m)) {
    if (d->reply) {
      if (d->negative) SMCR_LOG(1, "link: peer did not know %u of our deleted RKeys (mask %02x)", d->count, d->error_mask);
      return;
    }
    // RKeys (on this link) of RMBs the peer deleted: forget them; an RKey we
    // never had gets a negative reply with its bit set (MSB = first).
    llc::DeleteRkey reply = *d;
    reply.reply = true;
    {
      MutexLock lock(mu_);
      auto s = static_cast<size_t>(slot);
      for (uint8_t i = 0; i < d->count && i < d->rkeys.size(); ++i) {
        uint32_t rkey = d->rkeys[i];
        if (!peer_rmbs_.forget(s, rkey, link())) {
          reply.negative = true;
          // Version 1: a bit per RKey, MSB first; version 2 (Linux): how
          // many, with the list zeroed.
          reply.error_mask = v2 ? static_cast<uint8_t>(reply.error_mask + 1)
                                : static_cast<uint8_t>(reply.error_mask | (0x80u >> i));
          SMCR_LOG(1, "link: DELETE RKEY for unknown RKey %08x", rkey);
        }
      }
    }
    if (v2) reply.rkeys.fill(0);
    post_llc(slot, wire(reply));
    return;
  }
  if (auto* a = std::get_if<llc::AddLink>(&*m); a && !a->reply && role_ == Role::kClient) {
    // Links are added while the group is set up (first contact, see
    // handshake.cc); later the group is at its maximum or has no spare
    // device for another symmetric link.
    llc::AddLink reject = *a;
    reject.reply = true;
    reject.rejected = true;
    reject.reason_code = llc::AddLink::kReasonNoAlternatePath;
    reject.v2_ext.reset();  // a version-2 reject is the 44-byte request echoed
    post_llc(slot, wire(reject));
    counters().add_link_rejected.fetch_add(1, std::memory_order_relaxed);
    SMCR_LOG(1, "link %u: ADD LINK (link %u) rejected: the group keeps one link", l.num, a->link_num);
    return;
  }
  SMCR_LOG(2, "link: LLC type %02x ignored", msg[0]);
}

void LinkGroup::farewell_at_exit(int timeout_ms) {
  auto ours = [](LinkGroup* g) {
    // A group inherited from the parent is not ours, and its lock may have
    // been taken by one of the parent's threads when it forked: never
    // locked here (set once, before the group is registered).
    if (g->owner_generation_ != process_generation()) return false;
    MutexLock glock(g->mu_);  // the engine thread retires groups
    return g->llc_version_ == llc::v2::kVersion && !g->shm() && g->owner_generation_ == process_generation() &&
           !g->failed_.load() && !g->retired_;
  };
  // No connection left, and the peer has deleted every RMB it announced.
  auto finished = [](LinkGroup* g) {
    MutexLock glock(g->mu_);
    return g->conns_.empty() && g->peer_rmbs_.all_deleted();
  };
  const int64_t deadline = sys::now_ms() + timeout_ms;
  for (;;) {
    bool busy = false;
    {
      MutexLock lock(g_registry_mu);
      for (LinkGroup* g : registry())
        if (ours(g) && !finished(g)) busy = true;
    }
    if (!busy || sys::now_ms() >= deadline) break;
    timespec ts{0, 5 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  MutexLock lock(g_registry_mu);
  for (LinkGroup* g : registry()) {
    // Only a group the peer has finished with: a DELETE LINK that crosses
    // the peer's own close (its DELETE RKEY flow) is left out; the peer then
    // finds our link gone on its own.
    if (!ours(g) || !finished(g)) continue;
    llc::DeleteLink d;
    d.all_links = true;
    d.orderly = true;
    d.reason_code = llc::DeleteLink::kReasonOperator;
    g->post_llc(g->primary_slot(), g->wire(d));
  }
}

void LinkGroup::terminate() {
  if (role_ != Role::kServer || failed_.load()) return;
  llc::DeleteLink d;
  d.all_links = true;
  d.orderly = true;
  d.reason_code = llc::DeleteLink::kReasonInactivity;
  post_llc(primary_slot(), wire(d));
}

void LinkGroup::on_link_failure(int slot) { link_down(slot, true, "failed"); }

void LinkGroup::link_down(int slot, bool notify_peer, const char* why) {
  GroupLink& l = links_[static_cast<size_t>(slot)];
  if (!l.up.exchange(false)) return;
  // Nothing more leaves through it: a late write of old bytes must not land
  // after the connections have moved on.
  l.link->take_down();
  int survivor = alternate_slot(slot);
  if (survivor < 0) {
    SMCR_LOG(1, "link %u %s: no other link, the group is down", l.num, why);
    fail_all_links();
    return;
  }
  counters().link_failovers.fetch_add(1, std::memory_order_relaxed);
  SMCR_LOG(1, "link %u %s: connections move to link %u", l.num, why, link_num_at(survivor));
  std::vector<Connection*> moving;
  {
    MutexLock lock(mu_);
    for (auto& [token, c] : conns_)
      if (c->try_ref()) moving.push_back(c);
  }
  for (Connection* c : moving) {
    c->on_link_down(slot);
    c->unref();
  }
  if (notify_peer) {
    llc::DeleteLink d;
    d.link_num = l.num;
    d.reason_code = llc::DeleteLink::kReasonLostPath;
    post_llc(survivor, wire(d));
  }
}

void LinkGroup::fail_all_links() {
  for (int i = 0; i < link_slots(); ++i)
    if (links_[static_cast<size_t>(i)].up.exchange(false)) links_[static_cast<size_t>(i)].link->take_down();
  if (failed_.exchange(true)) return;
  std::vector<Connection*> victims;
  bool now_retired = false;
  {
    MutexLock lock(mu_);
    for (auto& [token, c] : conns_)
      if (c->try_ref()) victims.push_back(c);
    exchange_cv_.notify_all();
    bool was = retired_;
    maybe_retire_locked();
    now_retired = retired_ && !was;
  }
  for (Connection* c : victims) {
    c->on_link_failure();
    c->unref();
  }
  if (now_retired) retire(this);
}

}  // namespace smcr
