#include "core/link_group.h"

#include <cstring>
#include <variant>
#include <vector>

#include "core/cdc.h"
#include "core/connection.h"
#include "core/engine.h"
#include "core/llc.h"
#include "core/log.h"

namespace smcr {

void LinkGroup::add_connection(uint32_t token, Connection* c) {
  std::lock_guard<std::mutex> lock(mu_);
  conns_[token] = c;
  ++users_;
}

void LinkGroup::remove_connection(uint32_t token) {
  Connection* c = nullptr;
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = conns_.find(token);
    if (it == conns_.end()) return;
    c = it->second;
    conns_.erase(it);
    last = --users_ == 0;
  }
  c->unref();  // the group's reference
  if (last) Engine::get().retire_group(this);
}

void LinkGroup::dispatch(std::span<const uint8_t> msg) {
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
        if (it != conns_.end() && it->second->try_ref()) c = it->second;
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
    if (!t->reply) {
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [token, c] : conns_)
      if (c->try_ref()) victims.push_back(c);
  }
  for (Connection* c : victims) {
    c->on_link_failure();
    c->unref();
  }
}

}  // namespace smcr
