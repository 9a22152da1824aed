#include "core/link_group.h"

#include <algorithm>
#include <cstring>
#include <variant>
#include <vector>

#include "core/cdc.h"
#include "core/connection.h"
#include "core/engine.h"
#include "core/llc.h"
#include "core/log.h"
#include "core/sys.h"

namespace smcr {

namespace {

// Lock order: registry, then a group's mu_. A group decides to retire under
// its own mu_ and leaves the registry afterwards, never holding both.
std::mutex g_registry_mu;
std::vector<LinkGroup*>& registry() {
  static auto* groups = new std::vector<LinkGroup*>();
  return *groups;
}

// RFC 7609 8.2: at most 255 RMBs per peer per link group.
constexpr size_t kMaxPeerRmbs = 255;

}  // namespace

bool LinkGroup::shm() const { return std::strcmp(link_->fabric_name(), "shm") == 0; }

void LinkGroup::register_group(LinkGroup* g) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
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
    std::lock_guard<std::mutex> lock(g_registry_mu);
    for (LinkGroup* g : registry()) {
      std::lock_guard<std::mutex> glock(g->mu_);
      if (g->retired_) continue;
      ++g->users_;
      groups.push_back(g);
    }
  }
  std::string out;
  for (LinkGroup* g : groups) {
    std::vector<Connection*> conns;
    {
      std::lock_guard<std::mutex> glock(g->mu_);
      for (auto& [token, c] : g->conns_)
        if (c->try_ref()) conns.push_back(c);
      char buf[400];
      snprintf(buf, sizeof buf,
               "group role=%s peer_id=%s link_num=%u local_gid=%s local_qpn=%u remote_gid=%s remote_qpn=%u "
               "mtu_code=%u connections=%zu peer_rmbs_pending=%zu state=%s\n",
               g->role_ == Role::kServer ? "server" : "client", hex(g->peer_.data(), 8).c_str(), g->link_num_,
               hex(g->local_.gid.data(), 16).c_str(), g->local_.qpn, hex(g->remote_.gid.data(), 16).c_str(),
               g->remote_.qpn, g->local_.mtu_code, g->conns_.size(), g->peer_rtokens_.size(),
               g->failed_ ? "failed" : "up");
      out += buf;
    }
    out += "  link " + g->link_->describe() + "\n";
    for (Connection* c : conns) {
      out += "  conn " + c->describe() + "\n";
      c->unref();
    }
    g->release_hold();
  }
  return out;
}

LinkGroup* LinkGroup::acquire_for_server(const clc::PeerId& client, bool shm) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  for (LinkGroup* g : registry()) {
    if (g->role_ != Role::kServer || g->peer_ != client || g->shm() != shm) continue;
    std::lock_guard<std::mutex> glock(g->mu_);
    if (g->retired_ || g->failed_) continue;
    ++g->users_;
    return g;
  }
  return nullptr;
}

LinkGroup* LinkGroup::acquire_for_client(const clc::PeerId& server, const clc::Gid& gid, const clc::Mac& mac,
                                         uint32_t qpn) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  for (LinkGroup* g : registry()) {
    if (g->role_ != Role::kClient || g->peer_ != server || g->remote_.gid != gid || g->remote_.mac != mac ||
        g->remote_.qpn != qpn)
      continue;
    std::lock_guard<std::mutex> glock(g->mu_);
    if (g->retired_ || g->failed_) continue;
    ++g->users_;
    return g;
  }
  return nullptr;
}

void LinkGroup::maybe_retire_locked() {
  if (users_ > 0 || retired_) return;
  if (role_ == Role::kClient && !failed_) return;  // the server ends the group
  retired_ = true;
}

// Leaves the registry and hands the group to the engine to end it.
static void retire(LinkGroup* g) {
  {
    std::lock_guard<std::mutex> lock(g_registry_mu);
    auto& r = registry();
    r.erase(std::remove(r.begin(), r.end(), g), r.end());
  }
  Engine::get().retire_group(g);
}

void LinkGroup::release_hold() {
  bool now_retired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --users_;
    bool was = retired_;
    maybe_retire_locked();
    now_retired = retired_ && !was;
  }
  if (now_retired) retire(this);
}

size_t LinkGroup::connection_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return conns_.size();
}

void LinkGroup::expect_token(uint32_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  early_cdcs_[token];
}

void LinkGroup::forget_token(uint32_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  early_cdcs_.erase(token);
}

void LinkGroup::add_connection(uint32_t token, Connection* c) {
  std::vector<std::array<uint8_t, 44>> early;
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns_[token] = c;
    ++users_;
    auto it = early_cdcs_.find(token);
    if (it != early_cdcs_.end()) {
      early.swap(it->second);
      early_cdcs_.erase(it);
    }
  }
  for (const auto& raw : early)
    if (auto m = cdc::decode(raw)) c->on_cdc(*m);
}

