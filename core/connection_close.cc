// Closing a connection (Linux net/smc: smc_close): the application's
// shutdown and close, the close state machine's events (core/close.h), a
// peer that vanished, the close timers, and releasing the resources.
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

namespace {

// PeerCloseWait / PeerAbortWait timer (RFC 4.8: like FIN_WAIT_2; no number given).
constexpr int64_t kCloseTimeoutMs = 10000;
// How long a C/A may trail the peer's TCP FIN/RST on the fabric.
constexpr int64_t kTcpGoneGraceMs = 1000;
// How often a connection that welcomed the peer's C in memory looks for it
// (welcome_close_in_memory_locked): its RMB returns to the pool that much
// later at most.
constexpr int64_t kCloseReapMs = 10;

}  // namespace

void Connection::process_exit() {
  // Before the lock: a forked child must not even take it (see foreign()).
  if (foreign()) return;
  Hold lock(*this);
  if (close_.app_closed || close_.released || move_.relayed) return;
  // A forked child still holds it: it lives on there (re-homed at exit,
  // handoff::finish_offers_at_exit), as the TCP socket's file would.
  if (handoff_ && shared_beyond_process()) {
    ref();  // for the handover thread; the fd table keeps its own
    if (hand_over_locked()) return;
    unref();
  }
  pull_cdc_locked();  // unread bytes make it a reset: see close_for_app_locked
  close_.app_closed = true;
  apply_close_event_locked(linger_abort_ ? CloseEvent::kAppAbort : CloseEvent::kAppClose);
}

int Connection::shutdown(int how) {
  if (foreign()) return static_cast<int>(refuse_foreign(local_token_));
  Hold lock(*this);
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
    errno = EINVAL;
    return -1;
  }
  if (how == SHUT_RD || how == SHUT_RDWR) {
    close_.shut_rd = true;
    signal_eof_locked();
  }
  if (how == SHUT_WR || how == SHUT_RDWR) {
    if (!close_.sent_done && !close_.sent_close && !close_.sent_abort && !close_.aborted) apply_close_event_locked(CloseEvent::kAppShutdownWrite);
    // As TCP's socket after SHUT_WR: writable from now on (a write fails at
    // once), and hung up (POLLHUP) once the peer's end follows: the
    // application's end of the readiness socket is shut for writing too.
    if (!close_.shut_wr && app_.fd >= 0) {
      close_.shut_wr = true;
      make_writable_locked();
      sys::shutdown(app_.fd, SHUT_WR);
    }
  }
  return 0;
}

void Connection::app_close(bool abortive) {
  Hold lock(*this);
  // As a TCP socket's file outlives close() while a forked child holds it
  // (even with SO_LINGER 0: only the last close resets).
  if (!close_.app_closed && !move_.relayed && handoff_ && shared_beyond_process() && !foreign() &&
      hand_over_locked())
    return;  // the handover thread owns the fd table's reference now
  close_for_app_locked(abortive);
  lock.unlock();
  unref();  // the fd table's reference
}

void Connection::close_for_app_locked(bool abortive) {
  if (!close_.app_closed) {
    close_.app_closed = true;
    // Whether bytes are unread (then a close resets, as TCP's) is decided by
    // the peer's latest cursor, which may be in memory and not seen yet.
    pull_cdc_locked();
    if (tx_.short_flow_key)
      shortflows::ended(tx_.short_flow_key, tx_.writes, tx_.bytes + rx_.bytes, sys::now_ms());
    apply_close_event_locked(abortive || linger_abort_ ? CloseEvent::kAppAbort : CloseEvent::kAppClose);
    welcome_close_in_memory_locked();
  }
  if (app_.fd >= 0) sys::close(app_.fd);
  if (app_.engine_end >= 0) sys::close(app_.engine_end);
  app_.fd = app_.engine_end = -1;
  if (close_.state == CloseState::kClosed) release_resources_locked();
}

