// A link group's RMBs and a connection's (core/rmb.h): the pool of ours,
// the table of the peer's, and the steps that set a connection's up and
// tear them down across the group's links.
#include <algorithm>
#include <utility>

#include "core/cdc_mem.h"
#include "core/env.h"
#include "core/fabric_shm.h"
#include "core/link_group.h"
#include "core/llc.h"
#include "core/log.h"
#include "core/rmb.h"
#include "core/sys.h"

namespace smcr {

namespace rmb {

// ------------------------------------------------------------ LocalPool

size_t LocalPool::max() {
  // Each one is an RMB of memory, mapped by both processes.
  static const size_t n = static_cast<size_t>(env_long("SMCR_RMB_POOL", 64, 0, 4096));
  return n;
}

void LocalPool::put(LocalRmbs* rmbs) {
  LocalRmb& ours = (*rmbs)[0];
  // A fresh start for the next connection: no CDC, no wait bits, no urgent
  // record (core/cdc_mem.h). Not the ringing count: a sender of the old
  // connection may still be inside a ring, and its decrement must find its
  // own increment.
  cdcmem::reset_for_reuse(ours.control);
  ours.handle = sys::hide_fd(ours.handle);  // kept for long, as PeerTable::give_back's
  rmbs_.push_back(*rmbs);
  *rmbs = {};
  counters().rmb_pooled.fetch_add(1, std::memory_order_relaxed);
}

bool LocalPool::take(uint32_t size, LocalRmbs* out) {
  auto it = std::find_if(rmbs_.begin(), rmbs_.end(), [&](const LocalRmbs& r) { return r[0].size == size; });
  if (it == rmbs_.end()) return false;
  *out = *it;
  rmbs_.erase(it);
  return true;
}

bool LocalPool::take_oldest(LocalRmbs* out) {
  if (rmbs_.empty()) return false;
  *out = rmbs_.front();
  rmbs_.erase(rmbs_.begin());
  return true;
}

std::vector<LocalRmbs> LocalPool::drain() { return std::exchange(rmbs_, {}); }

// ------------------------------------------------------------ PeerTable

bool PeerTable::all_deleted() const {
  return std::all_of(entries_.begin(), entries_.end(), [](const Entry& e) { return e.deleted; });
}

size_t PeerTable::held_by_peer() const {
  return static_cast<size_t>(std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) { return !e.deleted; }));
}

bool PeerTable::announce(size_t slot, const PeerRmbTokens& tokens, int* memfd, bool renew_repeated) {
  uint32_t rkey = tokens.rkey[slot];
  uint64_t vaddr = tokens.vaddr[slot];
  bool repeated = std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.tokens.on(slot, rkey, vaddr); });
  if (repeated && renew_repeated) {
    for (Entry& e : entries_)
      if (e.tokens.on(slot, rkey, vaddr) && e.deleted) {
        e.deleted = false;
        e.claimed = false;
      }
    return true;
  }
  if (repeated || held_by_peer() >= kMax) return false;
  Entry e;
  e.tokens = tokens;
  e.fd = std::exchange(*memfd, -1);
  entries_.push_back(e);
  return true;
}

void PeerTable::note(const PeerRmbTokens& tokens, const RemoteRmb* mapping) {
  Entry e;
  e.tokens = tokens;
  e.claimed = true;
  e.users = 1;
  if (mapping && mapping->addr && !mapping->alias) e.mapped = *mapping;
  entries_.push_back(e);
}

bool PeerTable::claim(size_t slot, uint32_t rkey, uint64_t vaddr, PeerRmbTokens* tokens, int* memfd,
                      RemoteRmb* mapped) {
  for (Entry& e : entries_) {
    if (e.deleted || !e.tokens.on(slot, rkey, vaddr)) continue;
    // Reuse: the peer names an RMB whose earlier connection has ended on its
    // side. Ours may not have processed that peer's C yet (it travels on the
    // link, the Accept on TCP), so the mapping may still be in use: it is
    // shared, and unmapped by the table.
    bool reused = mapped && e.mapped.addr;
    if (reused) {
      *mapped = e.mapped;
    } else {
      if (e.claimed) continue;
      e.claimed = true;
    }
    ++e.users;
    *tokens = e.tokens;
    *memfd = std::exchange(e.fd, -1);
    return true;
  }
  return false;
}

void PeerTable::adopt_mapping(const RemoteRmb& m) {
  for (Entry& e : entries_) {
    if (!e.tokens.names(m) || e.mapped.addr) continue;
    e.mapped = m;
    return;
  }
}

void PeerTable::drop(Entry* e, Link* unmapper) {
  if (e->mapped.addr) unmapper->release_remote_rmb(&e->mapped);
  e->mapped = RemoteRmb{};
  if (e->fd >= 0) sys::close(e->fd);
  e->fd = -1;
}

