// Send side of a connection (Linux net/smc: smc_tx): writing into the
// peer's RMBE within its window, through memory (shm) or RDMA WRITE (verbs).
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

// Blocking writes up to this size are never split by a full window.
constexpr size_t kAtomicWrite = 4096;

// Test hook for the failover tests (tests/guest/failover_test.sh):
// SMCR_TEST_TAKE_DOWN_LINK_AFTER=<bytes> takes the link of the first
// connection that has sent that many bytes down (its QP to the error state,
// as a failing adapter would), once per process. Unset: never.
uint64_t take_down_link_after() {
  static const uint64_t n = [] {
    const char* v = env("SMCR_TEST_TAKE_DOWN_LINK_AFTER");
    return v ? strtoull(v, nullptr, 10) : 0;
  }();
  return n;
}
std::atomic<bool> g_link_taken_down{false};

}  // namespace

ssize_t Connection::sendv(const iovec* iov, int iovcnt, int flags) {
  if (foreign()) return refuse_foreign(local_token_);
  size_t want = iov_total(iov, iovcnt);
  // SIGPIPE is raised once the connection is unlocked: a handler that
  // writes to (or closes) this socket must not find it held.
  struct SigpipeAfterUnlock {
    bool raise = false;
    ~SigpipeAfterUnlock() {
      if (!raise) return;
      int saved = errno;
      pthread_kill(pthread_self(), SIGPIPE);
      errno = saved;
    }
  } sigpipe;
  Hold lock(*this);
  if (on_relay_stream_locked()) return resume_on_relay_stream(iov, iovcnt, flags, true, 0);
  first_use_locked();
  bool dontwait = app_.nonblocking || (flags & MSG_DONTWAIT);
  IovCursor in(iov, iovcnt);
  size_t done = 0;
  CallTimeout limit(app_.sndtimeo_ms);
  for (;;) {
    if (close_.released) {
      errno = EBADF;
      return -1;
    }
    // (A peer whose process ended after reading everything is a closed
    // peer, below, though its link is gone: peer_vanished_locked.)
    if (close_.aborted || close_.peer_lost || (fabric_.link_dead && !close_.peer_closed)) {
      if (done) return static_cast<ssize_t>(done);
      int e = take_reset_error_locked();
      errno = e ? e : EPIPE;
      sigpipe.raise = errno == EPIPE && !(flags & MSG_NOSIGNAL);
      return -1;
    }
    if (close_.peer_closed && !local_write_closed(close_.state) && !close_.wrote_after_peer_close && !close_.reset_reported && want > 0) {
      // As TCP after the peer's close (FIN, its socket gone): this write is
      // accepted, and the peer's RST that answers it fails the next one
      // with EPIPE. Nothing may go into the peer's RMB after its C, so the
      // bytes go nowhere, as they would have. TCP takes no more than its
      // buffer holds before the RST comes: a window's worth, not 64 MB.
      close_.wrote_after_peer_close = true;
      signal_reset_locked();
      return static_cast<ssize_t>(std::min<size_t>(want, std::max<uint32_t>(send_window_locked(), 1)));
    }
    // As TCP: writing nothing after the peer's close (FIN, and no RST yet)
    // is no error.
    if (want == 0 && !local_write_closed(close_.state) && !close_.wrote_after_peer_close && !close_.reset_reported) return 0;
    if (local_write_closed(close_.state) || close_.peer_closed) {
      if (done) return static_cast<ssize_t>(done);
      take_reset_error_locked();
      sigpipe.raise = !(flags & MSG_NOSIGNAL);
      errno = EPIPE;
      return -1;
    }
    if (want == 0) return 0;
    uint32_t space = send_space_locked();
    // A blocking write of up to kAtomicWrite bytes goes out whole, as small
    // TCP writes do in practice: threads sharing a connection rely on it.
    uint32_t need = 1;
    if (!dontwait && done == 0)
      need = static_cast<uint32_t>(std::min<size_t>({want, kAtomicWrite, send_window_locked()}));
    if (space > 0 && space < need && !tx_.window_full) {
      // Waiting for room: the peer must report consumption (B flag).
      tx_.window_full = true;
      send_cdc_locked(false, false, false);
    }
    if (space >= need) {
      uint32_t n = static_cast<uint32_t>(std::min<size_t>(space, want - done));
      if (cursor_updates_cheap_locked()) n = std::min(n, kStreamChunk);
      uint32_t left = n;
      cdc::Cursor pos = tx_.prod;
      while (left > 0) {
        uint32_t room = std::min(left, tx_.space.contiguous_to_end(pos));
        uint32_t off = pos.offset;
        uint32_t filled = 0;
        const uint8_t* p;
        size_t k;
        while (filled < room && in.next_chunk(room - filled, &p, &k)) {
          if (!fabric_.link->write_remote(fabric_.peer_rmb_on[static_cast<size_t>(fabric_.slot)], off + filled, p, k)) {
            // The link failed: move to another and write these bytes there.
            // Bytes of this call already written (up to here) are written
            // again with the rest of the unacknowledged ones.
            if (fabric_.link->failed() && fail_over_locked(tx_.space.advance(pos, filled)) &&
                fabric_.link->write_remote(fabric_.peer_rmb_on[static_cast<size_t>(fabric_.slot)], off + filled, p, k)) {
              filled += static_cast<uint32_t>(k);
              continue;
            }
            if (fabric_.link->failed()) {
              fabric_.link_dead = true;
              peer_lost_locked("link failed");
            } else {
              protocol_violation_locked("write outside the peer RMB");
            }
            break;
          }
          filled += static_cast<uint32_t>(k);
        }
        if (filled < room) break;
        pos = tx_.space.advance(pos, room);
        left -= room;
      }
      if (left > 0) continue;  // aborted above
      tx_.prod = pos;
      done += n;
      tx_.window_full = (n == space);
      counters().tx_bytes.fetch_add(n, std::memory_order_relaxed);
      tx_.bytes += n;
      ++tx_.writes;
      // MSG_OOB: the last byte of the send is urgent (TCP's rule); the CDC
      // that completes it carries P and U (RFC 7609 4.7.5, scenario 5).
      tx_.urgent = (flags & MSG_OOB) && done == want;
      tx_.more_than_window = want - done > space - n;
      bool posted = send_cdc_locked(false, false, false);
      tx_.urgent = false;
      tx_.more_than_window = false;
      prefetch_next_write_locked(n);
      if (!posted) {
        close_.aborted = true;
        signal_reset_locked();
        continue;
      }
      if (uint64_t after = take_down_link_after();
          after && tx_.bytes >= after && !g_link_taken_down.exchange(true)) {
        SMCR_LOG(1, "conn %08x: SMCR_TEST_TAKE_DOWN_LINK_AFTER: taking link %u down after %llu bytes", local_token_,
                 fabric_.group->link_num_at(fabric_.slot), static_cast<unsigned long long>(tx_.bytes));
        fabric_.link->take_down();
      }
      if (done == want) {
        // As TCP, whose socket stops being writable when a write fills its
        // buffer: an event loop that writes on POLLOUT and gives up on EAGAIN
        // (Perl's IO::Select loops, nginx-tests' clients) must not be told
        // writable for a full window.
        if (!writable_enough_locked()) make_unwritable_locked();
        return static_cast<ssize_t>(done);
      }
      continue;
    }
    // With CDCs through memory the peer's reader empties our socket (POLLOUT)
    // when it consumes, before we have read its CDC: a poll or select may
    // have reported writable for a window we still think full. Arming reads
    // the newest CDC; when it opened the window, write (as TCP would, after
    // reporting writable: event loops that close on EAGAIN there exist).
    // A blocking writer watches for the reader's consumption a while first:
    // a reader that is reading frees the window within microseconds, and a
    // writer asleep then costs a wake-up per window (on a VM tens of
    // microseconds: streams then run at a third of their speed).
    if (!dontwait && spin_for_window_locked()) continue;
    uint32_t seen = mem_.control_seen;
    make_unwritable_locked();
    if (mem_.control_seen != seen && send_space_locked() > 0) continue;
    if (dontwait) {
      return done_or_eagain(done);
    }
    int fd = app_.fd;
    int timeout = limit.next_wait_ms();
    if (timeout == 0) {
      return done_or_eagain(done);
    }
    ++ready_.writers_asleep;
    lock.unlock();
    int r = wait_fd(fd, POLLOUT, timeout);
    int saved = errno;
    lock.lock();
    --ready_.writers_asleep;
    woke_on_locked(fd);
    if (on_relay_stream_locked()) return resume_on_relay_stream(iov, iovcnt, flags, true, done);
    if (r < 0 && saved == EINTR && !done && restart_after_signal(limit.timeout_ms())) continue;
    if (r == 0 || (r < 0 && saved == EINTR)) {
      if (done) return static_cast<ssize_t>(done);
      errno = r == 0 ? EAGAIN : EINTR;
      return -1;
    }
  }
}

void Connection::prefetch_next_write_locked(uint32_t n) {
#if defined(__x86_64__)
  const RemoteRmb& rmb = fabric_.peer_rmb_on[static_cast<size_t>(fabric_.slot)];
  if (!rmb.addr || !mem_.control) return;  // shm only: the peer's RMB is mapped here
  if (n >= kStreamingCopyMin) return;      // streamed past this cache (core/stream_copy.h)
  uint32_t ahead = std::min<uint32_t>(n, kPrefetchAhead);
  uint32_t off = tx_.prod.offset;
  uint32_t run = std::min(ahead, tx_.space.contiguous_to_end(tx_.prod));
  for (uint32_t i = 0; i < ahead; i += 64) {
    uint32_t at = i < run ? off + i : tx_.space.advance(tx_.prod, i).offset;
    if (at >= rmb.size) break;
    __asm__ volatile("prefetchw %0" ::"m"(*(rmb.addr + at)));
  }
#else
  (void)n;
#endif
}

}  // namespace smcr