void LinkGroup::remove_connection(uint32_t token) {
  Connection* c = nullptr;
  bool now_retired = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> serial(exchange_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  if (failed_) return false;
  exchange_type_ = request[0];
  exchange_done_ = false;
  exchange_ok_ = false;
  lock.unlock();
  bool sent = link_->post_message_with_fd(request, attach_fd);
  lock.lock();
  if (sent) {
    counters().llc_sent.fetch_add(1, std::memory_order_relaxed);
    exchange_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return exchange_done_ || failed_.load(); });
  }
  bool ok = sent && exchange_done_ && exchange_ok_;
  exchange_type_ = 0;
  return ok;
}

bool LinkGroup::take_peer_rtoken(uint32_t rkey, uint64_t vaddr, int* fd) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peer_rtokens_.find({rkey, vaddr});
  if (it == peer_rtokens_.end()) return false;
  *fd = it->second;
  peer_rtokens_.erase(it);
  peer_rkeys_in_use_.insert(rkey);
  return true;
}

void LinkGroup::note_peer_rkey(uint32_t rkey) {
  std::lock_guard<std::mutex> lock(mu_);
  peer_rkeys_in_use_.insert(rkey);
}

void LinkGroup::announce_rmb_deleted(uint32_t rkey) {
  if (failed_) return;
  llc::DeleteRkey d;
  d.count = 1;
  d.rkeys[0] = rkey;
  if (link_->post_message(llc::encode(d))) counters().llc_sent.fetch_add(1, std::memory_order_relaxed);
}

LinkGroup::~LinkGroup() {
  for (auto& [key, fd] : peer_rtokens_)
    if (fd >= 0) sys::close(fd);
}

bool LinkGroup::keepalive_tick(int64_t now_ms, int64_t interval_ms) {
  if (failed_) return false;
  if (last_rx_ms_ == 0) last_rx_ms_ = now_ms;
  if (test_link_mismatch_) {
    SMCR_LOG(1, "link: TEST LINK reply does not echo our data: link down");
    return false;
  }
  if (test_link_deadline_ms_ != 0) {
    if (now_ms < test_link_deadline_ms_) return true;
    SMCR_LOG(1, "link: no TEST LINK reply within the LLC timeout: link down");
    return false;
  }
  if (now_ms - last_rx_ms_ < interval_ms) return true;
  llc::TestLink probe;
  uint64_t r[2];
  ::syscall(SYS_getrandom, r, sizeof r, 0);
  std::memcpy(probe.user_data.data(), r, 16);
  test_link_data_ = probe.user_data;
  test_link_deadline_ms_ = now_ms + 2000;  // Linux: 2 s for LLC replies after first contact
  if (!link_->post_message(llc::encode(probe))) return false;
  counters().llc_sent.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void LinkGroup::dispatch(std::span<const uint8_t> msg) {
  last_rx_ms_ = sys::now_ms();
  if (msg.size() != kLinkMessageLen) {
    SMCR_LOG(1, "link: %zu-byte message (want 44): link down", msg.size());
    on_link_failure();
    return;
  }
  switch (llc::classify(msg[0])) {
    case llc::Opcode::kCdc: {
      auto m = cdc::decode(msg);
      if (!m) {
        SMCR_LOG(1, "link: malformed CDC message: link down");
        on_link_failure();
        return;
      }
      Connection* c = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = conns_.find(m->alert_token);
        if (it != conns_.end() && it->second->try_ref()) {
          c = it->second;
        } else if (auto e = early_cdcs_.find(m->alert_token); e != early_cdcs_.end()) {
          // Bounded: a peer cannot make us hold more than a window's worth.
          if (e->second.size() < 4096) {
            std::array<uint8_t, 44> copy;
            std::copy(msg.begin(), msg.end(), copy.begin());
            e->second.push_back(copy);
          }
          return;
        }
      }
      if (!c) {
        // A CDC for a connection that has ended (late consumer update) or a
        // forged token: nothing of ours is touched.
        SMCR_LOG(2, "link: CDC for unknown token %08x dropped", m->alert_token);
        return;
      }
      c->on_cdc(*m);
      c->unref();
      return;
    }
    case llc::Opcode::kLlc:
      counters().llc_received.fetch_add(1, std::memory_order_relaxed);
      handle_llc(msg);
      return;
    case llc::Opcode::kDiscard:
      SMCR_LOG(2, "link: optional LLC type %02x discarded", msg[0]);
      return;
    case llc::Opcode::kProtocolError:
      SMCR_LOG(1, "link: unknown LLC type %02x: link down", msg[0]);
      on_link_failure();
      return;
  }
}