bool PeerTable::give_back(RemoteRmb* m, int* memfd, Link* unmapper) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    Entry& e = *it;
    if (!e.tokens.names(*m)) continue;
    bool ours = e.mapped.addr == m->addr;
    if (ours) *m = RemoteRmb{};
    if (ours && memfd && *memfd >= 0 && e.fd < 0 && e.claimed && !e.deleted) {
      // Kept for long: out of the application's numbers (a connection that
      // ended before its first data call still had it where it came).
      e.fd = sys::hide_fd(*memfd);
      *memfd = -1;
    }
    if (e.users > 0) --e.users;
    if (e.deleted && e.users == 0) {
      drop(&e, unmapper);
      entries_.erase(it);
    }
    return ours;
  }
  return false;
}

bool PeerTable::release(size_t slot, uint32_t rkey, Link* unmapper) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    Entry& e = *it;
    if (!e.tokens.has[slot] || e.tokens.rkey[slot] != rkey || e.users == 0) continue;
    if (--e.users > 0) return true;
    if (e.deleted) {
      drop(&e, unmapper);
      entries_.erase(it);
    } else {
      e.claimed = false;
    }
    return true;
  }
  return false;
}

bool PeerTable::forget(size_t slot, uint32_t rkey, Link* unmapper) {
  bool known = false;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!it->tokens.has[slot] || it->tokens.rkey[slot] != rkey) {
      ++it;
      continue;
    }
    known = true;
    if (it->users > 0) {
      it->deleted = true;  // its last user drops it (give_back)
      ++it;
      continue;
    }
    drop(&*it, unmapper);
    it = entries_.erase(it);
  }
  return known;
}

bool PeerTable::move_sole_user(const RemoteRmb& view, PeerTable* to) {
  // The mapping the connection writes into goes with it: the group's, and
  // used by this connection alone (a mapping shared with an ending
  // connection would be unmapped under one of them).
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const Entry& e) { return e.tokens.names(view) && e.mapped.addr == view.addr; });
  if (it == entries_.end() || it->users != 1) return false;
  to->entries_.push_back(*it);
  entries_.erase(it);
  return true;
}

void PeerTable::clear(Link* unmapper) {
  for (Entry& e : entries_) drop(&e, unmapper);
  entries_.clear();
}

}  // namespace rmb

// ------------------------------------------------- the group's RMB calls

bool LinkGroup::take_peer_rtoken(int slot, uint32_t rkey, uint64_t vaddr, PeerRmbTokens* tokens, int* fd,
                                 RemoteRmb* mapped) {
  MutexLock lock(mu_);
  return peer_rmbs_.claim(static_cast<size_t>(slot), rkey, vaddr, tokens, fd, mapped);
}

void LinkGroup::adopt_peer_mapping(const RemoteRmb& m) {
  MutexLock lock(mu_);
  peer_rmbs_.adopt_mapping(m);
}

void LinkGroup::return_peer_rmb(RemoteRmb* m) {
  MutexLock lock(mu_);
  if (!peer_rmbs_.give_back(m, nullptr, link()) && m->addr) link()->release_remote_rmb(m);
}

void LinkGroup::note_peer_rmb(const PeerRmbTokens& tokens, const RemoteRmb* mapping) {
  MutexLock lock(mu_);
  peer_rmbs_.note(tokens, mapping);
}

bool LinkGroup::take_pooled_rmb(uint32_t size, LocalRmbs* local) {
  MutexLock lock(mu_);
  // One link (the handshake builds no second shm link): a pooled RMB needs
  // no registration on links added since.
  if (failed_ || link_slots() != 1) return false;
  return rmb_pool_.take(size, local);
}

void LinkGroup::make_room_to_announce() {
  for (;;) {
    LocalRmbs evicted;
    {
      MutexLock lock(mu_);
      // users_ counts this handshake's hold, whose RMB this is.
      if (static_cast<size_t>(users_) + rmb_pool_.size() <= rmb::PeerTable::kMax || !rmb_pool_.take_oldest(&evicted))
        return;
    }
    counters().rmb_pool_evicted.fetch_add(1, std::memory_order_relaxed);
    announce_rmb_deleted(free_rmbs(&evicted, nullptr));
  }
}

size_t LinkGroup::pooled_rmbs() {
  MutexLock lock(mu_);
  return rmb_pool_.size();
}