void Connection::apply_close_event_locked(CloseEvent e) {
  CloseContext ctx;
  ctx.unread_data = !close_.aborted && rx_.space.used(rx_.prod, rx_.cons).value_or(0) > 0;
  ctx.app_closed = close_.app_closed;
  ctx.peer_closed = close_.peer_closed;
  CloseTransition t = close_transition(close_.state, e, ctx);
  if (!t.valid) return;
  CloseState prev = close_.state;
  close_.state = t.next;
  SMCR_LOG(1, "conn %08x: %s -> %s", local_token_, to_string(prev), to_string(close_.state));
  if (t.actions & kActSendAbort) {
    // The application's abortive close (SO_LINGER 0, unread data): TCP's peer
    // sees the reset before anything else (getpeername fails with ENOTCONN),
    // ours could read the A first while its TCP socket still answers. So the
    // TCP connection is reset before the A is posted: connect(AF_UNSPEC)
    // sends the RST and keeps the descriptor until release; our own reset is
    // no news of the peer for the watch.
    if (close_.app_closed && (t.actions & kActResetTcp) && tcp_fd_ >= 0) {
      connection_services().unwatch_tcp(this);
      sys::disconnect_tcp(tcp_fd_);
    }
    send_cdc_locked(false, false, true);
    counters().aborts.fetch_add(1, std::memory_order_relaxed);
  }
  if (t.actions & kActSendDone) send_cdc_locked(true, false, false);
  if (t.actions & kActSendClose) send_cdc_locked(false, true, false);
  if (t.actions & kActPurge) {
    close_.aborted = true;
    rx_.cons = rx_.prod;
  }
  if (t.actions & kActResetTcp) close_.tcp_reset = true;
  if (t.actions & kActWakeReaders) {
    if (close_.aborted) signal_reset_locked();
    else signal_eof_locked();
  }
  if (t.actions & kActStartTimer) {
    timer_deadline_.store(sys::now_ms() + kCloseTimeoutMs);
    connection_services().arm_timer(this);
  }
  if (close_.state == CloseState::kClosed && close_.app_closed) release_resources_locked();
}

void Connection::protocol_violation_locked(const char* what) {
  SMCR_LOG(1, "conn %08x: protocol violation: %s; aborting", local_token_, what);
  counters().protocol_violations.fetch_add(1, std::memory_order_relaxed);
  apply_close_event_locked(CloseEvent::kAppAbort);
  close_.aborted = true;
  rx_.cons = rx_.prod;  // nothing of a misbehaving peer's is delivered any more
  signal_reset_locked();
}

