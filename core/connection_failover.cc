// Link failover of a connection (RFC 7609 4.6): moving to a surviving
// link of the group, replaying unacknowledged writes, or ending it.
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

void Connection::on_link_failure() {
  InboxItem item;
  item.down_slot = kAllLinks;
  park(item);
}

void Connection::on_link_down(int slot) {
  InboxItem item;
  item.down_slot = slot;
  park(item);
}

void Connection::link_down_locked(int slot) {
  if (close_.released || close_.state == CloseState::kClosed || fabric_.link_dead || slot != fabric_.slot) return;
  if (fail_over_locked(tx_.prod)) return;
  if (mem_.control) {
    shm_link_ended_locked();
    return;
  }
  fabric_.link_dead = true;
  peer_lost_locked("link failed, no other link");
}

bool Connection::fail_over_locked(cdc::Cursor replay_end) {
  if (!fabric_.group) return false;
  int to = fabric_.group->alternate_slot(fabric_.slot);
  if (to < 0) return false;
  RemoteRmb& target = fabric_.peer_rmb_on[static_cast<size_t>(to)];
  if (target.size == 0) {
    SMCR_LOG(1, "conn %08x: the peer's RMB has no RToken on link %u", local_token_, fabric_.group->link_num_at(to));
    return false;
  }
  Link* old = fabric_.link;
  RemoteRmb& old_rmb = fabric_.peer_rmb_on[static_cast<size_t>(fabric_.slot)];
  // SS (RFC 4.6): our last CDC the failed link's adapter acknowledged.
  pop_acked_locked(old->completed_id(), kUnackedRing);
  tx_.unacked_head = tx_.unacked_count = 0;
  const uint8_t* mirror = old->written_mirror(old_rmb);
  SMCR_LOG(1, "conn %08x: moving from link %u to link %u (SS=%u, last seq %u)", local_token_,
           fabric_.group->link_num_at(fabric_.slot), fabric_.group->link_num_at(to), tx_.seq_acked, tx_.seq);
  fabric_.link = fabric_.group->link_at(to);
  fabric_.slot = to;
  counters().conn_failovers.fetch_add(1, std::memory_order_relaxed);

  // 1. Failover validation: the peer checks it has processed SS.
  cdc::Message v;
  v.seq = tx_.seq_acked;
  v.alert_token = fabric_.peer_token;
  v.producer = tx_.prod;
  v.consumer = rx_.cons;
  v.flags.failover_validation = true;
  if (!fabric_.link->post_message(cdc::encode(v))) return false;
  // 2. Everything the peer may not have consumed is written again (same
  // bytes at the same offsets: harmless where they had arrived), merged
  // under one new sequence number (RFC 4.6, second option).
  if (!close_.sent_abort) {
    uint32_t unconsumed = tx_.space.used(replay_end, tx_.cons_peer).value_or(0);
    if (unconsumed > 0 && !mirror) return false;
    cdc::Cursor pos = tx_.cons_peer;
    while (unconsumed > 0) {
      uint32_t k = std::min(unconsumed, tx_.space.contiguous_to_end(pos));
      if (!fabric_.link->write_remote(target, pos.offset, mirror + pos.offset, k)) return false;
      pos = tx_.space.advance(pos, k);
      unconsumed -= k;
    }
  }
  // 3. The current cursors and flags, including a D, C or A already sent.
  if (!post_cdc_locked(next_cdc_locked(close_.sent_done, close_.sent_close, close_.sent_abort))) return false;
  rx_.cons_sent = rx_.cons;
  return true;
}

}  // namespace smcr
