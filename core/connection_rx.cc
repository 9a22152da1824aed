// Receive side of a connection (Linux net/smc: smc_rx): reading our RMBE,
// urgent data, the consumer-cursor updates that reopen the peer's window,
// and the errors a reset leaves for the application.
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

uint32_t Connection::bytes_readable() {
  Hold lock(*this);
  // After a reset too: TCP's SIOCINQ counts the bytes still queued.
  uint32_t unread = rx_.space.used(rx_.prod, rx_.cons).value_or(0);
  // An edge-triggered reader that counts down what SIOCINQ said (nginx)
  // stops at zero and waits for the next arrival's edge, data or not: over
  // TCP every arrival wakes the socket. The doorbell rings only when the
  // RMB goes from empty to not, so arm it now: the next CDC that moves the
  // producer cursor rings again.
  if (!foreign()) want_next_edge_locked();  // a forked child leaves the parent's page alone
  return unread;
}

void Connection::want_next_edge() {
  if (foreign()) return;
  Hold lock(*this);
  want_next_edge_locked();
}

void Connection::want_next_edge_locked() {
  // Parked, the deferral tells arrivals apart by the producer cursor itself.
  if (ready_.parked || close_.aborted || rx_.space.used(rx_.prod, rx_.cons).value_or(0) == 0) return;
  rx_.edge_wanted = true;
  rx_.edge_mark = rx_.prod;
  arm_for_next_arrival_locked();
}

int Connection::take_reset_error_locked() {
  if (!reset_error_pending_locked()) return 0;
  close_.reset_reported = true;
  return close_.peer_done ? EPIPE : ECONNRESET;
}

bool Connection::socket_error_pending() {
  Hold lock(*this);
  return reset_error_pending_locked();
}

int Connection::take_socket_error(int tcp_error) {
  Hold lock(*this);
  if (close_.reset_reported) return 0;  // TCP: sock_error() clears what it reports
  if (int e = take_reset_error_locked()) return e;
  // The TCP socket's RST got here before the A: that is the report.
  if (tcp_error == ECONNRESET || tcp_error == EPIPE) close_.reset_reported = true;
  return tcp_error;
}

void Connection::urgent_arrived_locked(const cdc::Cursor& producer) {
  // The byte just before the producer cursor (the cursor is 1 past it).
  cdc::Cursor mark = producer;
  if (mark.offset == rx_.space.base()) {
    mark.offset = rx_.space.length() - 1;
    --mark.wrap;
  } else {
    --mark.offset;
  }
  rx_.urgent_mark = mark;
  rx_.urgent_byte = fabric_.rmb.addr[mark.offset];
  rx_.urgent = Urgent::kValid;
  raise_priority_locked();
}

ssize_t Connection::recv_urgent_locked(const iovec* iov, int iovcnt, int flags) {
  // TCP's answers: EINVAL with no urgent byte (or one already read or kept
  // in line).
  if (rx_.urgent != Urgent::kValid || rx_.oob_inline || close_.aborted) {
    errno = EINVAL;
    return -1;
  }
  if (iov_total(iov, iovcnt) == 0) return 0;
  IovCursor out(iov, iovcnt);
  out.copy(&rx_.urgent_byte, 1, true);
  if (!(flags & MSG_PEEK)) {
    rx_.urgent = Urgent::kRead;
    lower_priority_locked();
  }
  return 1;
}

void Connection::urgent_done_locked() {
  rx_.urgent = Urgent::kNone;
  lower_priority_locked();
}

bool Connection::at_urgent_mark() {
  Hold lock(*this);
  return rx_.urgent != Urgent::kNone && rx_.cons == rx_.urgent_mark;
}

void Connection::set_oob_inline(bool on) {
  if (foreign()) return;  // the owner's (its lock may have been held at the fork)
  Hold lock(*this);
  rx_.oob_inline = on;
}

void Connection::raise_priority_locked() {
  if (rx_.priority_raised || app_.engine_end < 0 || ready_.eof_signalled || ready_.reset_signalled) return;
  // POLLPRI on the application's fd, and SIGURG to its owner (F_SETOWN).
  char u = 'u';
  if (sys::send(app_.engine_end, &u, 1, MSG_OOB | MSG_DONTWAIT | MSG_NOSIGNAL) == 1) rx_.priority_raised = true;
}