void Connection::release_resources_locked() {
  if (close_.released) return;
  close_.released = true;
  uncount_live();
  timer_deadline_.store(0);
  if (tcp_fd_ >= 0) {
    connection_services().unwatch_tcp(this);
    if (close_.tcp_reset) {
      linger l{1, 0};
      sys::setsockopt(tcp_fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    sys::close(tcp_fd_);
    tcp_fd_ = -1;
  }
  if (mem_.peer_bell_fd >= 0) sys::close(mem_.peer_bell_fd);
  mem_.peer_bell_fd = -1;
  mem_.control = nullptr;  // unmapped with the RMB below
  // Our wait bits went with the page: no peer takes them now, and the
  // readiness code must not reach for it (an application that still holds
  // the number and closes it, a JDK socket's close after its peer's, read a
  // null page).
  ready_.rd_armed = ready_.rd_for_set = ready_.wr_armed = false;
  if (fabric_.group) {
    bool had_rmb = fabric_.rmb.addr != nullptr;
    // Both C exchanged: neither side writes these RMBEs again, so the group
    // may give ours to its next connection.
    // (A relayed connection's child may still hold the readiness pair, and a
    // forked child never touches its parent's shared pages.)
    bool reusable = close_.peer_closed && close_.sent_close && !close_.aborted && !fabric_.link_dead && !close_.tcp_reset && !move_.relayed && !foreign();
    // The memfds stay with the RMBs where the group keeps them for the next
    // connection (closed otherwise): that one may be carried too.
    if (reusable && fabric_.rmb_memfd >= 0 && fabric_.rmb_on[0].handle < 0 && fabric_.rmb_on[0].addr && !fabric_.rmb_on[0].alias) {
      fabric_.rmb_on[0].handle = fabric_.rmb_memfd;
      fabric_.rmb_memfd = -1;
    }
    auto rkeys = fabric_.group->free_rmbs(&fabric_.rmb_on, &fabric_.peer_rmb_on, reusable, reusable ? &fabric_.peer_rmb_memfd : nullptr);
    fabric_.rmb = LocalRmb{};
    if (had_rmb && !fabric_.link_dead) fabric_.group->announce_rmb_deleted(rkeys);
  }
  close_memfds();
  rx_.prod = rx_.cons;
  if (handoff_) {
    // A child still waiting for this connection learns it is over. Only a
    // child forked since the connection was made can be one: without such
    // a fork the word is not even read again (free_state), and the wake-up
    // (a system call on a shared futex) is saved.
    if (!move_.relayed && shared_beyond_process()) handoff::publish(handoff_, handoff::kGone);
    handoff::free_state(handoff_);
    handoff_ = nullptr;
  }
  LinkGroup* g = fabric_.group;
  uint32_t token = local_token_;
  fabric_.group = nullptr;
  if (g) g->remove_connection(token);
}

// Like a TCP peer that vanished: data already in our RMBE stays readable,
// then calls fail with ECONNRESET. After a C either way there is nothing to report.
void Connection::peer_lost_locked(const char* why) {
  if (close_.released || close_.state == CloseState::kClosed) return;
  SMCR_LOG(1, "conn %08x: %s in %s", local_token_, why, to_string(close_.state));
  if (!close_.sent_close && !close_.sent_abort && !close_.peer_closed && !close_.aborted) {
    close_.peer_lost = true;
    counters().aborts.fetch_add(1, std::memory_order_relaxed);
  }
  close_.state = CloseState::kClosed;
  close_.tcp_reset = true;
  fabric_.link_dead = true;  // never write into the peer's RMB again
  make_writable_locked();
  signal_reset_locked();
  if (close_.app_closed) release_resources_locked();
}

// A killed or crashed process's kernel closes its TCP sockets: with a FIN
// where the process had read everything sent to it, with a reset where it
// had not. What it read is its last consumer cursor, which it published
// before it died (in our memory on shm: pulled first, with the data it
// wrote last). So where it read everything, the application sees what
// TCP's would after that FIN: end of file after the data, EPOLLRDHUP, the
// next write accepted and the one after it failing with EPIPE; otherwise
// TCP's reset (peer_lost_locked). Nothing goes into its RMB again.
void Connection::peer_vanished_locked(const char* why) {
  if (close_.released || close_.state == CloseState::kClosed) return;
  pull_cdc_locked();
  bool everything_read = tx_.space.used(tx_.prod, tx_.cons_peer).value_or(1) == 0;
  if (!everything_read || close_.peer_closed || close_.sent_close || close_.sent_abort || close_.aborted || close_.peer_lost) {
    fabric_.link_dead = true;
    peer_lost_locked(why);
    return;
  }
  SMCR_LOG(1, "conn %08x: %s in %s; it had read everything: ended as by its close", local_token_, why,
           to_string(close_.state));
  counters().peer_vanished.fetch_add(1, std::memory_order_relaxed);
  fabric_.link_dead = true;
  close_.peer_closed = close_.peer_done = true;
  if (tcp_fd_ >= 0) connection_services().unwatch_tcp(this);
  apply_close_event_locked(CloseEvent::kPeerClosed);
  signal_eof_locked();
}

// On this host (shm) a link ends with the peer's process. Whether that
// process ended the connection as a TCP socket's end would, its TCP socket
// says: closed too (the process died) or not (another process holds it: a
// parent killed while it handed the connection over to its child, whose
// TCP connection lives on; not TCP's end, so a reset, not end-of-file).
// Nothing goes into its RMB meanwhile.
void Connection::shm_link_ended_locked() {
  if (close_.released || close_.state == CloseState::kClosed || fabric_.shm_link_gone) return;
  fabric_.link_dead = true;
  fabric_.shm_link_gone = true;
  // Closing already (its C or A came, or ours went): the end is decided;
  // the link's end only wakes a writer waiting for a window it will not get.
  if (close_.peer_closed || close_.sent_close || close_.sent_abort || close_.aborted || close_.peer_lost) {
    peer_lost_locked("link failed");
    return;
  }
  if (close_.tcp_gone) {
    peer_vanished_locked("the peer's process ended (shm link and TCP closed)");
    return;
  }
  timer_deadline_.store(sys::now_ms() + kTcpGoneGraceMs);
  connection_services().arm_timer(this);
}

void Connection::on_tcp_peer_gone() {
  InboxItem item;
  item.tcp_gone = true;
  park(item);
}

void Connection::tcp_peer_gone_locked() {
  if (close_.released || close_.state == CloseState::kClosed || close_.peer_closed || close_.tcp_gone) return;
  // The peer's C or A may still be in flight on the fabric (it closes TCP
  // right after posting it): give it a moment before declaring the peer lost.
  close_.tcp_gone = true;
  if (fabric_.shm_link_gone) {  // nothing more can come on the fabric: no grace
    peer_vanished_locked("the peer's process ended (shm link and TCP closed)");
    return;
  }
  timer_deadline_.store(sys::now_ms() + kTcpGoneGraceMs);
  connection_services().arm_timer(this);
}

void Connection::on_timer(int64_t now_ms) {
  InboxItem item;
  item.timer_now_ms = now_ms;
  park(item);
}

// After our C, with the application gone, the peer's C is all this side
// waits for: the peer may leave it in memory (post_cdc_locked), where the
// timer finds it. The peer's TCP FIN, which follows its C, is not watched
// for either: each would wake the engine once per connection, and a
// connection closed by a short request/response exchange (HTTP with
// Connection: close) needs neither.
void Connection::welcome_close_in_memory_locked() {
  if (!close_.sent_close || close_.peer_closed || close_.sent_abort || close_.aborted || close_.released ||
      close_.state == CloseState::kClosed || !mem_.control || foreign() || move_.relayed || !fabric_.group ||
      !fabric_.group->shm() || fabric_.link_dead)
    return;
  close_.close_in_memory = true;
  // Its RMB takes no more data and goes to the pool when the C comes: the
  // RMB budget's count (which sizes the next connections' RMBs) leaves it
  // out now, as it leaves pooled RMBs out. Counted, a burst of these moved
  // the size past a step and then back, and the pool's RMBs fit no new
  // connection (a CONFIRM RKEY and a DELETE RKEY each).
  uncount_live();
  close_.close_in_memory_until = timer_deadline_.load();
  if (close_.close_in_memory_until == 0) close_.close_in_memory_until = sys::now_ms() + kCloseTimeoutMs;
  cdcmem::welcome_close_in_memory(mem_.control, local_token_);
  if (tcp_fd_ >= 0) connection_services().unwatch_tcp(this);
  // The peer may have published it before it saw the word.
  pull_cdc_locked();
  if (close_.released || close_.state == CloseState::kClosed) return;
  timer_deadline_.store(next_close_reap_locked(sys::now_ms()));
  connection_services().arm_timer(this);
}

// The next look for a C in memory: kCloseReapMs after the close, then
// doubling up to a second for a peer whose application keeps its end open,
// on a grid of kCloseReapMs so that the looks of many such connections share
// the engine's wake-ups. (Not the first: connections closed at a high rate
// would then all come back to the RMB pool at each grid point, more at once
// than it keeps, and the next connections would register new RMBs.)
int64_t Connection::next_close_reap_locked(int64_t now_ms) {
  int looks = close_.close_reap_looks++;
  if (looks == 0) return std::min(now_ms + kCloseReapMs, close_.close_in_memory_until);
  int64_t interval = std::min<int64_t>(kCloseReapMs << std::min(looks, 7), 1000);
  int64_t at = (now_ms + interval + kCloseReapMs - 1) / kCloseReapMs * kCloseReapMs;
  return std::min(at, close_.close_in_memory_until);
}

void Connection::timer_locked(int64_t now_ms) {
  int64_t d = timer_deadline_.load();
  if (d == 0 || now_ms < d || close_.released) return;
  timer_deadline_.store(0);
  if (close_.close_in_memory && close_.state != CloseState::kClosed) {
    pull_cdc_locked();
    if (close_.released || close_.state == CloseState::kClosed) return;
    if (now_ms < close_.close_in_memory_until && !fabric_.shm_link_gone) {
      timer_deadline_.store(next_close_reap_locked(now_ms));
      connection_services().arm_timer(this);
      return;
    }
  }
  if (close_.tcp_gone && !close_.peer_closed && close_.state != CloseState::kClosed) {
    // Linux's shutdown(SHUT_WR) of an SMC socket shuts its TCP socket down
    // too: a FIN after the peer's D is its half-close, not its end (its C
    // comes when it closes). A peer that dies after it is found by the link
    // (a write's error, TEST LINK).
    if (close_.peer_done && !fabric_.shm_link_gone && fabric_.group && !fabric_.group->shm()) {
      SMCR_LOG(2, "conn %08x: the peer's TCP FIN follows its SMC-R half-close", local_token_);
      return;
    }
    peer_vanished_locked("peer's TCP connection closed without an SMC-R close");
    return;
  }
  if (fabric_.shm_link_gone && !close_.peer_closed && close_.state != CloseState::kClosed) {
    peer_lost_locked("shm link ended, the TCP connection did not");
    return;
  }
  apply_close_event_locked(CloseEvent::kTimeout);
}

}  // namespace smcr