std::array<uint32_t, kMaxGroupLinks> LinkGroup::free_rmbs(LocalRmbs* local, RemoteRmbs* peer, bool reusable,
                                                          int* peer_memfd) {
  std::array<uint32_t, kMaxGroupLinks> rkeys{};
  if (shm()) {
    MutexLock lock(mu_);
    // The group owns the mappings of the peer's RMBs: a connection's view
    // goes back (the loop below then unmaps only a mapping of its own).
    for (int i = 0; peer && i < link_slots(); ++i) {
      RemoteRmb& r = (*peer)[static_cast<size_t>(i)];
      if (r.addr && !r.alias) peer_rmbs_.give_back(&r, i == 0 ? peer_memfd : nullptr, link());
    }
    const LocalRmb& ours = (*local)[0];
    if (reusable && !failed_ && !retired_ && link_slots() == 1 && ours.addr && ours.control && rmb_pool_.has_room())
      rmb_pool_.put(local);
  }
  // Aliases before the registration that owns the memory.
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < link_slots(); ++i) {
      LocalRmb& r = (*local)[static_cast<size_t>(i)];
      if (!r.addr || r.alias != (pass == 0)) continue;
      rkeys[static_cast<size_t>(i)] = r.rkey;
      link_at(i)->free_local_rmb(&r);
    }
  }
  int released_slot = -1;
  uint32_t released_rkey = 0;
  for (int i = 0; peer && i < link_slots(); ++i) {
    RemoteRmb& r = (*peer)[static_cast<size_t>(i)];
    if (r.size && released_slot < 0) {
      released_slot = i;
      released_rkey = r.rkey;
    }
    if (r.size) link_at(i)->release_remote_rmb(&r);
    r = RemoteRmb{};
  }
  if (!shm() && released_slot >= 0) {
    // verbs: the table's entry for the peer's RMB goes once the peer deleted
    // it too (kept for ever, a group reached the 240 RMBs after which a
    // server opens another group, and RFC 7609 8.2's 255). Only after our
    // staging buffer for it is gone: a next connection the peer names it
    // for makes its own.
    MutexLock lock(mu_);
    peer_rmbs_.release(static_cast<size_t>(released_slot), released_rkey, link());
  }
  return rkeys;
}

void LinkGroup::announce_rmb_deleted(const std::array<uint32_t, kMaxGroupLinks>& rkey_by_slot) {
  if (failed_) return;
  int slot = primary_slot();
  if (rkey_by_slot[static_cast<size_t>(slot)] == 0) return;
  llc::DeleteRkey d;
  d.count = 1;
  d.rkeys[0] = rkey_by_slot[static_cast<size_t>(slot)];
  post_llc(slot, wire(d));
}

void LinkGroup::free_all_rmbs() {
  std::vector<LocalRmbs> pooled;
  {
    MutexLock lock(mu_);
    peer_rmbs_.clear(link());
    pooled = rmb_pool_.drain();
  }
  for (auto& rmbs : pooled) free_rmbs(&rmbs, nullptr);
}

// ------------------------------------------- a connection's, in its handshake

void free_conn_rmbs(LinkGroup* g, ConnRmbs* r) {
  // The peer may have our RMB from its CONFIRM RKEY: announced gone, as a
  // connection's (an RKey it never had gets a negative reply), or the
  // peer's table keeps it for the group's life.
  g->announce_rmb_deleted(g->free_rmbs(&r->local, &r->peer));
  sys::close_reset(&r->memfd);
  sys::close_reset(&r->peer_memfd);
}

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

bool add_rmb_to_group(LinkGroup* g, uint32_t size, int llc_timeout_ms, ConnRmbs* r) {
  // An RMB the peer already knows (its earlier connection ended in order).
  if (g->shm() && g->take_pooled_rmb(size, &r->local)) {
    counters().rmb_reused.fetch_add(1, std::memory_order_relaxed);
    r->memfd = std::exchange(r->local[0].handle, -1);  // the memfd its last connection left with it, or -1
    return true;
  }
  if (g->shm()) g->make_room_to_announce();
  int primary = g->primary_slot();
  LocalRmb& rmb = r->local[static_cast<size_t>(primary)];
  if (!g->link()->alloc_rmb(size, &rmb)) return false;
  llc::ConfirmRkey announce;
  announce.rkey = rmb.rkey;
  announce.vaddr = rmb.vaddr;
  for (int i = 0; i < g->link_slots(); ++i) {
    if (i == primary || !g->link_up(i)) continue;
    LocalRmb& alias = r->local[static_cast<size_t>(i)];
    if (!g->link_at(i)->register_alias(rmb, &alias) || announce.num_tokens >= announce.other_links.size()) continue;
    announce.other_links[announce.num_tokens++] = {g->link_num_at(i), alias.rkey, alias.vaddr};
  }
  if (!g->llc_exchange(g->wire(announce), g->shm() ? rmb.handle : -1, llc_timeout_ms)) {
    free_conn_rmbs(g, r);
    return false;
  }
  if (g->shm()) r->memfd = std::exchange(rmb.handle, -1);  // the peer holds its own reference now; ours is kept for an exec
  return true;
}

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

}  // namespace smcr