void LinkGroup::handle_llc(std::span<const uint8_t> msg) {
  llc::DecodeError err;
  auto m = llc::decode(msg, &err);
  if (!m) {
    SMCR_LOG(1, "link: malformed LLC (%.*s): link down", static_cast<int>(llc::to_string(err).size()),
             llc::to_string(err).data());
    on_link_failure();
    return;
  }
  if (auto* t = std::get_if<llc::TestLink>(&*m)) {
    if (t->reply) {
      if (test_link_deadline_ms_ != 0) {
        test_link_mismatch_ = t->user_data != test_link_data_;
        test_link_deadline_ms_ = 0;
      }
      return;
    }
    {
      llc::TestLink reply = *t;
      reply.reply = true;
      link_->post_message(llc::encode(reply));
      counters().llc_sent.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  if (auto* d = std::get_if<llc::DeleteLink>(&*m)) {
    // A server ending the group after its last connection: every connection
    // on it has already exchanged C, so this only takes the link down.
    SMCR_LOG(1, "link: DELETE LINK (all=%d orderly=%d reason %08x) from peer", d->all_links, d->orderly,
             d->reason_code);
    on_link_failure();
    return;
  }
  if (auto* k = std::get_if<llc::ConfirmRkey>(&*m)) {
    if (k->reply) {
      std::lock_guard<std::mutex> lock(mu_);
      if (exchange_type_ == static_cast<uint8_t>(llc::Type::kConfirmRkey)) {
        exchange_ok_ = !k->negative;
        exchange_done_ = true;
        exchange_cv_.notify_all();
      }
      return;
    }
    // The peer added an RMB (RFC 3.5.5.2.1): remember its RToken (and, on
    // shm, the memfd that came with it) for the Accept/Confirm that names it.
    int fd = link_->take_attached_fd();
    llc::ConfirmRkey reply = *k;
    reply.reply = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto key = std::make_pair(k->rkey, k->vaddr);
      if (peer_rtokens_.size() >= kMaxPeerRmbs || peer_rtokens_.count(key)) {
        reply.negative = true;
      } else {
        peer_rtokens_[key] = fd;
        fd = -1;
      }
    }
    if (fd >= 0) sys::close(fd);
    if (link_->post_message(llc::encode(reply))) counters().llc_sent.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (auto* d = std::get_if<llc::DeleteRkey>(&*m)) {
    if (d->reply) {
      if (d->negative) SMCR_LOG(1, "link: peer did not know %u of our deleted RKeys (mask %02x)", d->count, d->error_mask);
      return;
    }
    // RKeys the peer deleted: forget them; an RKey we never had gets a
    // negative reply with its bit set (MSB = first).
    llc::DeleteRkey reply = *d;
    reply.reply = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (uint8_t i = 0; i < d->count && i < d->rkeys.size(); ++i) {
        uint32_t rkey = d->rkeys[i];
        bool known = peer_rkeys_in_use_.erase(rkey) > 0;
        for (auto it = peer_rtokens_.begin(); it != peer_rtokens_.end();) {
          if (it->first.first != rkey) {
            ++it;
            continue;
          }
          if (it->second >= 0) sys::close(it->second);
          it = peer_rtokens_.erase(it);
          known = true;
        }
        if (!known) {
          reply.negative = true;
          reply.error_mask = static_cast<uint8_t>(reply.error_mask | (0x80u >> i));
          SMCR_LOG(1, "link: DELETE RKEY for unknown RKey %08x", rkey);
        }
      }
    }
    if (link_->post_message(llc::encode(reply))) counters().llc_sent.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (auto* a = std::get_if<llc::AddLink>(&*m); a && !a->reply && role_ == Role::kClient) {
    // One fabric endpoint per process: a second link would be parallel (RFC 2.2).
    llc::AddLink reject = *a;
    reject.reply = true;
    reject.rejected = true;
    reject.reason_code = llc::AddLink::kReasonNoAlternatePath;
    link_->post_message(llc::encode(reject));
    counters().llc_sent.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  SMCR_LOG(2, "link: LLC type %02x ignored", msg[0]);
}

void LinkGroup::terminate() {
  if (role_ != Role::kServer || failed_.load()) return;
  llc::DeleteLink d;
  d.all_links = true;
  d.orderly = true;
  d.reason_code = llc::DeleteLink::kReasonInactivity;
  if (link_->post_message(llc::encode(d))) counters().llc_sent.fetch_add(1, std::memory_order_relaxed);
}

void LinkGroup::on_link_failure() {
  if (failed_.exchange(true)) return;
  std::vector<Connection*> victims;
  bool now_retired = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
