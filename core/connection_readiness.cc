// How readiness reaches the application's fd: the readiness socketpair
// (ring, clear, EOF, reset, unwritable), deferred arming for epoll, the
// bounded spin before sleeping, and the peer's readiness socket ("bell")
// that CDCs through memory ring. See docs/ARCHITECTURE.md.
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
#include <sys/epoll.h>
#include <sys/time.h>

#include <algorithm>
#include <new>
#include <type_traits>
#include <cerrno>
#include <cstring>

#include "core/cdc_mem.h"
#include "core/peer_fd.h"
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
#include "core/ready_set.h"
#include "core/short_flows.h"
#include "core/stream_copy.h"
#include "core/sys.h"
#include "core/connection_internal.h"

namespace smcr {

using namespace connection_internal;

void Connection::set_peer_bell_fd_locked(int fd) {
  struct stat st {};
  bool known = fd >= 0 && sys::fstat(fd, &st) == 0;
  set_peer_bell_fd_locked(fd, known ? st.st_dev : 0, known ? st.st_ino : 0);
}

void Connection::set_peer_bell_fd_locked(int fd, uint64_t dev, uint64_t ino) {
  mem_.peer_bell_fd = fd;
  mem_.peer_bell_dev = dev;
  mem_.peer_bell_ino = ino;
}

void Connection::close_inherited_bell() {
  // The parent's engine thread may have received the bell and set its
  // number while the parent forked: Linux copies the descriptor table
  // before the memory, so the child can hold the number without the
  // descriptor, and that number may be one the child has since given to
  // something else (its new link: the re-homed connection then ended at
  // once). Closed only where it is still the file the parent stored.
  struct stat st {};
  if (mem_.peer_bell_fd >= 0 && mem_.peer_bell_ino != 0 && sys::fstat(mem_.peer_bell_fd, &st) == 0 &&
      st.st_dev == mem_.peer_bell_dev && st.st_ino == mem_.peer_bell_ino)
    sys::close(mem_.peer_bell_fd);
  mem_.peer_bell_fd = -1;
  mem_.peer_bell_dev = mem_.peer_bell_ino = 0;
}

void Connection::arm_for_next_arrival_locked() {
  if (!mem_.control || ready_.rd_armed || app_.engine_end < 0 || app_.fd < 0 || ready_.eof_signalled || ready_.reset_signalled) return;
  set_data_arming_locked();
}

void Connection::set_data_arming_locked() {
  if (!mem_.control) return;  // released (release_resources_locked)
  cdcmem::arm(mem_.control, cdcmem::Want::kData, rx_.prod, local_token_);
  ready_.rd_armed = true;
  ready_.rd_for_set = false;
  // Published before the peer could see the bit: it will not ring for it.
  pull_cdc_locked();
}

void Connection::count_kernel_armed_locked() {
  ReadinessDeferral* in = nullptr;
  // An end the readiness socket shows is the kernel's to report too.
  if (ready_.deferral && ((ready_.rd_armed && !ready_.rd_for_set) || ready_.rd_owed > 0 || ready_.eof_signalled ||
                          ready_.reset_signalled))
    in = ready_.deferral;
  if (in == ready_.kernel_counted) return;
  // Groups are never freed (preload/epoll.cc reuses them): the pointer
  // stays valid after the set is gone.
  if (ready_.kernel_counted) ready_.kernel_counted->kernel_armed.fetch_sub(1, std::memory_order_relaxed);
  if (in) in->kernel_armed.fetch_add(1, std::memory_order_relaxed);
  ready_.kernel_counted = in;
}

bool Connection::disarm_data_locked() {
  bool for_set = ready_.rd_for_set;
  ready_.rd_armed = ready_.rd_for_set = false;
  if (!mem_.control) return false;  // released: nobody can have taken it
  // A ready set's taker marks the set's page: nothing comes on the socket.
  return !cdcmem::disarm(mem_.control, cdcmem::Want::kData) && !for_set;
}

void Connection::arm_for_set_locked() {
  if (!mem_.control) return;  // released: a parked connection's re-arming came after the end
  cdcmem::arm_for_set(mem_.control, rx_.prod, local_token_, ready_.set_where);
  ready_.rd_armed = ready_.rd_for_set = true;
  // Published before the peer could see the bit: it will not mark for it.
  pull_cdc_locked();
}

void Connection::mark_own_set_locked() {
  if (!ready_.set_page) return;
  if (readyset::mark(ready_.set_page, ready_.set_where.slot)) {
    char b = 'w';
    sys::send(ready_.set_bell_fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
}

void Connection::ring_readable_locked() {
  // Data that came after a SIOCINQ answer is a new edge even while a byte
  // is owed (bytes_readable).
  bool new_edge = rx_.edge_wanted && !(rx_.prod == rx_.edge_mark);
  if ((ready_.rd_owed > 0 && !new_edge) || app_.engine_end < 0) return;
  if (ready_.rd_armed) {
    // Data is here: take the bit back, or count the byte of the peer that
    // took it first (it is on the way). A ready set's taker marks the set.
    if (disarm_data_locked()) {
      ++ready_.rd_owed;
      rx_.edge_wanted = false;
      return;
    }
    // A ready set's arming, taken or not: our own mark below makes sure (a
    // taker that does not know the set posts its CDC on the link instead,
    // which brings us here again).
  }
  // A reader that holds the connection takes the data itself and settles
  // the socket on its way out.
  if (ready_.in_reader) return;
  // Parked: the deferral finds the data (its ready set marked), or rings
  // before anyone sleeps.
  if (ready_.parked) {
    mark_own_set_locked();
    return;
  }
  char b = 'r';
  if (sys::send(app_.engine_end, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1) {
    ++ready_.rd_owed;
    rx_.edge_wanted = false;
  }
}

void Connection::clear_readable_locked(bool will_sleep) {
  if (app_.fd < 0 || ready_.eof_signalled || ready_.reset_signalled) return;
  if (ready_.rd_armed) {
    if (ready_.rd_owed == 0) {
      if (cdcmem::load_want(mem_.control, cdcmem::Want::kData) & cdcmem::kArmed) {
        // Still armed: for the socket nothing to clear; a ready set's
        // arming is taken back before a blocking read sleeps.
        if (!will_sleep || !ready_.rd_for_set) return;
        if (disarm_data_locked()) ++ready_.rd_owed;
      } else {
        // The peer took the bit: its byte is (or is about to be) on the
        // socket, or its mark on the ready set.
        if (!ready_.rd_for_set) ++ready_.rd_owed;
      }
    } else if (disarm_data_locked()) {
      // Armed over a byte already owed (arm_for_next_arrival_locked), and
      // the peer took the bit: one more byte comes.
      ++ready_.rd_owed;
    }
    ready_.rd_armed = ready_.rd_for_set = false;
  }
  // Exactly the bytes rung, no more: a byte left behind (one the peer had
  // claimed but not yet sent) would make the socket readable with nothing
  // to read, which a TCP socket with one reader never is (wrk counts the
  // EAGAIN as a read error).
  char buf[64];
  int64_t give_up_ms = 0;
  bool rechecked = false;
  while (ready_.rd_owed > 0) {
    // A receive that reached the out-of-band byte would throw it away
    // (and POLLPRI with it): stop at its mark.
    int at_mark = 0;
    if (rx_.priority_raised && (sys::ioctl(app_.fd, SIOCATMARK, &at_mark) != 0 || at_mark)) break;
    // Everything that is there: a byte we did not count is never data.
    ssize_t n = sys::recv(app_.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      ready_.rd_owed -= std::min<uint32_t>(ready_.rd_owed, static_cast<uint32_t>(n));
      continue;
    }
    if (n == 0 || errno != EAGAIN || !mem_.control) break;
    // The peer claimed the bit and has not sent yet. It counts itself in
    // `ringing` from before the claim until after the send, so with the
    // count at zero the byte is there (one more look) or never comes.
    // Otherwise wait for it: microseconds, unless the peer is descheduled
    // (under load, for tens of milliseconds: a byte that came after we gave
    // up would make the socket readable with nothing to read) or gone.
    if (cdcmem::ringing(mem_.control).load(std::memory_order_seq_cst) == 0) {
      if (rechecked) break;
      rechecked = true;
      continue;
    }
    if (give_up_ms == 0) give_up_ms = sys::now_ms() + 2000;
    if (sys::now_ms() > give_up_ms || wait_fd(app_.fd, POLLIN, 1) < 0) break;
  }
  ready_.rd_owed = 0;
  arm_readable_locked(will_sleep);
}

void Connection::arm_readable_locked(bool will_sleep) {
  // A ready set's arming marks a page, which a thread asleep in read()
  // does not watch: the socket's arming replaces it.
  if (ready_.rd_armed && ready_.rd_for_set && (will_sleep || ready_.readers_asleep > 0)) disarm_data_locked();
  if (!mem_.control || ready_.rd_armed || ready_.rd_owed > 0 || app_.engine_end < 0) return;
  if (!will_sleep && ready_.readers_asleep == 0 && (ready_.parked || ready_.deferral)) {
    if (!ready_.parked) {
      ReadinessDeferral::Parking p = ready_.deferral->park(this, ready_.deferral_key, fabric_.group);
      if (p.ok) {
        ready_.parked = true;
        ready_.set_page = p.page;
        ready_.set_where = p.where;
        ready_.set_bell_fd = p.bell_fd;
        if (p.announce_bell_fd >= 0 && p.announce_page_fd >= 0 && fabric_.link && !fabric_.link_dead) {
          // The bell first: the peer uses the set once the page is there.
          readyset::Announcement a{readyset::Part::kBell, p.where.set_id};
          if (fabric_.link->post_message_with_fd(readyset::encode(a), p.announce_bell_fd)) {
            a.part = readyset::Part::kPage;
            fabric_.link->post_message_with_fd(readyset::encode(a), p.announce_page_fd);
          }
        }
      }
    }
    if (ready_.parked) {
      // With a ready set: armed for it. Without: unarmed, the peer will not
      // ring; what it published already is ours now.
      if (ready_.set_page) arm_for_set_locked();
      else pull_cdc_locked();
      return;
    }
  }
  ready_.parked = false;
  ready_.set_page = nullptr;
  set_data_arming_locked();
}

// A forked child's epoll and poll hooks reach here with connections it
// inherited: they answer before taking the connection (see foreign()).
bool Connection::deferrable() {
  if (foreign()) return false;
  Hold lock(*this);
  return mem_.control && app_.engine_end >= 0 && !close_.released && !deferral_forbidden_.load();
}

bool Connection::set_deferral(ReadinessDeferral* d, int key) {
  if (foreign()) return false;
  Hold lock(*this);
  if (d && ready_.deferral && ready_.deferral != d) return false;
  if (d && deferral_forbidden_.load()) return false;
  ready_.deferral_key = key;
  if (ready_.deferral == d) return true;
  ready_.deferral = d;
  if (!d) unpark_locked();
  // Armed with nothing to read (an event loop that registers the fd anew
  // for each reply): the arming is taken back, unless the peer has already
  // claimed it, and the connection parked as if a read had just emptied it.
  if (d && ready_.rd_armed && ready_.rd_owed == 0 && !ready_.in_reader && ready_.readers_asleep == 0 &&
      rx_.space.used(rx_.prod, rx_.cons).value_or(0) == 0) {
    if (disarm_data_locked()) ++ready_.rd_owed;  // its byte is on the way
    settle_readable_locked();
  }
  return true;
}

void Connection::forbid_deferral() {
  if (foreign()) return;  // only the owner parks, and only the owner may unpark
  if (deferral_forbidden_.load(std::memory_order_relaxed) || deferral_forbidden_.exchange(true)) return;
  Hold lock(*this);
  ready_.deferral = nullptr;
  unpark_locked();
}

void Connection::arm_deferred(ReadinessDeferral* d) {
  if (foreign()) return;
  Hold lock(*this);
  if (ready_.deferral == d) unpark_locked();  // d refuses to park it again while its thread sleeps
}

void Connection::unpark_locked() {
  if (!ready_.parked) return;
  ready_.parked = false;
  // A ready set's arming is taken back (a mark still in flight finds the
  // connection not parked: a look, nothing more).
  if (ready_.rd_armed && ready_.rd_for_set) disarm_data_locked();
  ready_.set_page = nullptr;
  settle_readable_locked();  // armed, or rung if data came meanwhile
}

uint64_t Connection::rearm_parked_for_set_locked(ReadinessDeferral* d) {
  // Unarmed with a ready set (its arming taken): armed again, so that its
  // next data marks the set again: a wait that drops it as empty, or an
  // edge-triggered one that reported it, hears of the next arrival even
  // while it sleeps.
  if (ready_.parked && ready_.deferral == d && ready_.set_page && !ready_.rd_armed && ready_.rd_owed == 0)
    arm_for_set_locked();
  return (uint64_t{rx_.prod.wrap} << 32) | rx_.prod.offset;
}

Connection::Parked Connection::poll_parked(ReadinessDeferral* d, bool* writable, uint64_t* data_mark, uint64_t* since) {
  if (foreign()) return Parked::kGone;
  if (!mu_.try_lock()) return Parked::kBusy;
  Hold lock(*this, std::adopt_lock);
  drain_inbox_locked();
  if (!ready_.parked || ready_.deferral != d) return Parked::kGone;
  *writable = !ready_.wr_filled;
  *data_mark = rearm_parked_for_set_locked(d);
  // What the readiness socket shows (end-of-file, reset, urgent data) the
  // kernel reports itself.
  if (app_.fd < 0 || ready_.eof_signalled || ready_.reset_signalled || rx_.priority_raised || ready_.rd_owed > 0 || close_.aborted)
    return Parked::kEmpty;
  if (rx_.space.used(rx_.prod, rx_.cons).value_or(0) == 0) return Parked::kEmpty;
  if (since) *since = mem_.control ? cdcmem::ready_since(mem_.control) : 0;
  return Parked::kReadable;
}

void Connection::wait_until_released() {
  if (foreign()) return;
  Hold lock(*this);
}

uint64_t Connection::arrival_stamp() {
  if (foreign()) return 0;
  // Waited for (not tried): a connection our engine holds for a moment
  // would otherwise be taken for the newest. The caller holds no lock.
  Hold lock(*this);
  return mem_.control && !close_.released ? cdcmem::ready_since(mem_.control) : 0;
}

Connection::Parked Connection::poll_events(ReadinessDeferral* d, uint32_t* events, uint64_t* data_mark, uint64_t* since,
                                           bool edge_reader) {
  if (foreign()) return Parked::kGone;
  if (!mu_.try_lock()) return Parked::kBusy;
  Hold lock(*this, std::adopt_lock);
  drain_inbox_locked();
  *data_mark = rearm_parked_for_set_locked(d);
  const uint32_t unread = close_.aborted ? 0 : rx_.space.used(rx_.prod, rx_.cons).value_or(0);
  // The usual case, answered from memory: both directions open, the window
  // not full, no byte on the readiness socket.
  const bool plain = app_.fd >= 0 && mem_.control && close_.state == CloseState::kActive && !close_.aborted &&
                     !close_.peer_lost && !close_.shut_rd && !close_.peer_done && !close_.peer_closed &&
                     !ready_.eof_signalled && !ready_.reset_signalled && !ready_.eof_deferred && !ready_.wr_filled &&
                     ready_.rd_owed == 0 && !rx_.priority_raised;
  uint32_t ev = 0;
  if (plain) {
    ev = EPOLLOUT | EPOLLWRNORM;
  } else if (app_.fd >= 0) {
    // What the readiness socket shows (end-of-file, reset, urgent data, a
    // full window, a ring), as the kernel's registration would report it.
    pollfd p{app_.fd, POLLIN | POLLOUT | POLLPRI | POLLRDHUP, 0};
    if (sys::poll(&p, 1, 0) > 0) ev = static_cast<uint16_t>(p.revents);
    if ((ev & EPOLLHUP) && reset_error_pending_locked()) ev |= EPOLLERR;
  }
  if (unread > 0) {
    ev |= EPOLLIN | EPOLLRDNORM;
    if (edge_reader) want_next_edge_locked();
  }
  if (since) *since = (ev & EPOLLIN) && mem_.control ? cdcmem::ready_since(mem_.control) : 0;
  *events = ev;
  return Parked::kReadable;
}

void Connection::settle_readable_locked() {
  if (app_.fd < 0 || ready_.eof_signalled || ready_.reset_signalled) return;
  uint32_t unread = close_.aborted ? 0 : rx_.space.used(rx_.prod, rx_.cons).value_or(0);
  if (!mem_.control) {
    // Nothing to arm without a control page: what arrived while the reader
    // held the connection (not rung, above) and is still unread is rung now.
    if (unread > 0) ring_readable_locked();
    return;
  }
  if (unread > 0) {
    ring_readable_locked();
  } else {
    rx_.edge_wanted = false;
    arm_readable_locked();
  }
}

namespace {

// How long a blocking read watches for the peer before sleeping:
// SMCR_SPIN_US (0: never), default kDefaultSpinUs.
constexpr int kDefaultSpinUs = 40;
int64_t spin_budget_ns() {
  static const int64_t ns = int64_t{1000} * env_long("SMCR_SPIN_US", kDefaultSpinUs, 0, 10000);
  return ns;
}

}  // namespace

bool Connection::spin_for_data_locked() {
  int64_t budget = spin_budget_ns();
  if (app_.fd < 0) return false;
  if (!mem_.control) return poll_link_locked(spin_backoff_);
  if (budget == 0 || !spin_backoff_.worth_trying()) return false;
  if (ready_.rd_armed) {
    if (disarm_data_locked()) {
      // The peer published and is ringing.
      ++ready_.rd_owed;
      pull_cdc_locked();
      return true;
    }
  }
  return watch_control_page_locked(spin_backoff_);
}

bool Connection::spin_for_window_locked() {
  if (app_.fd < 0) return false;
  if (!mem_.control) return poll_link_locked(window_backoff_);
  if (spin_budget_ns() == 0 || !window_backoff_.worth_trying()) return false;
  return watch_control_page_locked(window_backoff_);
}

bool Connection::watch_control_page_locked(SpinBackoff& backoff) {
  // Held: the connection cannot be released (and its page unmapped) by
  // another thread meanwhile; our engine parks its messages (inbox).
  uint32_t seen = mem_.control_seen;
  int64_t deadline = sys::now_ns() + spin_budget_ns();
  for (uint32_t i = 1;; ++i) {
    if (cdcmem::news(mem_.control, seen) || inbox_nonempty_.load(std::memory_order_relaxed)) {
      backoff.hit();
      drain_inbox_locked();
      return true;
    }
    cpu_relax();
    if ((i & 31) == 0 && sys::now_ns() > deadline) break;
  }
  backoff.missed();
  return false;
}

bool Connection::poll_link_locked(SpinBackoff& backoff) {
  // Held: the group cannot retire and the link stays (a failover's move
  // reaches us through the inbox, processed below).
  LinkGroup* group = fabric_.group;
  Link* link = app_pollable_link_locked();
  if (!link || foreign()) return false;
  int slot = fabric_.slot;
  // Without a spin (none configured, or the last ones found nothing) this
  // is only the look before the sleep: the link is armed, since the engine
  // may have left it unarmed for another thread's polling.
  const bool spin = spin_budget_ns() > 0 && backoff.worth_trying();
  link->app_poll_begin();
  bool hit = false;
  if (spin) {
    int64_t deadline = sys::now_ns() + spin_budget_ns();
    for (uint32_t i = 1;; ++i) {
      // Our own CDC lands in the inbox (we hold the connection); another
      // connection's is delivered to it as the engine would.
      group->app_poll(slot, link);
      if (inbox_nonempty_.load(std::memory_order_acquire)) {
        hit = true;
        break;
      }
      cpu_relax();
      if ((i & 31) == 0 && sys::now_ns() > deadline) break;
    }
  }
  // Going to sleep: the link's notifications are armed first, and what came
  // before the arming is delivered now.
  group->app_poll_end(slot, link, !hit);
  bool found = hit || inbox_nonempty_.load(std::memory_order_acquire);
  if (spin) {
    if (hit) backoff.hit();
    else backoff.missed();
  }
  if (!found) return false;
  drain_inbox_locked();
  return true;
}

Link* Connection::app_pollable_link_locked() {
  Link* link = fabric_.link;
  if (!fabric_.group || !link || fabric_.link_dead || close_.released || mem_.control || !link->app_pollable())
    return nullptr;
  return link;
}

const void* Connection::pollable_link() {
  if (foreign()) return nullptr;
  Hold lock(*this);
  return app_pollable_link_locked();
}

bool Connection::poll_link_once(bool will_sleep) {
  if (foreign()) return false;
  if (will_sleep) {
    Hold lock(*this);
    return poll_link_once_locked(true);
  }
  // A thread that holds the connection is reading it (and polls the link
  // itself) or about to: a look through it would wait for that thread.
  if (!mu_.try_lock()) return false;
  Hold lock(*this, std::adopt_lock);
  drain_inbox_locked();
  return poll_link_once_locked(false);
}

bool Connection::poll_link_once_locked(bool will_sleep) {
  LinkGroup* group = fabric_.group;
  Link* link = app_pollable_link_locked();
  if (!link) return false;
  int slot = fabric_.slot;
  link->app_poll_begin();
  bool hit = group->app_poll(slot, link);
  group->app_poll_end(slot, link, will_sleep);
  // Our own CDCs wait in the inbox: processed (and rung) as the lock goes.
  return hit;
}

void Connection::send_bell_locked() {
  mem_.bell_owed = false;
  if (!mem_.control || !fabric_.link || app_.engine_end < 0 || fabric_.link_dead || close_.released) return;
  if (fabric_.link->post_message_with_fd(cdcmem::encode_bell(fabric_.peer_token), app_.engine_end))
    counters().bells_sent.fetch_add(1, std::memory_order_relaxed);
}

bool Connection::bell_rides_locked(const cdc::Message& m) const {
  return mem_.bell_owed && !mem_.bell_published && mem_.control && app_.engine_end >= 0 && !m.flags.peer_conn_closed &&
         !m.flags.peer_conn_abort;
}

void Connection::set_peer_bell(int fd) {
  InboxItem item;
  item.bell_fd = fd;
  park(item);
}

void Connection::take_peer_bell_locked(int fd) {
  if (close_.released || mem_.peer_bell_fd >= 0 || !fabric_.group || !fabric_.peer_rmb_on[static_cast<size_t>(fabric_.slot)].control) {
    sys::close(fd);
    return;
  }
  set_peer_bell_fd_locked(sys::hide_fd(fd));
}

bool Connection::revoke_peer_bell_locked() {
  mem_.bell_owed = false;  // nor may it be handed out later
  if (!mem_.control) return true;
  cdcmem::forbid_direct(mem_.control);
  // A ring the peer took before it saw the prohibition may still be in
  // flight: its byte would land in the child's stream. The peer holds the
  // count for a few instructions, but a loaded machine can deschedule it for
  // far longer than that.
  bool quiet = wait_peer_quiet_locked(2000);
  ready_.rd_armed = ready_.wr_armed = ready_.rd_for_set = false;
  pull_cdc_locked();
  return quiet;
}

bool Connection::wait_peer_quiet_locked(int timeout_ms) {
  if (!mem_.control) return true;
  int64_t deadline = sys::now_ms() + timeout_ms;
  bool quiet;
  while (!(quiet = cdcmem::ringing(mem_.control).load(std::memory_order_seq_cst) == 0) && sys::now_ms() < deadline)
    sched_yield();
  return quiet;
}

bool Connection::fetch_peer_bell_locked(uint8_t* page) {
  if (mem_.peer_bell_fd >= 0 || mem_.bell_fetch_tried || !fabric_.link || cdcmem::direct_forbidden(page)) return false;
  mem_.bell_fetch_tried = true;
  auto rec = cdcmem::read_bell(page, fabric_.peer_token);
  // Only from the process at the other end of our link, as the kernel
  // knows it: a record is the peer's word, and could name another
  // process's socket for us to ring or drain.
  int pid = rec ? fabric_.link->peer_pid() : -1;
  if (!rec || pid <= 0 || static_cast<uint32_t>(pid) != rec->pid) return false;
  uint64_t dev = 0;
  int fd = peer_fd::fetch_socket(pid, static_cast<int>(rec->fd), rec->ino, &dev);
  if (fd < 0) {
    counters().bell_fetch_failed.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  set_peer_bell_fd_locked(fd, dev, rec->ino);  // the fetch made the fstat
  cdcmem::ack_bell(page, fabric_.peer_token);
  counters().bells_fetched.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool Connection::may_ring_peer_locked(uint8_t* page) const {
  return mem_.peer_bell_fd >= 0 && !cdcmem::direct_forbidden(page);
}

void Connection::drain_readiness_locked() {
  char junk[64];
  while (sys::recv(app_.fd, junk, sizeof junk, MSG_DONTWAIT) > 0) {
  }
  ready_.rd_owed = 0;
}

void Connection::signal_eof_locked() {
  if (ready_.eof_signalled || app_.engine_end < 0) return;
  bool may_be_handed_over = handoff_ && (shared_beyond_process() || (!active_ && !rx_.app_has_read));
  if (!close_.shut_rd && !close_.aborted && may_be_handed_over && rx_.space.used(rx_.prod, rx_.cons).value_or(0) > 0) {
    // A forked child may yet be handed this socket (core/handoff.h): an
    // accepted connection the application has not read from (accept-then-
    // fork servers fork before reading), or one that existed across a fork.
    // Its end-of-file must come after the data, so it waits until that is
    // read: a relay could not put bytes in front of it.
    ready_.eof_deferred = true;
    ring_readable_locked();
    return;
  }
  ready_.eof_deferred = false;
  sys::shutdown(app_.engine_end, SHUT_WR);
  ready_.eof_signalled = true;
}

void Connection::signal_reset_locked() {
  if (ready_.reset_signalled || app_.engine_end < 0) return;
  make_writable_locked();
  sys::shutdown(app_.engine_end, SHUT_RDWR);
  ready_.reset_signalled = ready_.eof_signalled = true;
}

void Connection::make_unwritable_locked() {
  if (app_.fd < 0 || close_.shut_wr) return;
  // Only we fill the socket, but with CDCs through memory the peer empties
  // it, possibly still from its last wake-up: ready_.wr_filled may be stale, so
  // fill again (one failing send when it is still full).
  if (ready_.wr_filled && !mem_.control) return;
  // A peer that took our last arming empties the socket until it finds it
  // empty, and may still be at it (we saw its CDC and wrote since): it would
  // take this filling too, and POLLOUT would return with the window full
  // (nginx-tests' proxy_upgrade.t client gives up on that EAGAIN). It counts
  // itself in `ringing` throughout; an arming it could take later is the
  // one we set below, for a window it has opened. (Not for long: a peer
  // killed while it counted itself would stall every full window.)
  if (mem_.control) wait_peer_quiet_locked(200);
  fill_readiness_socket(app_.fd, &ready_.app_sndbuf_small);
  ready_.wr_filled = true;
  if (mem_.control && app_.engine_end >= 0) {
    // The peer empties the socket when it consumes (core/cdc_mem.h).
    cdcmem::arm(mem_.control, cdcmem::Want::kWindow, tx_.cons_peer, local_token_);
    ready_.wr_armed = true;
    pull_cdc_locked();
  }
}

void Connection::make_writable_locked() {
  if (!ready_.wr_filled || app_.engine_end < 0) return;
  if (ready_.wr_armed) {
    ready_.wr_armed = false;
    cdcmem::disarm(mem_.control, cdcmem::Want::kWindow);
  }
  sys::empty_socket(app_.engine_end);
  ready_.wr_filled = false;
}

}  // namespace smcr