void Connection::lower_priority_locked() {
  if (!rx_.priority_raised || app_.fd < 0) return;
  char u;
  sys::recv(app_.fd, &u, 1, MSG_OOB | MSG_DONTWAIT);
  rx_.priority_raised = false;
  // The emptied out-of-band record still reads as "readable" until a normal
  // receive passes it: start the readiness bytes afresh.
  drain_readiness_locked();
  if (rx_.space.used(rx_.prod, rx_.cons).value_or(0) > 0) ring_readable_locked();
}

bool Connection::rmbe_eyecatcher_ok() const {
  return rx_.space.base() < 4 || std::memcmp(fabric_.rmb.addr, kRmbeEyecatcher, 4) == 0;
}

// RFC 7609 4.5.1: when a consumer-cursor update is owed to the writer.
void Connection::maybe_send_consumer_update_locked() {
  if (close_.sent_close || close_.sent_abort || close_.peer_closed || close_.aborted || close_.peer_lost) return;
  uint32_t cap = rx_.space.capacity();
  uint32_t gain = rx_.space.used(rx_.cons, rx_.cons_sent).value_or(0);
  if (gain == 0) return;
  uint32_t writer_view_used = rx_.space.used(rx_.prod, rx_.cons_sent).value_or(cap);
  uint32_t writer_window = cap - std::min(cap, writer_view_used);
  bool rule_a = writer_window < cap / 2 && gain >= cap / 10;
  if (rx_.peer_writer_blocked || rx_.peer_requested_update || rule_a) send_cdc_locked(false, false, false);
}

bool Connection::fill_more_locked(size_t done, size_t want, bool no_wait, int64_t& until) {
  if (no_wait || done == 0 || done >= want || !rx_.peer_writer_blocked || close_.peer_done || close_.peer_closed ||
      close_.peer_lost || close_.aborted || close_.shut_rd)
    return false;
  int64_t now = sys::now_ns();
  if (until == 0) until = now + int64_t{kFillWaitMs} * 1000000;
  return now < until;
}

