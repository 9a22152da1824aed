// CDC messages of a connection (Linux net/smc: smc_cdc): building, posting
// and acknowledging ours, through memory or on the link, and processing the
// peer's (cursors, flags, close events).
#include "core/connection.h"

#include <pthread.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>
#include <unistd.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/time.h>

#include <algorithm>
#include <new>
#include <type_traits>
#include <cerrno>
#include <cstring>

#include "core/cdc_mem.h"
#include "core/link_group.h"
#include "core/ready_set.h"
#include "core/cpu_relax.h"
#include "core/engine.h"
#include "core/env.h"
#include "core/exec_carry.h"
#include "core/fabric_shm.h"
#ifdef SMCR_HAVE_VERBS
#include "core/fabric_verbs.h"
#endif
#include "core/handoff.h"
#include "core/link_group.h"
#include "core/log.h"
#include "core/short_flows.h"
#include "core/stream_copy.h"
#include "core/sys.h"
#include "core/connection_internal.h"

namespace smcr {

using namespace connection_internal;

void Connection::pull_cdc_locked() {
  // The control page is shared with the owner (MAP_SHARED memfd), and so are
  // the readiness socket and the link: a forked child that processed a CDC
  // on its stale copy of the connection would ring a doorbell byte into what
  // becomes its own data stream after the handover, take the owner's arming,
  // and post CDCs with stale cursors (the peer aborts). Only the owner reads.
  if (foreign()) return;
  if (!mem_.control || close_.released || !cdcmem::news(mem_.control, mem_.control_seen)) return;
  cdc::Message m;
  cdcmem::UrgentRecord urgent;
  if (!cdcmem::fetch(mem_.control, &mem_.control_seen, &m, &urgent)) return;
  if (m.alert_token != local_token_) {
    protocol_violation_locked("CDC in the control page names another connection");
    return;
  }
  if (urgent.valid && (!mem_.urgent_seen_valid || urgent.seq != mem_.urgent_seen)) {
    // The CDC that carried U may have been replaced by a newer one before we
    // looked: process it first, as the link would have delivered it. (When
    // it is the newest CDC itself, it is processed whole below: a stand-in
    // with its seq would make the real one look stale and lose its cursor
    // and flags.)
    mem_.urgent_seen_valid = true;
    mem_.urgent_seen = urgent.seq;
    cdc::Message u;
    u.seq = urgent.seq;
    u.alert_token = local_token_;
    u.producer = urgent.producer;
    u.consumer = tx_.cons_peer;
    u.flags.urgent_pending = u.flags.urgent_present = true;
    // Older than what we know already (its producer cursor behind ours:
    // its sequence number may have wrapped, see CdcSource), it came on the
    // link.
    auto known = rx_.space.used(rx_.prod, rx_.cons);
    auto at_urgent = unread_up_to_locked(urgent.producer);
    bool behind = rx_.seq_seen && known && (!at_urgent || *at_urgent < *known);
    if (urgent.seq != m.seq && !behind) process_cdc_locked(u, CdcSource::kMemory);
  }
  process_cdc_locked(m, CdcSource::kMemory);
}

bool Connection::cursor_updates_cheap_locked() const {
  uint8_t* page = fabric_.peer_rmb_on[static_cast<size_t>(fabric_.slot)].control;
  return page && !fabric_.link->failed() && may_ring_peer_locked(page);
}

bool Connection::wake_peer_locked(uint8_t* page, const cdc::Message& m, bool data_moved, bool window_moved) {
  if (mem_.peer_bell_fd < 0) fetch_peer_bell_locked(page);
  if (!may_ring_peer_locked(page)) {
    // The peer's readiness socket could not be fetched and has not reached
    // us yet (it rides the peer's first CDC on the link, which our engine
    // may not have taken when the application read that CDC from memory),
    // or the peer forbids direct rings (a handover). The CDC goes on the
    // link, but an arming for the peer's ready set is answered now, through
    // memory: otherwise a later write on an older connection of the same
    // peer, rung at once, overtook this one's data in the peer's epoll_wait
    // (redis' tests: a command on a new connection, then one on an old).
    if (data_moved) mark_peer_set_if_armed_locked(page, &m.producer);
    return false;
  }
  uint64_t want_data = data_moved ? cdcmem::load_want(page, cdcmem::Want::kData) : 0;
  uint64_t want_window = window_moved ? cdcmem::load_want(page, cdcmem::Want::kWindow) : 0;
  bool ring = want_data & cdcmem::kArmed;
  bool open = want_window & cdcmem::kArmed;
  if (!ring && !open) return true;
  auto ringing = cdcmem::ringing(page);
  ringing.fetch_add(1, std::memory_order_seq_cst);
  bool delivered = true;
  // Taken only as armed next to this CDC: an arming after the peer read
  // the data is not ours to answer.
  if (ring && !cdcmem::direct_forbidden(page) && cdcmem::take(page, cdcmem::Want::kData, want_data, m.producer)) {
    if (want_data & cdcmem::kForSet) {
      // For the peer's ready set; one we do not know (yet) hears of it
      // through the link, as before bells.
      delivered = mark_peer_set_locked(page);
    } else {
      char b = 'r';
      sys::send(mem_.peer_bell_fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
      counters().peer_doorbells.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // The peer's writer filled its own socket to block POLLOUT: empty it once
  // a third of its window is free (Connection::writable_enough_locked; the
  // arming stays for a later consumption until then).
  const uint32_t cap = rx_.space.capacity();
  if (open && cap - rx_.space.used(rx_.prod, m.consumer).value_or(cap) < writable_low_water(cap)) open = false;
  if (open && !cdcmem::direct_forbidden(page) && cdcmem::take(page, cdcmem::Want::kWindow, want_window, m.consumer)) {
    sys::empty_socket(mem_.peer_bell_fd);
  }
  ringing.fetch_sub(1, std::memory_order_seq_cst);
  return delivered;
}

void Connection::mark_peer_set_if_armed_locked(uint8_t* page, const cdc::Cursor* producer) {
  if (cdcmem::direct_forbidden(page)) return;
  uint64_t want_data = cdcmem::load_want(page, cdcmem::Want::kData);
  if (!(want_data & cdcmem::kArmed) || !(want_data & cdcmem::kForSet)) return;
  auto ringing = cdcmem::ringing(page);
  ringing.fetch_add(1, std::memory_order_seq_cst);
  // Taken only while direct wake-ups are allowed (a handover forbids them).
  if (!cdcmem::direct_forbidden(page) &&
      (producer ? cdcmem::take(page, cdcmem::Want::kData, want_data, *producer) : cdcmem::take_for_end(page, want_data)))
    mark_peer_set_locked(page);
  ringing.fetch_sub(1, std::memory_order_seq_cst);
}

bool Connection::mark_peer_set_locked(uint8_t* page) {
  cdcmem::ReadySetSlot where = cdcmem::ready_set_slot(page);
  if (!fabric_.group) return false;
  if (where.set_id != mem_.peer_set_id || !mem_.peer_set_page || mem_.peer_set_group != fabric_.group->serial()) {
    uint8_t* set_page = nullptr;
    int bell = -1;
    if (!fabric_.group->peer_ready_set(where.set_id, &set_page, &bell)) return false;
    mem_.peer_set_group = fabric_.group->serial();
    mem_.peer_set_id = where.set_id;
    mem_.peer_set_page = set_page;
    mem_.peer_set_bell_fd = bell;
  }
  if (readyset::mark(mem_.peer_set_page, where.slot)) {
    // MSG_DONTWAIT: whatever the peer did to its bell, we never block here.
    char b = 'w';
    sys::send(mem_.peer_set_bell_fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    counters().ready_set_wakes.fetch_add(1, std::memory_order_relaxed);
  }
  counters().ready_set_marks.fetch_add(1, std::memory_order_relaxed);
  return true;
}

cdc::Message Connection::next_cdc_locked(bool done, bool close, bool abort) {
  cdc::Message m;
  m.seq = ++tx_.seq;
  m.alert_token = fabric_.peer_token;
  m.producer = tx_.prod;
  m.consumer = rx_.cons;
  m.flags.writer_blocked = tx_.window_full || tx_.more_than_window;
  m.flags.urgent_pending = m.flags.urgent_present = tx_.urgent;
  m.flags.peer_done_writing = done || close_.sent_done;
  m.flags.peer_conn_closed = close;
  m.flags.peer_conn_abort = abort;
  return m;
}

bool Connection::send_cdc_locked(bool done, bool close, bool abort) {
  if (fabric_.link_dead || close_.sent_close || close_.sent_abort || close_.released) return false;
  cdc::Message m = next_cdc_locked(done, close, abort);
  if (!post_cdc_locked(m)) {
    counters().link_send_errors.fetch_add(1, std::memory_order_relaxed);
    counters().last_link_send_errno.store(errno, std::memory_order_relaxed);
    SMCR_LOG(1, "conn %08x: CDC send failed: %s", local_token_, strerror(errno));
    // The link failed under us: move to another one, whose replay carries
    // this CDC's cursors and flags (fail_over_locked posts them).
    if (done) close_.sent_done = true;
    if (close) close_.sent_close = true;
    if (abort) close_.sent_abort = true;
    if (fail_over_locked(tx_.prod)) {
      rx_.cons_sent = rx_.cons;
      rx_.peer_requested_update = false;
      return true;
    }
    fabric_.link_dead = true;
    return false;
  }
  rx_.cons_sent = rx_.cons;
  rx_.peer_requested_update = false;
  if (done) close_.sent_done = true;
  if (close) close_.sent_close = true;
  if (abort) close_.sent_abort = true;
  counters().cdc_sent.fetch_add(1, std::memory_order_relaxed);
  SMCR_LOG(2, "conn %08x: CDC out seq=%u prod=%u/%u cons=%u/%u B=%d D=%d C=%d A=%d", local_token_, m.seq,
           m.producer.wrap, m.producer.offset, m.consumer.wrap, m.consumer.offset, m.flags.writer_blocked,
           m.flags.peer_done_writing, close, abort);
  return true;
}

void Connection::pop_acked_locked(uint64_t completed, size_t at_most) {
#ifdef SMCR_HAVE_VERBS
  // A CDC holds a send queue slot until the adapter acknowledges it, so at
  // most kSendDepth are unacknowledged: a shallower ring would push out
  // (take for acknowledged, post_cdc_locked) one that is not, and a
  // failover would not replay it (SS, RFC 4.6).
  static_assert(kUnackedRing >= VerbsLink::kSendDepth, "the unacknowledged-CDC ring must cover the send queue");
#endif
  while (at_most-- > 0 && tx_.unacked_count > 0 && tx_.unacked[tx_.unacked_head].first <= completed) {
    tx_.seq_acked = tx_.unacked[tx_.unacked_head].second;
    tx_.unacked_head = (tx_.unacked_head + 1) % kUnackedRing;
    --tx_.unacked_count;
  }
}

bool Connection::post_cdc_locked(const cdc::Message& m) {
  // The link is the owner's: a CDC from a forked child's stale copy would
  // carry a sequence number and cursors the peer rejects.
  if (foreign()) return false;
  if (uint8_t* page = fabric_.peer_rmb_on[static_cast<size_t>(fabric_.slot)].control; page && !fabric_.link->failed()) {
    bool data_moved = !(m.producer == tx_.published_prod);
    const bool ends = m.flags.peer_conn_abort || m.flags.peer_conn_closed ||
                      (m.flags.peer_done_writing && !tx_.published_done);
    if (data_moved || ends) {
      // Since when the peer has had something unread from us: now, if it
      // had read all we published (as far as its last CDC told us; a stale
      // one leaves the older stamp, which only orders this one earlier).
      if (tx_.data_since == 0 || tx_.cons_peer == tx_.published_prod) tx_.data_since = sys::now_ns();
      cdcmem::set_ready_since(page, static_cast<uint64_t>(tx_.data_since));
    }
    cdcmem::publish(page, m);
    bool window_moved = !(m.consumer == tx_.published_cons);
    tx_.published_prod = m.producer;
    tx_.published_cons = m.consumer;
    // State changes also go on the link: the peer's engine must see them
    // even when no application thread of the peer is reading.
    bool state_change = m.flags.peer_conn_abort || m.flags.peer_conn_closed || m.flags.urgent_present ||
                        (m.flags.peer_done_writing && !tx_.published_done);
    tx_.published_done = m.flags.peer_done_writing;
    // Our C answering a peer that has closed and waits for nothing but it:
    // its engine reaps it from memory on a timer, without a wake-up for it.
    const bool welcomed_close = m.flags.peer_conn_closed && !m.flags.peer_conn_abort && !m.flags.urgent_present &&
                                !cdcmem::direct_forbidden(page) &&
                                cdcmem::close_in_memory_welcome(page, m.alert_token);
    if (state_change ? welcomed_close : wake_peer_locked(page, m, data_moved, window_moved)) {
      if (tx_.unacked_count == 0) tx_.seq_acked = m.seq;  // delivered: it is in the peer's memory
      counters().cdc_in_memory.fetch_add(1, std::memory_order_relaxed);
      if (welcomed_close) counters().close_in_memory.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    // The end goes on the link (below), through the peer's engine: a
    // parked peer's wait also finds it in memory at once, so that it is
    // not reported after what others sent it later (redis' replication
    // tests close a link, then ask the master about it on another).
    // A ready set's arming only: a plain one would need a byte on the
    // peer's readiness socket (tried in tree 7df61b7: a plain sockperf
    // client against an smc_run server then hung 3 runs in 5, cause not
    // found).
    if (ends) mark_peer_set_if_armed_locked(page, nullptr);
  }
  uint64_t id = 0;
  if (bell_rides_locked(m)) {
    // One link message (one wake-up of the peer's engine) for both.
    if (!fabric_.link->post_message_with_fd(cdc::encode(m), app_.engine_end)) return false;
    mem_.bell_owed = false;
    counters().bells_on_cdc.fetch_add(1, std::memory_order_relaxed);
  } else if (!fabric_.link->post_message_tracked(cdc::encode(m), &id)) {
    return false;
  }
  // A full ring cannot happen while the send queue is shallower than the
  // ring (its oldest entry is then acknowledged); kept safe regardless.
  if (tx_.unacked_count == kUnackedRing) pop_acked_locked(UINT64_MAX, 1);
  tx_.unacked[(tx_.unacked_head + tx_.unacked_count) % kUnackedRing] = {id, m.seq};
  ++tx_.unacked_count;
  pop_acked_locked(fabric_.link->completed_id(), kUnackedRing);
  return true;
}

std::optional<uint32_t> Connection::unread_up_to_locked(const cdc::Cursor& producer) const {
  return rx_.space.in_range(producer) ? rx_.space.used(producer, rx_.cons) : std::nullopt;
}

void Connection::process_cdc_locked(const cdc::Message& m, CdcSource from) {
  if (close_.released || close_.state == CloseState::kClosed) return;
  counters().cdc_received.fetch_add(1, std::memory_order_relaxed);
  if (m.flags.failover_validation) {
    // The peer moved to another link (RFC 4.6): its adapter had delivered
    // our CDCs up to m.seq, so we must have processed them; if not, bytes
    // or cursors were lost and the connection cannot continue.
    uint16_t have = rx_.seq_seen ? rx_.seq : 0;
    if (cdc::seq_newer(m.seq, have)) {
      SMCR_LOG(1, "conn %08x: failover validation: peer's CDC %u was delivered, we have %u", local_token_, m.seq, have);
      protocol_violation_locked("failover validation failed");
    }
    return;
  }
  if (from == CdcSource::kMemory) {
    // Newest by construction; the one a link message already brought (same
    // sequence number and cursors) needs nothing more.
    if (rx_.seq_seen && m.seq == rx_.seq && m.producer == rx_.prod && m.consumer == tx_.cons_peer) return;
  } else if (rx_.seq_seen && !cdc::seq_newer(m.seq, rx_.seq)) {
    SMCR_LOG(2, "conn %08x: stale CDC seq %u (last %u) discarded", local_token_, m.seq, rx_.seq);
    return;
  }
  rx_.seq = m.seq;
  rx_.seq_seen = true;
  SMCR_LOG(2, "conn %08x: CDC in seq=%u prod=%u/%u cons=%u/%u B=%d D=%d C=%d A=%d", local_token_, m.seq,
           m.producer.wrap, m.producer.offset, m.consumer.wrap, m.consumer.offset, m.flags.writer_blocked,
           m.flags.peer_done_writing, m.flags.peer_conn_closed, m.flags.peer_conn_abort);

  if (m.flags.peer_conn_abort) {
    // Bytes the peer wrote before it aborted stay readable (see
    // close_transition): the A may be the only CDC that announces them,
    // having replaced their own in the control page.
    if (!close_.aborted && !close_.peer_done && !close_.peer_closed) {
      auto old_used = rx_.space.used(rx_.prod, rx_.cons);
      auto new_used = unread_up_to_locked(m.producer);
      if (old_used && new_used && *new_used > *old_used) rx_.prod = m.producer;
    }
    close_.aborted = true;
    apply_close_event_locked(CloseEvent::kPeerAbort);
    signal_reset_locked();
    return;
  }
  if (close_.aborted) return;  // PeerAbortWait: ignore everything but A

  // Producer: may only move forward, and never past our consumer + capacity.
  auto old_used = rx_.space.used(rx_.prod, rx_.cons);
  auto new_used = unread_up_to_locked(m.producer);
  if (!new_used || *new_used < old_used.value_or(0)) {
    protocol_violation_locked("producer cursor out of range or moving backwards");
    return;
  }
  if (*new_used > *old_used && (close_.peer_done || close_.peer_closed)) {
    protocol_violation_locked("data after the peer's D/C");
    return;
  }
  // Consumer: may only move forward, and never past what we produced.
  auto old_out = tx_.space.used(tx_.prod, tx_.cons_peer);
  auto new_out = tx_.space.in_range(m.consumer) ? tx_.space.used(tx_.prod, m.consumer) : std::nullopt;
  if (!new_out || *new_out > old_out.value_or(0)) {
    protocol_violation_locked("consumer cursor out of range or beyond our producer");
    return;
  }
  bool data_arrived = *new_used > *old_used;
  bool window_opened = *new_out < *old_out;
  rx_.prod = m.producer;
  tx_.cons_peer = m.consumer;
  rx_.peer_writer_blocked = m.flags.writer_blocked;
  if (m.flags.request_update) rx_.peer_requested_update = true;
  if (window_opened) {
    tx_.window_full = false;
    if (writable_enough_locked()) make_writable_locked();
  }
  if (data_arrived) ring_readable_locked();
  if (data_arrived && m.flags.urgent_present) urgent_arrived_locked(m.producer);
  if (m.flags.peer_conn_closed && !close_.peer_closed) {
    close_.peer_closed = true;
    close_.peer_done = true;
    // The FIN that follows the peer's C tells nothing more (on_tcp_peer_gone
    // ignores it): without the watch it does not wake the engine.
    if (tcp_fd_ >= 0) connection_services().unwatch_tcp(this);
    apply_close_event_locked(CloseEvent::kPeerClosed);
    signal_eof_locked();
    // A writer waiting for a window the peer will never open again (it
    // closed with our bytes unread: TCP's peer would reset) goes on to the
    // after-close path in sendv rather than wait for ever.
    make_writable_locked();
  } else if (m.flags.peer_done_writing && !close_.peer_done) {
    close_.peer_done = true;
    apply_close_event_locked(CloseEvent::kPeerDone);
    signal_eof_locked();
  }
  // The peer may be blocked on a window we already opened locally.
  if (rx_.peer_writer_blocked && rx_.space.used(rx_.cons, rx_.cons_sent).value_or(0) > 0)
    maybe_send_consumer_update_locked();
}

}  // namespace smcr