ssize_t Connection::recvv(const iovec* iov, int iovcnt, int flags) {
  if (foreign()) return refuse_foreign(local_token_);
  size_t want = iov_total(iov, iovcnt);
  bool peek = flags & MSG_PEEK;
  // As TCP: MSG_PEEK | MSG_WAITALL waits until the whole length can be seen.
  bool peek_waitall = peek && (flags & MSG_WAITALL);
  bool waitall = (flags & MSG_WAITALL) && !peek;
  Hold lock(*this);
  if (on_relay_stream_locked()) return resume_on_relay_stream(iov, iovcnt, flags, false, 0);
  first_use_locked();
  if (flags & MSG_OOB) return recv_urgent_locked(iov, iovcnt, flags);
  bool dontwait = app_.nonblocking || (flags & MSG_DONTWAIT);
  if (want == 0) return 0;
  // Declared after `lock`: runs while the connection is still held.
  struct ReaderScope {
    Connection* c;
    explicit ReaderScope(Connection* conn) : c(conn) { c->ready_.in_reader = true; }
    ~ReaderScope() {
      c->ready_.in_reader = false;
      c->settle_readable_locked();
    }
  } reader(this);
  IovCursor out(iov, iovcnt);
  size_t done = 0;
  CallTimeout limit(app_.rcvtimeo_ms);
  // Filling (fill_more_locked): the bound of its wait.
  int64_t fill_until = 0;
  for (;;) {
    if (close_.released) {
      errno = EBADF;
      return -1;
    }
    if (close_.shut_rd) return static_cast<ssize_t>(done);
    uint32_t avail = rx_.space.used(rx_.prod, rx_.cons).value_or(0);
    bool more_coming = !(close_.peer_done || close_.peer_closed || close_.peer_lost);
    if (avail > 0 && !(peek_waitall && avail < want && more_coming && !dontwait)) {
      if (!rmbe_eyecatcher_ok()) {
        protocol_violation_locked("RMBE eyecatcher overwritten");
        continue;
      }
      uint32_t n = static_cast<uint32_t>(std::min<size_t>(avail, want - done));
      if (!peek && cursor_updates_cheap_locked()) n = std::min(n, kStreamChunk);
      bool passes_urgent = false;
      if (rx_.urgent != Urgent::kNone) {
        // As TCP: a read stops at the urgent byte; from it, the byte is read
        // in line (SO_OOBINLINE) or skipped (it is recv(MSG_OOB)'s).
        uint32_t to_mark = rx_.space.used(rx_.urgent_mark, rx_.cons).value_or(0);
        if (to_mark == 0 && done > 0) return static_cast<ssize_t>(done);
        if (to_mark == 0 && !rx_.oob_inline) {
          // (A MSG_PEEK here consumes the urgent byte too: rare enough.)
          rx_.cons = rx_.space.advance(rx_.cons, 1);
          urgent_done_locked();
          send_cdc_locked(false, false, false);  // RFC 4.7.5: always update after urgent data
          continue;
        }
        if (to_mark > 0) n = std::min(n, to_mark);
        else passes_urgent = !peek;
      }
      uint32_t first = std::min(n, rx_.space.contiguous_to_end(rx_.cons));
      out.copy(fabric_.rmb.addr + rx_.cons.offset, first, true);
      if (n > first) out.copy(fabric_.rmb.addr + rx_.space.base(), n - first, true);
      done += n;
      if (peek) return static_cast<ssize_t>(done);
      rx_.cons = rx_.space.advance(rx_.cons, n);
      rx_.app_has_read = true;
      if (passes_urgent) urgent_done_locked();
      counters().rx_bytes.fetch_add(n, std::memory_order_relaxed);
      rx_.bytes += n;
      maybe_send_consumer_update_locked();
      if (ready_.eof_deferred && rx_.space.used(rx_.prod, rx_.cons).value_or(0) == 0) signal_eof_locked();
      if (done == want || waitall) {
        if (done == want && avail == n && !peer_write_closed(close_.state)) clear_readable_locked();
        if (done == want) return static_cast<ssize_t>(done);
        continue;
      }
      // As TCP's receive: what is there when a copy ends is read too,
      // bytes the writer published while we copied (streamed, above)
      // included; never a wait for more.
      if (avail == n) pull_cdc_locked();
      bool left = rx_.space.used(rx_.prod, rx_.cons).value_or(0) > 0;
      if (left && !passes_urgent) continue;
      if (!passes_urgent && fill_more_locked(done, want, dontwait || waitall, fill_until)) continue;  // waits below
      if (!left && !peer_write_closed(close_.state)) clear_readable_locked();
      return static_cast<ssize_t>(done);
    }
    if (close_.aborted || close_.peer_lost) {
      // As TCP after an RST: what was received first is read first; then
      // the reset's error, once, unless the peer's FIN came before it (then
      // end-of-file, and the error waits for send() or SO_ERROR).
      if (done) return static_cast<ssize_t>(done);
      if (int e = close_.peer_done ? 0 : take_reset_error_locked()) {
        errno = e;
        return -1;
      }
      return 0;
    }
    if (!more_coming && avail == 0) return static_cast<ssize_t>(done);  // EOF
    if (done > 0 && !waitall && !fill_more_locked(done, want, dontwait, fill_until)) return static_cast<ssize_t>(done);
    if (!dontwait && spin_for_data_locked()) continue;
    uint32_t seen = mem_.control_seen;
    clear_readable_locked(!dontwait);
    if (mem_.control_seen != seen) continue;  // arming found a CDC: look again
    if (dontwait) {
      return done_or_eagain(done);
    }
    int fd = app_.fd;
    int timeout = limit.next_wait_ms();
    if (done > 0 && !waitall && fill_until != 0) {
      // Filling: no longer than the fill's bound.
      int64_t left_ns = fill_until - sys::now_ns();
      int fill_ms = left_ns <= 0 ? 0 : static_cast<int>((left_ns + 999999) / 1000000);
      timeout = timeout < 0 ? fill_ms : std::min(timeout, fill_ms);
    }
    if (timeout == 0) {
      return done_or_eagain(done);
    }
    ready_.in_reader = false;
    ++ready_.readers_asleep;
    lock.unlock();
    int r = wait_fd(fd, POLLIN, timeout);
    int saved = errno;
    lock.lock();
    --ready_.readers_asleep;
    woke_on_locked(fd);
    if (on_relay_stream_locked()) return resume_on_relay_stream(iov, iovcnt, flags, false, done);
    ready_.in_reader = true;
    if (r == 0) {
      return done_or_eagain(done);
    }
    if (r < 0 && saved == EINTR) {
      if (done) return static_cast<ssize_t>(done);
      if (restart_after_signal(limit.timeout_ms())) continue;
      errno = EINTR;
      return -1;
    }
  }
}

}  // namespace smcr
