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

namespace smcr {

namespace {

constexpr uint8_t kRmbeEyecatcher[4] = {0xE2, 0xD4, 0xC3, 0xD9};

// Blocking writes up to this size are never split by a full window.
constexpr size_t kAtomicWrite = 4096;

// With CDCs through memory a cursor update costs a cache line, so a large
// copy publishes its cursor every this many bytes: the peer copies the
// first part out (or refills the freed part) while we copy the next, as
// TCP's sender and receiver overlap on loopback, instead of each side
// waiting for the other's whole window-sized copy.
constexpr uint32_t kStreamChunk = 64 * 1024;

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

std::atomic<uint64_t> g_generation{1};  // never 0: a stored 0 means "not yet"
[[maybe_unused]] const int g_atfork = pthread_atfork(nullptr, nullptr, [] { g_generation.fetch_add(1); });
// PeerCloseWait / PeerAbortWait timer (RFC 4.8: like FIN_WAIT_2; no number given).
constexpr int64_t kCloseTimeoutMs = 10000;
// How long a C/A may trail the peer's TCP FIN/RST on the fabric.
constexpr int64_t kTcpGoneGraceMs = 1000;

// Recycled connection shells: never freed, so a racing try_ref() on a stale
// table pointer touches valid memory and fails cleanly.
std::mutex g_pool_mu;
Connection* g_pool = nullptr;

size_t iov_total(const iovec* iov, int n) {
  size_t t = 0;
  for (int i = 0; i < n; ++i) t += iov[i].iov_len;
  return t;
}

// Copies between a ring region and an iovec at a running iovec offset.
class IovCursor {
 public:
  IovCursor(const iovec* iov, int n) : iov_(iov), n_(n) {}
  // dir_out: ring -> iov; else iov -> ring
  void copy(uint8_t* ring, size_t len, bool ring_to_iov) {
    while (len > 0 && i_ < n_) {
      size_t room = iov_[i_].iov_len - off_;
      size_t k = std::min(room, len);
      uint8_t* p = static_cast<uint8_t*>(iov_[i_].iov_base) + off_;
      if (ring_to_iov) std::memcpy(p, ring, k);
      else std::memcpy(ring, p, k);
      ring += k;
      len -= k;
      off_ += k;
      if (off_ == iov_[i_].iov_len) {
        ++i_;
        off_ = 0;
      }
    }
  }
  // Hands out the next chunk of the iovec (for writes through the Link).
  bool next_chunk(size_t max, const uint8_t** p, size_t* k) {
    while (i_ < n_ && off_ == iov_[i_].iov_len) {
      ++i_;
      off_ = 0;
    }
    if (i_ >= n_) return false;
    *k = std::min(max, iov_[i_].iov_len - off_);
    *p = static_cast<const uint8_t*>(iov_[i_].iov_base) + off_;
    off_ += *k;
    return true;
  }

 private:
  const iovec* iov_;
  int n_;
  int i_ = 0;
  size_t off_ = 0;
};

int wait_fd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  return sys::poll(&p, 1, timeout_ms);
}

// SO_RCVTIMEO / SO_SNDTIMEO bound a blocking call's waiting, all of it, as
// TCP's do (the kernel takes what each wait used off the call's budget): a
// wake-up that brings too little to return (MSG_WAITALL, a window opened
// by a few bytes) must not start the timeout again. The clock starts at
// the first wait; calls that never wait never read it.
class CallTimeout {
 public:
  explicit CallTimeout(int timeout_ms) : timeout_ms_(timeout_ms) {}
  int timeout_ms() const { return timeout_ms_; }
  // The next wait's limit: -1 (none), or what is left; 0 once spent.
  int next_wait_ms() {
    if (timeout_ms_ < 0) return -1;
    int64_t now = sys::now_ms();
    if (deadline_ms_ < 0) deadline_ms_ = now + timeout_ms_;
    return static_cast<int>(std::max<int64_t>(deadline_ms_ - now, 0));
  }

 private:
  int timeout_ms_;
  int64_t deadline_ms_ = -1;
};

}  // namespace

Connection* Connection::create(const ConnectionSetup& s) {
  Connection* c = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_pool_mu);
    if (g_pool) {
      c = g_pool;
      g_pool = c->next_free_;
    }
  }
  if (!c) c = new Connection();
  // Connection::unlock: CDCs held for this token are delivered by
  // add_connection while we still hold the connection, and processed here.
  std::lock_guard<Connection> lock(*c);
  c->reset_fields();
  c->group_ = s.group;
  c->slot_ = s.slot;
  c->link_ = s.group->link_at(s.slot);
  c->rmb_on_ = s.rmbs;
  c->peer_rmb_on_ = s.peer_rmbs;
  for (const LocalRmb& r : s.rmbs)
    if (r.addr && !r.alias) c->rmb_ = r;
  c->rx_control_ = c->rmb_.control;
  const RemoteRmb& peer = s.peer_rmbs[static_cast<size_t>(s.slot)];
  c->rx_space_ = cdc::CursorSpace(c->rmb_.size, s.rmbe_base);
  c->tx_space_ = cdc::CursorSpace(peer.size, s.rmbe_base);
  c->local_token_ = s.local_token;
  c->peer_token_ = s.peer_token;
  c->tcp_fd_ = s.tcp_fd;
  c->active_ = s.active;
  c->rmb_memfd_ = s.rmb_memfd;
  c->peer_rmb_memfd_ = s.peer_rmb_memfd;
  c->owner_generation_ = process_generation();
  c->forks_at_create_ = handoff::forks_made();
  c->handoff_ = handoff::alloc_state();
  c->rx_prod_ = c->rx_cons_ = c->rx_cons_sent_ = c->rx_space_.initial();
  c->tx_prod_ = c->tx_cons_peer_ = c->tx_space_.initial();
  c->tx_published_prod_ = c->tx_space_.initial();
  c->tx_published_cons_ = c->rx_space_.initial();
  if (s.rmbe_base == 4) std::memcpy(c->rmb_.addr, kRmbeEyecatcher, 4);
  // One reference for the fd table, one for the group registration.
  c->refs_.store(2, std::memory_order_release);
  s.group->add_connection(c->local_token_, c);
  return c;
}

bool Connection::make_readiness_pair(int* app_end, int* engine_end) {
  int sv[2];
  if (sys::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
  *app_end = sys::hide_fd(sv[0]);
  *engine_end = sys::hide_fd(sv[1]);
  return true;
}

void Connection::fill_readiness_socket(int app_end, bool* made_small) {
  // The smallest send buffer makes a fill one send and its undoing one
  // recv, instead of a dozen each; set at the first fill only, since most
  // connections never block a writer (a system call per connection saved).
  if (!*made_small) {
    int small = 1;
    sys::setsockopt(app_end, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    *made_small = true;
  }
  sys::fill_socket(app_end);
}

void Connection::reset_fields() {
  group_ = nullptr;
  link_ = nullptr;
  app_fd_ = engine_end_ = tcp_fd_ = -1;
  rmb_memfd_ = peer_rmb_memfd_ = -1;  // closed with the RMBs (release_resources_locked)
  memfds_settled_ = memfds_counted_ = false;
  active_ = nonblocking_ = false;
  rcvtimeo_ms_ = sndtimeo_ms_ = -1;
  slot_ = 0;
  rmb_ = LocalRmb{};
  rmb_on_ = {};
  peer_rmb_on_ = {};
  unacked_head_ = unacked_count_ = 0;
  tx_seq_acked_ = 0;
  send_limit_ = 0;
  local_token_ = peer_token_ = 0;
  tx_seq_ = rx_seq_ = 0;
  tx_bytes_ = rx_bytes_ = 0;
  tx_writes_ = 0;
  short_flow_key_ = 0;
  rx_seq_seen_ = false;
  peer_writer_blocked_ = peer_requested_update_ = tx_window_full_ = false;
  sent_done_ = sent_close_ = sent_abort_ = false;
  peer_done_ = peer_closed_ = false;
  aborted_ = reset_reported_ = tcp_reset_ = link_dead_ = shut_rd_ = app_closed_ = released_ = false;
  peer_lost_ = linger_abort_ = tcp_gone_ = shm_link_gone_ = wrote_after_peer_close_ = false;
  user_fds_.store(1);
  handoff_ = nullptr;
  relayed_ = false;
  carried_ = false;
  passed_.store(false);
  claimant_fd_.store(-1);
  handover_seen_.store(false);
  wr_filled_ = eof_signalled_ = reset_signalled_ = eof_deferred_ = app_has_read_ = false;
  app_sndbuf_small_ = false;
  rd_owed_ = 0;
  rx_control_ = nullptr;
  rx_control_seen_ = 0;
  rx_urgent_seen_ = 0;
  rx_urgent_seen_valid_ = false;
  peer_bell_fd_ = -1;
  bell_owed_ = false;
  link_cdcs_unrung_ = 0;
  link_seen_prod_ = link_seen_cons_ = cdc::Cursor{};
  rd_armed_ = wr_armed_ = in_reader_ = false;
  deferral_ = nullptr;
  deferral_key_ = -1;
  parked_ = false;
  deferral_forbidden_.store(false);
  readers_asleep_ = 0;
  tcp_cork_.store(-1);
  tcp_nodelay_.store(-1);
  spin_backoff_.reset();
  window_backoff_.reset();
  tx_published_prod_ = tx_published_cons_ = cdc::Cursor{};
  tx_published_done_ = false;
  rx_urgent_ = Urgent::kNone;
  rx_urgent_mark_ = cdc::Cursor{};
  rx_urgent_byte_ = 0;
  oob_inline_ = priority_raised_ = tx_urgent_ = false;
  state_ = CloseState::kActive;
  timer_deadline_.store(0);
  for (const InboxItem& item : inbox_)
    for (int fd : {item.bell_fd, item.rehome_fd})
      if (fd >= 0) sys::close(fd);
  inbox_.clear();
  inbox_nonempty_.store(false);
}

bool Connection::try_ref() {
  int r = refs_.load(std::memory_order_acquire);
  while (r > 0) {
    if (refs_.compare_exchange_weak(r, r + 1, std::memory_order_acq_rel)) return true;
  }
  return false;
}

void Connection::unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::lock_guard<std::mutex> lock(g_pool_mu);
  next_free_ = g_pool;
  g_pool = this;
}

void Connection::attach_fds(int app_end, int engine_end, bool nonblocking) {
  std::lock_guard<Connection> lock(*this);
  app_fd_ = app_end;
  engine_end_ = engine_end;
  nonblocking_ = nonblocking;
  // Data or a close may have arrived between the handshake and now.
  if (rx_space_.used(rx_prod_, rx_cons_).value_or(0) > 0) ring_readable_locked();
  else arm_readable_locked();
  if (peer_write_closed(state_)) signal_eof_locked();
  if (aborted_ || peer_lost_) signal_reset_locked();
  bell_owed_ = rx_control_ && link_ && engine_end_ >= 0 && !link_dead_ && !released_;
}

uint64_t process_generation() { return g_generation.load(std::memory_order_relaxed); }

bool Connection::foreign() const { return owner_generation_ != process_generation(); }

void Connection::forget_in_child() {
  // Only this process's descriptors: the parent's connection is untouched.
  for (int fd : {app_fd_, engine_end_, tcp_fd_, rmb_memfd_, peer_rmb_memfd_})
    if (fd >= 0) sys::close(fd);
  close_inherited_bell();
}

void Connection::set_peer_bell_fd_locked(int fd) {
  peer_bell_fd_ = fd;
  struct stat st {};
  bool known = fd >= 0 && sys::fstat(fd, &st) == 0;
  peer_bell_dev_ = known ? st.st_dev : 0;
  peer_bell_ino_ = known ? st.st_ino : 0;
}

void Connection::close_inherited_bell() {
  // The parent's engine thread may have received the bell and set its
  // number while the parent forked: Linux copies the descriptor table
  // before the memory, so the child can hold the number without the
  // descriptor, and that number may be one the child has since given to
  // something else (its new link: the re-homed connection then ended at
  // once). Closed only where it is still the file the parent stored.
  struct stat st {};
  if (peer_bell_fd_ >= 0 && peer_bell_ino_ != 0 && sys::fstat(peer_bell_fd_, &st) == 0 &&
      st.st_dev == peer_bell_dev_ && st.st_ino == peer_bell_ino_)
    sys::close(peer_bell_fd_);
  peer_bell_fd_ = -1;
  peer_bell_dev_ = peer_bell_ino_ = 0;
}

namespace {
// Connections past their first use that keep their RMBs' memfds (two
// descriptors each) on a link shared with others.
std::atomic<int> g_kept_memfds{0};

// How many may: enough for any process that hands a used connection to a
// program or another process, a small share of the hidden range (an idle
// connection already holds three descriptors there) where that is large.
int kept_memfd_budget() {
  static const int budget = [] {
    int base = sys::hidden_fd_base();
    return base > 0 ? std::min(512, base / 16) : 8;
  }();
  return budget;
}

// Counts one more connection that keeps its memfds; false (nothing counted)
// past the budget.
bool count_kept_memfds() {
  if (g_kept_memfds.fetch_add(1, std::memory_order_relaxed) < kept_memfd_budget()) return true;
  g_kept_memfds.fetch_sub(1, std::memory_order_relaxed);
  return false;
}
}  // namespace

void Connection::settle_memfds_locked() {
  memfds_settled_ = true;
  bool own_link = group_ && group_->single_connection();
  if (!own_link) memfds_counted_ = count_kept_memfds();
  if (!own_link && !memfds_counted_) {
    close_memfds();
    return;
  }
}

void Connection::close_memfds() {
  for (int* fd : {&rmb_memfd_, &peer_rmb_memfd_}) sys::close_reset(fd);
  if (memfds_counted_) g_kept_memfds.fetch_sub(1, std::memory_order_relaxed);
  memfds_counted_ = false;
}

// How long a child's call on an inherited connection waits for the parent
// to let go of it (accept-then-fork servers close their copy at once).
constexpr int kHandoverWaitMs = 2000;
// How long the owner waits for the peer's answer to a re-homing request.
constexpr int kRehomeAnswerMs = 10000;
// A dead owner's re-homing marker is in the readiness socket already, or
// never comes.
constexpr int kOwnerGoneMarkerWaitMs = 100;

// SMCR_TEST_DIE_IN_REHOME (fault injection for tests): the owner kills
// itself in the middle of a re-homing: "before_ask" (the holder has the
// state and its link end, the peer has not been asked) or "after_answer"
// (the peer moved the connection; the holder has not been told).
static void die_here_in_tests(const char* point) {
  static const char* where = getenv("SMCR_TEST_DIE_IN_REHOME");
  if (where && strcmp(where, point) == 0) raise(SIGKILL);
}

bool Connection::handed_over(bool claim) {
  using namespace handoff;
  if (handover_seen_.load(std::memory_order_acquire)) return true;
  if (!handoff_) return false;
  int64_t deadline = sys::now_ms() + kHandoverWaitMs;
  for (;;) {
    auto s = static_cast<State>(handoff_->load(std::memory_order_acquire));
    int left = static_cast<int>(std::max<int64_t>(deadline - sys::now_ms(), 0));
    switch (s) {
      case kOwned:
      case kOffered:
        // Our first use claims it: we will own it (re-homing).
        if (!claim) return false;
        if (transition(handoff_, s, kClaimDirect)) claimed_ns_ = sys::now_ns();
        continue;
      case kClaimDirect:
        // Claimed, and the owner died before it answered: what it sent
        // before it asked the peer (if it got so far) is ours to take; else
        // the connection is lost, and the application sees it end.
        if (claim && owner_gone(handoff_)) {
          if (std::atomic<uint32_t>* word = handoff_; transition(word, kClaimDirect, kAdopting)) {
            SMCR_LOG(1, "conn %08x: its owner died while handing it over: taking what it left", local_token_);
            bool ok = adopt_rehomed(kOwnerGoneMarkerWaitMs);
            publish(word, ok ? kAdopted : kGone);
            if (ok) return false;
          }
          continue;
        }
        [[fallthrough]];
      case kClaimExec:
      case kClaimRemote:
      case kAdopting:
      case kRelayDraining:
        if (!claim || left == 0) return false;  // still someone else's
        wait_while(handoff_, {s}, std::min(left, 100));  // in slices: a dying owner wakes nobody
        continue;
      case kRehomed:
        if (!claim) return false;
        if (std::atomic<uint32_t>* word = handoff_; transition(word, kRehomed, kAdopting)) {
          bool ok = adopt_rehomed(kHandoverWaitMs);  // replaces handoff_ with a word of our own
          publish(word, ok ? kAdopted : kGone);
          if (ok) return false;  // ours: not foreign any more
        }
        continue;
      case kAdopted:
        return false;  // ours now (not foreign any more), or another process's
      case kRelay:
        if (transition(handoff_, kRelay, kRelayDraining)) {
          // The readiness bytes before the relay's marker are not data.
          int marker[1] = {-1};
          if (handoff::drain_to_marker(app_fd_, marker, kHandoverWaitMs, handoff::kRelayMarker) > 0)
            sys::close(marker[0]);
          publish(handoff_, kRelayReady);
        }
        continue;
      case kRelayReady:
      case kGone:
      case kNone:
        break;
    }
    if (s == kNone) return false;
    if (!handover_seen_.exchange(true)) {
      // Ended in its owner: what its readiness socket still holds is
      // readiness bytes, never data; the application reads the end.
      if (s == kGone && app_fd_ >= 0) drain_readiness_locked();  // our stale copy's counters only
      // Our inherited copies of the readiness pair would keep the stream open
      // after the parent's relay (or the parent) is gone.
      for (int* fd : {&app_fd_, &engine_end_}) sys::close_reset(fd);
    }
    return true;
  }
}

void Connection::claim_for_exec() {
  using namespace handoff;
  if (!handoff_ || handover_seen_.load()) return;
  for (auto s : {kOwned, kOffered})
    if (transition(handoff_, s, kClaimExec)) return;
}

bool Connection::hand_over_locked() {
  if (aborted_ || peer_lost_ || link_dead_ || released_ || reset_signalled_ || app_fd_ < 0 || engine_end_ < 0)
    return false;
  // The peer closed both ways and nothing is left to read: a child could only
  // read end-of-file and fail to write, which a closed connection gives too.
  if (peer_closed_ && rx_space_.used(rx_prod_, rx_cons_).value_or(0) == 0) return false;
  // A holder learns of data by the readiness socket from now on: no parking.
  deferral_ = nullptr;
  unpark_locked();
  sys::close(app_fd_);
  app_fd_ = -1;
  // Still open elsewhere? With every other copy closed the engine end hangs up.
  pollfd p{engine_end_, 0, 0};
  if (sys::poll(&p, 1, 0) < 0 || (p.revents & POLLHUP)) return false;
  relayed_ = true;
  // A holder that already asked for it (its call waits) keeps its claim.
  handoff::transition(handoff_, handoff::kOwned, handoff::kOffered);
  if (!handoff::start_handover(this, {engine_end_, tcp_fd_, peer_bell_fd_})) {
    relayed_ = false;
    return false;
  }
  SMCR_LOG(1, "conn %08x: offered to the forked processes that hold it", local_token_);
  return true;
}

bool Connection::holders_gone() {
  pollfd p{engine_end_, 0, 0};
  return sys::poll(&p, 1, 0) < 0 || (p.revents & POLLHUP);
}

void Connection::end_offer() {
  std::unique_lock<Connection> lock(*this);
  relayed_ = false;
  close_for_app_locked(lock, false);
}

bool Connection::start_relaying(int* child_fd, int* own_fd) {
  std::lock_guard<Connection> lock(*this);
  return start_relaying_locked(child_fd, own_fd);
}

bool Connection::relay_here(int* child_fd, int* own_fd) {
  std::lock_guard<Connection> lock(*this);
  if (relayed_ || foreign() || app_fd_ < 0) return false;
  // Nothing is parked from now on: the relay reads the connection as any
  // reader does, woken by the new readiness pair.
  deferral_ = nullptr;
  unpark_locked();
  int old_app_end = app_fd_;
  relayed_ = true;
  if (!start_relaying_locked(child_fd, own_fd)) {
    relayed_ = false;
    return false;
  }
  // Our private copy of the application's socket, which is the stream now:
  // the relay must see it hang up when the application's last copy closes.
  sys::close(old_app_end);
  return true;
}

bool Connection::start_relaying_locked(int* child_fd, int* own_fd) {
  if (aborted_ || peer_lost_ || link_dead_ || released_ || reset_signalled_ || engine_end_ < 0) return false;
  uint32_t unread = rx_space_.used(rx_prod_, rx_cons_).value_or(0);
  if (eof_signalled_ && unread > 0) {
    // The holders' socket already shows end-of-file; these bytes could not
    // follow it. Close as TCP does with unread data: abortively.
    SMCR_LOG(1, "conn %08x: handover after the peer's EOF with %u unread bytes: aborting", local_token_, unread);
    return false;
  }
  // The peer may write into this socket itself (a doorbell byte, or draining
  // it for POLLOUT): from here it is the holders' byte stream.
  if (!revoke_peer_bell_locked()) {
    SMCR_LOG(1, "conn %08x: the peer is still ringing: no handover", local_token_);
    return false;
  }
  make_writable_locked();
  // The holder reads up to this marker first: what is before it is
  // readiness bytes (ours cannot be drained here: our copy of the app end
  // is closed). Any descriptor marks it; the holder closes it.
  int marker[1] = {engine_end_};
  if (!handoff::send_marker(engine_end_, marker, handoff::kRelayMarker)) return false;
  *child_fd = engine_end_;
  if (!make_readiness_pair(&app_fd_, &engine_end_)) {
    engine_end_ = *child_fd;
    app_fd_ = -1;
    return false;
  }
  wr_filled_ = eof_signalled_ = reset_signalled_ = app_sndbuf_small_ = false;
  rd_owed_ = 0;
  rd_armed_ = wr_armed_ = false;
  if (unread > 0) ring_readable_locked();
  if (peer_write_closed(state_)) signal_eof_locked();
  *own_fd = app_fd_;
  counters().handovers.fetch_add(1, std::memory_order_relaxed);
  SMCR_LOG(1, "conn %08x: handed over to a forked child (relayed)", local_token_);
  handoff::publish(handoff_, handoff::kRelay);
  return true;
}

// The fields a re-homed connection's new owner takes from the old one: the
// protocol state (cursors, sequence numbers, close state, what the
// readiness socket shows). Not the descriptors, locks, references and
// per-process bindings, which the new owner has or makes itself.
#define SMCR_HANDOVER_FIELDS(X)                                                                               \
  X(rx_space_) X(tx_space_) X(send_limit_) X(local_token_) X(peer_token_) X(rx_control_seen_)                \
  X(rx_urgent_seen_) X(rx_urgent_seen_valid_) X(bell_owed_) X(link_cdcs_unrung_) X(link_seen_prod_)          \
  X(link_seen_cons_) X(rd_armed_) X(wr_armed_) X(tx_published_prod_) X(tx_published_cons_)                    \
  X(tx_published_done_) X(tx_bytes_) X(rx_bytes_) X(tx_writes_) X(short_flow_key_) X(rx_prod_) X(rx_cons_)    \
  X(rx_cons_sent_) X(tx_prod_) X(tx_cons_peer_) X(tx_seq_) X(rx_seq_) X(rx_seq_seen_) X(peer_writer_blocked_) \
  X(peer_requested_update_) X(tx_window_full_) X(sent_done_) X(sent_close_) X(sent_abort_) X(peer_done_)      \
  X(peer_closed_) X(aborted_) X(wrote_after_peer_close_) X(reset_reported_) X(tcp_reset_) X(link_dead_)       \
  X(peer_lost_) X(tcp_gone_) X(shut_rd_) X(released_) X(rd_owed_) X(edge_wanted_) X(edge_mark_) X(wr_filled_) \
  X(eof_signalled_) X(reset_signalled_) X(eof_deferred_) X(rx_urgent_) X(rx_urgent_mark_) X(rx_urgent_byte_)  \
  X(oob_inline_) X(priority_raised_) X(tx_urgent_) X(app_has_read_) X(state_)

struct Connection::HandoverSnapshot {
  uint32_t magic;
#define SMCR_FIELD(f) decltype(Connection::f) f;
  SMCR_HANDOVER_FIELDS(SMCR_FIELD)
#undef SMCR_FIELD
  int64_t timer_deadline;
  int8_t tcp_cork, tcp_nodelay;
};
constexpr uint32_t kSnapshotMagic = 0x534d4348;  // "SMCH"

void Connection::save_snapshot_locked(HandoverSnapshot* s) const {
  static_assert(std::is_trivially_copyable_v<HandoverSnapshot>);
  static_assert(sizeof(HandoverSnapshot) <= handoff::kSnapshotBytes);
  s->magic = kSnapshotMagic;
#define SMCR_SAVE(f) s->f = f;
  SMCR_HANDOVER_FIELDS(SMCR_SAVE)
#undef SMCR_SAVE
  s->timer_deadline = timer_deadline_.load();
  s->tcp_cork = tcp_cork_.load();
  s->tcp_nodelay = tcp_nodelay_.load();
}

void Connection::load_snapshot(const HandoverSnapshot& s) {
#define SMCR_LOAD(f) f = s.f;
  SMCR_HANDOVER_FIELDS(SMCR_LOAD)
#undef SMCR_LOAD
  timer_deadline_.store(s.timer_deadline);
  tcp_cork_.store(s.tcp_cork);
  tcp_nodelay_.store(s.tcp_nodelay);
}

bool Connection::make_move_link(int* peer_end, int* holder_end) {
  int sv[2];
  if (sys::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return false;
  timeval tv{10, 0};
  for (int fd : sv) sys::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  *peer_end = sys::hide_fd(sv[0]);
  *holder_end = sys::hide_fd(sv[1]);
  return true;
}

bool Connection::ask_peer_to_move(int peer_end) {
  handoff::Rehome ask;
  ask.receiver_token = peer_token_;
  ask.sender_token = local_token_;
  bool moved = group_->llc_exchange(handoff::encode_rehome(ask), peer_end, kRehomeAnswerMs);
  sys::close(peer_end);
  return moved;
}

bool Connection::rehome_to_child() {
  std::unique_lock<Connection> lock(*this);
  auto refused = [this](const char* why) {
    SMCR_LOG(1, "conn %08x: not re-homed (%s): relayed instead", local_token_, why);
    return false;
  };
  if (!group_ || !group_->shm() || group_->link_slots() != 1 || !rx_control_ || !link_)
    return refused("not on the shared-memory fabric");
  if (aborted_ || peer_lost_ || link_dead_ || released_ || reset_signalled_ || engine_end_ < 0 || tcp_fd_ < 0)
    return refused("the connection has ended");
  int peer_end, holder_end;
  if (!make_move_link(&peer_end, &holder_end)) return refused("no socket pair");
  // The state is written down and the holder given its link end and the
  // peer's bell before the peer is asked: an owner killed from here on
  // leaves the holder all it needs (handed_over(), owner_gone()). Held
  // meanwhile, nothing changes the state: what the peer sends before its
  // answer is also in the shared CDC page, which the holder reads when it
  // takes the connection over.
  // From here the peer's own request to move the connection (both ends
  // handing it over at once) is refused, parked or not: both then relay.
  rehoming_.store(true);
  struct EndRehoming {
    std::atomic<bool>& flag;
    ~EndRehoming() { flag.store(false); }
  } end_rehoming{rehoming_};
  drain_inbox_locked();
  pull_cdc_locked();
  save_snapshot_locked(static_cast<HandoverSnapshot*>(handoff::snapshot_area(handoff_)));
  int fds[2] = {holder_end, peer_bell_fd_};
  bool sent = handoff::send_marker(engine_end_, std::span<const int>(fds, peer_bell_fd_ >= 0 ? 2 : 1),
                                   handoff::kRehomeMarker);
  sys::close(holder_end);
  if (!sent) {
    sys::close(peer_end);
    return refused("the holder cannot be given the connection");
  }
  die_here_in_tests("before_ask");
  int64_t asked_ns = sys::now_ns();
  bool moved = ask_peer_to_move(peer_end);
  if (!moved) {
    // The holder skips the marker (the relay sends its own).
    if (!group_->failed()) return refused("the peer did not move it");
    return refused("the link failed");
  }
  // From the peer's answer on, its messages for the connection go to the
  // new link. Those parked since the state was written down are not ours
  // to act on any more.
  die_here_in_tests("after_answer");
  released_ = true;
  discard_inbox_locked();
  handoff::publish(handoff_, handoff::kRehomed);
  counters().rehomed.fetch_add(1, std::memory_order_relaxed);
  SMCR_LOG(1, "conn %08x: re-homed to a forked child (its own link, no relay; the peer moved it in %lld us)",
           local_token_, static_cast<long long>((sys::now_ns() - asked_ns) / 1000));
  // Forgotten here without a word to the peer: the holder has every
  // descriptor and mapping, and the peer its new link.
  forget_moved_locked(lock);
  return true;
}

void Connection::forget_moved_locked(std::unique_lock<Connection>& lock) {
  Engine::get().unwatch_tcp(this);
  for (int* fd : {&tcp_fd_, &engine_end_, &peer_bell_fd_}) sys::close_reset(fd);
  close_memfds();
  released_ = app_closed_ = true;
  state_ = CloseState::kClosed;
  timer_deadline_.store(0);
  rx_control_ = nullptr;
  group_->free_rmbs(&rmb_on_, &peer_rmb_on_, false);  // our mappings only: no DELETE RKEY
  rmb_ = LocalRmb{};
  handoff::retire_state(handoff_);
  handoff_ = nullptr;
  LinkGroup* g = group_;
  group_ = nullptr;
  link_ = nullptr;
  g->remove_connection(local_token_);
  lock.unlock();
  unref();  // the fd table's reference, which the handover thread held
}

bool Connection::passable() {
  std::lock_guard<Connection> lock(*this);
  return !foreign() && !relayed_ && !carried_ && group_ && group_->shm() && group_->link_slots() == 1 && rx_control_ &&
         link_ && rmb_memfd_ >= 0 && peer_rmb_memfd_ >= 0 && handoff_ && !aborted_ && !peer_lost_ && !link_dead_ &&
         !released_ && !reset_signalled_ && app_fd_ >= 0 && engine_end_ >= 0 && tcp_fd_ >= 0;
}

Connection::RemoteClaim Connection::claim_remote(int fd) {
  if (!mu_.try_lock()) return RemoteClaim::kHeld;
  std::lock_guard<Connection> lock(*this, std::adopt_lock);
  if (!passed_.load() || !handoff_ || foreign() || released_) return RemoteClaim::kGone;
  uint32_t v = handoff_->load(std::memory_order_acquire);
  if (v == handoff::kOwned) return app_closed_ ? RemoteClaim::kGone : RemoteClaim::kHeld;
  if (v != handoff::kOffered) return RemoteClaim::kGone;
  int answer = sys::dup_hidden(fd);
  if (answer < 0) return RemoteClaim::kHeld;
  claimant_fd_.store(answer);
  if (!handoff::transition(handoff_, handoff::kOffered, handoff::kClaimRemote)) {
    sys::close(claimant_fd_.exchange(-1));
    return RemoteClaim::kGone;
  }
  return RemoteClaim::kClaimed;
}

bool Connection::pass_to_claimant() {
  int claimant = claimant_fd_.exchange(-1);
  std::unique_lock<Connection> lock(*this);
  bool record_sent = false;
  auto refused = [&](const char* why) {
    SMCR_LOG(1, "conn %08x: not passed to the program that asked (%s): relayed instead", local_token_, why);
    // The claimant drains the readiness socket to the relay's marker and
    // answers for the stream with the TCP socket (the record had it).
    char verdict = exec_carry::kVerdictRelay;
    if (claimant >= 0) {
      sys::sendmsg_with_fd(claimant, &verdict, 1, record_sent ? -1 : tcp_fd_, MSG_NOSIGNAL);
      sys::close(claimant);
    }
    return false;
  };
  if (claimant < 0) return refused("its request is gone");
  if (!group_ || !group_->shm() || group_->link_slots() != 1 || !rx_control_ || !link_)
    return refused("not on the shared-memory fabric");
  if (rmb_memfd_ < 0 || peer_rmb_memfd_ < 0) return refused("its RMBs' memfds are closed");
  if (aborted_ || peer_lost_ || link_dead_ || released_ || reset_signalled_ || engine_end_ < 0 || tcp_fd_ < 0)
    return refused("the connection has ended");
  int peer_end, holder_end;
  if (!make_move_link(&peer_end, &holder_end)) return refused("no socket pair");
  // As rehome_to_child: the claimant has everything before the peer is
  // asked, so that our death from here on leaves it what it needs.
  rehoming_.store(true);
  struct EndRehoming {
    std::atomic<bool>& flag;
    ~EndRehoming() { flag.store(false); }
  } end_rehoming{rehoming_};
  drain_inbox_locked();
  pull_cdc_locked();
  exec_carry::Record r;
  r.role = static_cast<uint8_t>(group_->role());
  r.peer = group_->peer();
  r.link_num = group_->link_num();  // the identity the peer's new group keeps (LinkGroup::make_rehomed)
  r.local = group_->local();
  r.remote = group_->remote();
  const RemoteRmb& peer = peer_rmb_on_[static_cast<size_t>(slot_)];
  r.rmb_size = rmb_.size;
  r.rmb_rkey = rmb_.rkey;
  r.rmb_vaddr = rmb_.vaddr;
  r.peer_size = peer.size;
  r.peer_rkey = peer.rkey;
  r.peer_vaddr = peer.vaddr;
  r.rmbe_base = rx_space_.base();
  r.local_token = local_token_;
  r.peer_token = peer_token_;
  r.active = active_;
  r.linger_abort = linger_abort_;
  r.link_fd = holder_end;
  r.tcp_fd = tcp_fd_;
  r.app_end = -1;  // the claimant's own
  r.engine_end = engine_end_;
  r.peer_bell_fd = peer_bell_fd_;
  r.memfd = rmb_memfd_;
  r.peer_memfd = peer_rmb_memfd_;
  save_snapshot_locked(reinterpret_cast<HandoverSnapshot*>(r.snapshot));
  bool sent = exec_carry::send_record(claimant, r);
  sys::close(holder_end);
  if (!sent) {
    sys::close(peer_end);
    return refused("the record could not be sent");
  }
  record_sent = true;
  int64_t asked_ns = sys::now_ns();
  bool moved = ask_peer_to_move(peer_end);
  if (!moved) return refused(group_->failed() ? "the link failed" : "the peer did not move it");
  released_ = true;
  discard_inbox_locked();
  char verdict = exec_carry::kVerdictMoved;
  sys::send(claimant, &verdict, 1, MSG_NOSIGNAL);
  sys::close(claimant);
  handoff::publish(handoff_, handoff::kGone);  // for a forked child that holds it too
  counters().exec_carried.fetch_add(1, std::memory_order_relaxed);
  SMCR_LOG(1, "conn %08x: passed to the process that took it (a program spawned from here, or the receiver of an SCM_RIGHTS message): its own link, no relay; the peer moved it in %lld us",
           local_token_, static_cast<long long>((sys::now_ns() - asked_ns) / 1000));
  forget_moved_locked(lock);
  return true;
}

bool Connection::adopt_rehomed(int marker_wait_ms) {
  // Only this thread touches the object now: the word says kAdopting, and
  // other threads of this process wait for it. The locks are the parent's
  // copies from the fork (one may have been held then): made afresh.
  new (&mu_) std::mutex();
  new (&inbox_mu_) std::mutex();
  inbox_.clear();
  inbox_nonempty_.store(false);
  std::atomic<uint32_t>* old_word = handoff_;
  const auto* snap = static_cast<const HandoverSnapshot*>(handoff::snapshot_area(old_word));
  // Our copy of the peer's bell (if the parent had it at the fork) goes
  // before anything arrives that could take its number: the one that comes
  // with the marker replaces it.
  close_inherited_bell();
  int fds[2] = {-1, -1};
  int n = handoff::drain_to_marker(app_fd_, fds, marker_wait_ms, handoff::kRehomeMarker);
  if (n < 1 || snap->magic != kSnapshotMagic || !group_) {
    for (int fd : fds)
      if (fd >= 0) sys::close(fd);
    SMCR_LOG(1, "conn %08x: the re-homed connection did not arrive: resetting the socket", local_token_);
    if (engine_end_ >= 0) sys::shutdown(engine_end_, SHUT_RDWR);
    return false;
  }
  // Written before the word said kRehomed, and never again.
  load_snapshot(*snap);
  set_peer_bell_fd_locked(n >= 2 ? sys::hide_fd(fds[1]) : -1);
  LinkGroup* fresh = LinkGroup::make_rehomed(*group_, std::make_unique<ShmLink>(sys::hide_fd(fds[0])));
  group_ = fresh;
  link_ = fresh->link_at(0);
  slot_ = 0;
  unacked_head_ = unacked_count_ = 0;
  tx_seq_acked_ = tx_seq_;
  deferral_ = nullptr;
  deferral_key_ = -1;
  parked_ = in_reader_ = false;
  readers_asleep_ = 0;
  spin_backoff_.reset();
  window_backoff_.reset();
  relayed_ = false;
  handover_seen_.store(false);
  read_descriptor_modes();
  handoff_ = handoff::alloc_state();
  forks_at_create_ = handoff::forks_made();
  owner_generation_ = process_generation();
  ref();  // the new group's
  fresh->add_connection(local_token_, this);
  LinkGroup::register_group(fresh);
  Engine::get().add_group(fresh);
  Engine::get().watch_tcp(this, tcp_fd_);
  if (timer_deadline_.load() != 0) Engine::get().arm_timer(this);
  {
    std::lock_guard<Connection> lock(*this);
    settle_after_move_locked();
  }
  counters().adopted.fetch_add(1, std::memory_order_relaxed);
  SMCR_LOG(1, "conn %08x: taken over from the parent process (%lld us after the claim)", local_token_,
           claimed_ns_ ? static_cast<long long>((sys::now_ns() - claimed_ns_) / 1000) : -1LL);
  return true;
}

void Connection::read_descriptor_modes() {
  int fl = sys::fcntl(app_fd_, F_GETFL);
  nonblocking_ = fl >= 0 && (fl & O_NONBLOCK);
  for (bool receive : {true, false}) {
    timeval tv{};
    socklen_t len = sizeof tv;
    int ms = -1;
    if (sys::getsockopt(tcp_fd_, SOL_SOCKET, receive ? SO_RCVTIMEO : SO_SNDTIMEO, &tv, &len) == 0 &&
        (tv.tv_sec || tv.tv_usec))
      ms = static_cast<int>(tv.tv_sec * 1000 + tv.tv_usec / 1000);
    (receive ? rcvtimeo_ms_ : sndtimeo_ms_) = ms;
  }
}

void Connection::settle_after_move_locked() {
  // What the readiness socket holds now is ours to settle: the previous
  // owner's doorbell bytes (a re-homed one's drained up to the marker) and
  // any that came after. A ring the peer claimed may still be on its way.
  drain_readiness_locked();
  if (rd_armed_ && rx_control_ && !(cdcmem::load_want(rx_control_, cdcmem::Want::kData) & cdcmem::kArmed)) {
    wait_peer_quiet_locked(100);
    drain_readiness_locked();
  }
  rd_armed_ = false;
  rd_owed_ = 0;
  cdcmem::disarm(rx_control_, cdcmem::Want::kData);
  pull_cdc_locked();
  settle_readable_locked();
  if (peer_write_closed(state_) && !eof_deferred_) signal_eof_locked();
}

// ---------------------------------------------------------------- exec

bool Connection::exec_carriable() {
  // Not locked: an inherited connection's lock is the parent's copy, and
  // exec_carry_begin checks again, held.
  if (!group_ || !group_->shm() || group_->link_slots() != 1 || !rx_control_) return false;
  if (rmb_memfd_ < 0 || peer_rmb_memfd_ < 0) return false;
  // Inherited: our claim re-homes it onto a link of its own.
  return foreign() || group_->single_connection();
}

bool Connection::exec_carry_begin(exec_carry::Record* r) {
  lock();
  auto refused = [this](const char* why) {
    SMCR_LOG(1, "conn %08x: not carried across exec (%s)", local_token_, why);
    unlock();
    return false;
  };
  if (foreign()) return refused("another process owns it");
  if (!group_ || !group_->shm() || !group_->single_connection() || group_->link_slots() != 1 || !link_ ||
      !rx_control_)
    return refused("it shares its link with other connections");
  if (rmb_memfd_ < 0 || peer_rmb_memfd_ < 0) return refused("its RMBs' memfds are closed");
  if (forks_at_create_ != handoff::forks_made()) return refused("a forked child may hold it too");
  if (passed_.load()) return refused("a program spawned from here takes it over");
  if (relayed_) return refused("it is being handed to a forked child");
  if (aborted_ || peer_lost_ || link_dead_ || released_ || reset_signalled_ || app_fd_ < 0 || engine_end_ < 0 ||
      tcp_fd_ < 0)
    return refused("it has ended");
  pull_cdc_locked();
  r->role = static_cast<uint8_t>(group_->role());
  r->peer = group_->peer();
  r->link_num = group_->link_num();
  r->local = group_->local();
  r->remote = group_->remote();
  const RemoteRmb& peer = peer_rmb_on_[static_cast<size_t>(slot_)];
  r->rmb_size = rmb_.size;
  r->rmb_rkey = rmb_.rkey;
  r->rmb_vaddr = rmb_.vaddr;
  r->peer_size = peer.size;
  r->peer_rkey = peer.rkey;
  r->peer_vaddr = peer.vaddr;
  r->rmbe_base = rx_space_.base();
  r->local_token = local_token_;
  r->peer_token = peer_token_;
  r->active = active_;
  r->linger_abort = linger_abort_;
  r->link_fd = link_->notify_fd();
  r->tcp_fd = tcp_fd_;
  r->app_end = app_fd_;
  r->engine_end = engine_end_;
  r->peer_bell_fd = peer_bell_fd_;
  r->memfd = rmb_memfd_;
  r->peer_memfd = peer_rmb_memfd_;
  static_assert(sizeof(HandoverSnapshot) <= sizeof r->snapshot);
  save_snapshot_locked(reinterpret_cast<HandoverSnapshot*>(r->snapshot));
  return true;  // held until the exec
}

void Connection::exec_carry_cancel() { unlock(); }

Connection* Connection::exec_adopt(const exec_carry::Record& r, LinkGroup* g, const LocalRmb& rmb,
                                   const RemoteRmb& peer) {
  static_assert(alignof(HandoverSnapshot) <= alignof(exec_carry::Record));
  const auto& snap = *reinterpret_cast<const HandoverSnapshot*>(r.snapshot);
  if (snap.magic != kSnapshotMagic || snap.local_token_ != r.local_token) return nullptr;
  ConnectionSetup s;
  s.group = g;
  s.rmbs[0] = rmb;
  // The control page holds the peer's newest CDC: not to be read (by any
  // lock of the connection) before the snapshot says what was read of it.
  s.rmbs[0].control = nullptr;
  s.peer_rmbs[0] = peer;
  s.slot = 0;
  s.local_token = r.local_token;
  s.peer_token = r.peer_token;
  s.rmbe_base = r.rmbe_base;
  s.tcp_fd = r.tcp_fd;
  s.active = r.active;
  s.rmb_memfd = r.memfd;
  s.peer_rmb_memfd = r.peer_memfd;
  Connection* c = create(s);  // one reference for the application's first number, one for the group
  {
    std::lock_guard<Connection> lock(*c);
    c->load_snapshot(snap);
    c->rmb_.control = c->rmb_on_[0].control = c->rx_control_ = rmb.control;
    c->app_fd_ = r.app_end;
    c->engine_end_ = r.engine_end;
    c->set_peer_bell_fd_locked(r.peer_bell_fd);
    c->linger_abort_ = r.linger_abort;
    c->carried_ = true;
    c->tx_seq_acked_ = c->tx_seq_;
    c->read_descriptor_modes();
    uint32_t numbers = std::max<uint32_t>(r.n_app_fds, 1);
    c->user_fds_.store(static_cast<int>(numbers));
    for (uint32_t i = 1; i < numbers; ++i) c->ref();
  }
  LinkGroup::register_group(g);
  Engine::get().add_group(g);
  Engine::get().watch_tcp(c, c->tcp_fd_);
  if (c->timer_deadline_.load() != 0) Engine::get().arm_timer(c);
  {
    std::lock_guard<Connection> lock(*c);
    c->settle_after_move_locked();
  }
  counters().exec_adopted.fetch_add(1, std::memory_order_relaxed);
  SMCR_LOG(1, "conn %08x: carried across exec: this program owns it now", c->local_token_);
  return c;
}

void Connection::on_rehome_request(int fd, uint32_t peer_token) {
  InboxItem item;
  item.rehome_fd = fd;
  item.rehome_token = peer_token;
  park(item);
}

void Connection::rehome_peer_locked(int fd, uint32_t peer_token) {
  handoff::Rehome answer;
  answer.receiver_token = peer_token_;
  answer.sender_token = local_token_;
  answer.reply = true;
  LinkGroup* old = group_;
  Link* old_link = link_;
  LinkGroup* fresh = nullptr;
  if (old && old_link && !released_ && !rehoming_.load() && peer_token == peer_token_ && rx_control_ &&
      old->shm() && old->link_slots() == 1) {
    // The old group keeps a hold until our answer is posted on its link.
    fresh = old->rehome_connection(local_token_, std::make_unique<ShmLink>(sys::hide_fd(fd)),
                                   peer_rmb_on_[static_cast<size_t>(slot_)]);
    fd = -1;
  }
  if (fd >= 0) sys::close(fd);
  if (!fresh) {
    answer.negative = true;
    if (old_link) old_link->post_message(handoff::encode_rehome(answer));
    SMCR_LOG(1, "conn %08x: the peer's request to move the connection refused", local_token_);
    return;
  }
  group_ = fresh;
  link_ = fresh->link_at(0);
  slot_ = 0;
  unacked_head_ = unacked_count_ = 0;
  tx_seq_acked_ = tx_seq_;
  // Held: nothing of ours for this connection is posted on the old link
  // after the answer.
  old_link->post_message(handoff::encode_rehome(answer));
  old->release_hold();
  Engine::get().add_group(fresh);
  // The new owner may lack our bell (core/cdc_mem.h): ours rode a link CDC
  // that reached the old owner after it forked, a copy the child never
  // got. Without it every CDC of the new owner's goes on the link (a wake-up
  // of both engines per CDC). One link message; a duplicate is dropped.
  send_bell_locked();
  counters().rehomed_peer.fetch_add(1, std::memory_order_relaxed);
  SMCR_LOG(1, "conn %08x: moved to the peer's new link (its connection changed process)", local_token_);
}

void Connection::process_exit() {
  // Before the lock: a forked child must not even take it (see foreign()).
  if (foreign()) return;
  std::lock_guard<Connection> lock(*this);
  if (app_closed_ || released_ || relayed_) return;
  // A forked child still holds it: it lives on there (re-homed at exit,
  // handoff::finish_offers_at_exit), as the TCP socket's file would.
  if (handoff_ && shared_beyond_process()) {
    ref();  // for the handover thread; the fd table keeps its own
    if (hand_over_locked()) return;
    unref();
  }
  pull_cdc_locked();  // unread bytes make it a reset: see close_for_app_locked
  app_closed_ = true;
  apply_close_event_locked(linger_abort_ ? CloseEvent::kAppAbort : CloseEvent::kAppClose);
}

std::string Connection::describe() {
  // Diagnostics run on the engine thread, which must never wait for a
  // connection (its holder may be waiting for the engine).
  if (!mu_.try_lock()) {
    char busy[48];
    snprintf(busy, sizeof busy, "token=%08x state=busy", local_token_);
    return busy;
  }
  std::lock_guard<Connection> lock(*this, std::adopt_lock);
  drain_inbox_locked();
  auto addr = [&](bool peer) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (tcp_fd_ < 0 || (peer ? sys::getpeername(tcp_fd_, reinterpret_cast<sockaddr*>(&ss), &len)
                              : sys::getsockname(tcp_fd_, reinterpret_cast<sockaddr*>(&ss), &len)) != 0)
      return std::string("?");
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss.ss_family == AF_INET) {
      auto* a = reinterpret_cast<sockaddr_in*>(&ss);
      inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
      port = ntohs(a->sin_port);
      return std::string(host) + ":" + std::to_string(port);
    }
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  };
  char buf[320];
  snprintf(buf, sizeof buf,
           "token=%08x role=%s state=%s local=%s peer=%s rmb=%u peer_rmb=%u tx_bytes=%llu rx_bytes=%llu "
           "unread=%u app_closed=%d link=%u",
           local_token_, active_ ? "client" : "server", to_string(state_), addr(false).c_str(), addr(true).c_str(),
           rmb_.size, peer_rmb_on_[static_cast<size_t>(slot_)].size, static_cast<unsigned long long>(tx_bytes_),
           static_cast<unsigned long long>(rx_bytes_), aborted_ ? 0 : rx_space_.used(rx_prod_, rx_cons_).value_or(0),
           app_closed_ ? 1 : 0, group_ ? group_->link_num_at(slot_) : 0);
  std::string out = buf;
  if (rx_control_) {
    // CDCs through memory: what we wait for and what the peer may ring.
    const uint8_t* peer_page = peer_rmb_on_[static_cast<size_t>(slot_)].control;
    snprintf(buf, sizeof buf,
             " cdc=memory wants=%llx/%llx peer_wants=%llx/%llx peer_bell=%d readable=%s writable=%s window=%u",
             static_cast<unsigned long long>(cdcmem::load_want(rx_control_, cdcmem::Want::kData)),
             static_cast<unsigned long long>(cdcmem::load_want(rx_control_, cdcmem::Want::kWindow)),
             static_cast<unsigned long long>(peer_page ? cdcmem::load_want(const_cast<uint8_t*>(peer_page), cdcmem::Want::kData) : 0),
             static_cast<unsigned long long>(peer_page ? cdcmem::load_want(const_cast<uint8_t*>(peer_page), cdcmem::Want::kWindow) : 0),
             peer_bell_fd_ >= 0 ? 1 : 0,
             rd_owed_ ? "rung" : rd_armed_ ? "armed" : "quiet", wr_filled_ ? (wr_armed_ ? "armed" : "filled") : "yes",
             send_space_locked());
    out += buf;
  }
  return out;
}

CloseState Connection::state() {
  std::lock_guard<Connection> lock(*this);
  return state_;
}

void Connection::set_nonblocking(bool nb) {
  if (foreign()) return;  // the owner's (its lock may have been held at the fork)
  std::lock_guard<Connection> lock(*this);
  nonblocking_ = nb;
}

void Connection::set_timeout(bool receive, int ms) {
  if (foreign()) return;  // the owner's (its lock may have been held at the fork)
  std::lock_guard<Connection> lock(*this);
  (receive ? rcvtimeo_ms_ : sndtimeo_ms_) = ms;
}

uint32_t Connection::bytes_writable() {
  std::lock_guard<Connection> lock(*this);
  if (aborted_ || link_dead_ || peer_lost_ || peer_closed_ || released_ || local_write_closed(state_)) return 0;
  return send_space_locked();
}

uint32_t Connection::send_window_locked() const {
  uint32_t cap = tx_space_.capacity();
  return send_limit_ > 0 && send_limit_ < cap ? send_limit_ : cap;
}

uint32_t Connection::send_space_locked() const {
  uint32_t free = tx_space_.free_space(tx_prod_, tx_cons_peer_).value_or(0);
  uint32_t window = send_window_locked();
  uint32_t used = tx_space_.capacity() - free;
  return used >= window ? 0 : std::min(free, window - used);
}

void Connection::set_send_limit(uint32_t bytes) {
  if (foreign()) return;  // the window is the owner's; its readiness socket too
  std::lock_guard<Connection> lock(*this);
  send_limit_ = bytes;
  // A larger window may let a blocked writer go on.
  if (send_space_locked() > 0) make_writable_locked();
}

void Connection::set_short_flow_key(uint32_t key) {
  if (foreign()) return;  // the owner's (its lock may have been held at the fork)
  std::lock_guard<Connection> lock(*this);
  short_flow_key_ = key;
}

uint32_t Connection::reported_rcvbuf() {
  std::lock_guard<Connection> lock(*this);
  return 2 * (rx_space_.capacity() + rx_space_.base());  // the RMBE, eyecatcher included
}

uint32_t Connection::reported_sndbuf() {
  std::lock_guard<Connection> lock(*this);
  uint32_t window = send_window_locked();
  return 2 * (window < tx_space_.capacity() ? window : tx_space_.capacity() + tx_space_.base());
}

uint32_t Connection::bytes_readable() {
  std::lock_guard<Connection> lock(*this);
  // After a reset too: TCP's SIOCINQ counts the bytes still queued.
  uint32_t unread = rx_space_.used(rx_prod_, rx_cons_).value_or(0);
  // An edge-triggered reader that counts down what SIOCINQ said (nginx)
  // stops at zero and waits for the next arrival's edge, data or not: over
  // TCP every arrival wakes the socket. The doorbell rings only when the
  // RMB goes from empty to not, so arm it now: the next CDC that moves the
  // producer cursor rings again.
  if (unread > 0 && !parked_ && !foreign()) {  // a forked child leaves the parent's page alone
    edge_wanted_ = true;
    edge_mark_ = rx_prod_;
    arm_for_next_arrival_locked();
  }
  return unread;
}

void Connection::arm_for_next_arrival_locked() {
  if (!rx_control_ || rd_armed_ || engine_end_ < 0 || app_fd_ < 0 || eof_signalled_ || reset_signalled_) return;
  set_data_arming_locked();
}

void Connection::set_data_arming_locked() {
  cdcmem::arm(rx_control_, cdcmem::Want::kData, rx_prod_, local_token_);
  rd_armed_ = true;
  // Published before the peer could see the bit: it will not ring for it.
  pull_cdc_locked();
}

int Connection::take_reset_error_locked() {
  if (reset_reported_ || !(aborted_ || peer_lost_ || wrote_after_peer_close_)) return 0;
  reset_reported_ = true;
  return peer_done_ ? EPIPE : ECONNRESET;
}

bool Connection::socket_error_pending() {
  std::lock_guard<Connection> lock(*this);
  return !reset_reported_ && (aborted_ || peer_lost_ || wrote_after_peer_close_);
}

int Connection::take_socket_error(int tcp_error) {
  std::lock_guard<Connection> lock(*this);
  if (reset_reported_) return 0;  // TCP: sock_error() clears what it reports
  if (int e = take_reset_error_locked()) return e;
  // The TCP socket's RST got here before the A: that is the report.
  if (tcp_error == ECONNRESET || tcp_error == EPIPE) reset_reported_ = true;
  return tcp_error;
}

// ---------------------------------------------------------------- urgent data

void Connection::urgent_arrived_locked(const cdc::Cursor& producer) {
  // The byte just before the producer cursor (the cursor is 1 past it).
  cdc::Cursor mark = producer;
  if (mark.offset == rx_space_.base()) {
    mark.offset = rx_space_.length() - 1;
    --mark.wrap;
  } else {
    --mark.offset;
  }
  rx_urgent_mark_ = mark;
  rx_urgent_byte_ = rmb_.addr[mark.offset];
  rx_urgent_ = Urgent::kValid;
  raise_priority_locked();
}

ssize_t Connection::recv_urgent_locked(const iovec* iov, int iovcnt, int flags) {
  // TCP's answers: EINVAL with no urgent byte (or one already read or kept
  // in line).
  if (rx_urgent_ != Urgent::kValid || oob_inline_ || aborted_) {
    errno = EINVAL;
    return -1;
  }
  if (iov_total(iov, iovcnt) == 0) return 0;
  IovCursor out(iov, iovcnt);
  out.copy(&rx_urgent_byte_, 1, true);
  if (!(flags & MSG_PEEK)) {
    rx_urgent_ = Urgent::kRead;
    lower_priority_locked();
  }
  return 1;
}

void Connection::urgent_done_locked() {
  rx_urgent_ = Urgent::kNone;
  lower_priority_locked();
}

bool Connection::at_urgent_mark() {
  std::lock_guard<Connection> lock(*this);
  return rx_urgent_ != Urgent::kNone && rx_cons_ == rx_urgent_mark_;
}

void Connection::set_oob_inline(bool on) {
  if (foreign()) return;  // the owner's (its lock may have been held at the fork)
  std::lock_guard<Connection> lock(*this);
  oob_inline_ = on;
}

void Connection::raise_priority_locked() {
  if (priority_raised_ || engine_end_ < 0 || eof_signalled_ || reset_signalled_) return;
  // POLLPRI on the application's fd, and SIGURG to its owner (F_SETOWN).
  char u = 'u';
  if (sys::send(engine_end_, &u, 1, MSG_OOB | MSG_DONTWAIT | MSG_NOSIGNAL) == 1) priority_raised_ = true;
}

void Connection::lower_priority_locked() {
  if (!priority_raised_ || app_fd_ < 0) return;
  char u;
  sys::recv(app_fd_, &u, 1, MSG_OOB | MSG_DONTWAIT);
  priority_raised_ = false;
  // The emptied out-of-band record still reads as "readable" until a normal
  // receive passes it: start the readiness bytes afresh.
  drain_readiness_locked();
  if (rx_space_.used(rx_prod_, rx_cons_).value_or(0) > 0) ring_readable_locked();
}

bool Connection::rmbe_eyecatcher_ok() const {
  return rx_space_.base() < 4 || std::memcmp(rmb_.addr, kRmbeEyecatcher, 4) == 0;
}

// ---------------------------------------------------------------- readiness

void Connection::ring_readable_locked() {
  // Data that came after a SIOCINQ answer is a new edge even while a byte
  // is owed (bytes_readable).
  bool new_edge = edge_wanted_ && !(rx_prod_ == edge_mark_);
  if ((rd_owed_ > 0 && !new_edge) || engine_end_ < 0) return;
  if (rd_armed_) {
    // Data is here: take the bit back, or count the byte of the peer that
    // took it first (it is on the way).
    rd_armed_ = false;
    if (!cdcmem::disarm(rx_control_, cdcmem::Want::kData)) {
      ++rd_owed_;
      edge_wanted_ = false;
      return;
    }
  }
  // A reader that holds the connection takes the data itself and settles
  // the socket on its way out.
  if (in_reader_ && rx_control_) return;
  // Parked: the deferral finds the data, or rings before anyone sleeps.
  if (parked_) return;
  char b = 'r';
  if (sys::send(engine_end_, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1) {
    ++rd_owed_;
    edge_wanted_ = false;
  }
}

void Connection::clear_readable_locked(bool will_sleep) {
  if (app_fd_ < 0 || eof_signalled_ || reset_signalled_) return;
  if (rd_armed_) {
    if (rd_owed_ == 0) {
      if (cdcmem::load_want(rx_control_, cdcmem::Want::kData) & cdcmem::kArmed) return;  // still armed
      // The peer took the bit: its byte is (or is about to be) on the socket.
      ++rd_owed_;
    } else if (!cdcmem::disarm(rx_control_, cdcmem::Want::kData)) {
      // Armed over a byte already owed (arm_for_next_arrival_locked), and
      // the peer took the bit: one more byte comes.
      ++rd_owed_;
    }
    rd_armed_ = false;
  }
  // Exactly the bytes rung, no more: a byte left behind (one the peer had
  // claimed but not yet sent) would make the socket readable with nothing
  // to read, which a TCP socket with one reader never is (wrk counts the
  // EAGAIN as a read error).
  char buf[64];
  int64_t give_up_ms = 0;
  bool rechecked = false;
  while (rd_owed_ > 0) {
    // A receive that reached the out-of-band byte would throw it away
    // (and POLLPRI with it): stop at its mark.
    int at_mark = 0;
    if (priority_raised_ && (sys::ioctl(app_fd_, SIOCATMARK, &at_mark) != 0 || at_mark)) break;
    // Everything that is there: a byte we did not count is never data.
    ssize_t n = sys::recv(app_fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      rd_owed_ -= std::min<uint32_t>(rd_owed_, static_cast<uint32_t>(n));
      continue;
    }
    if (n == 0 || errno != EAGAIN || !rx_control_) break;
    // The peer claimed the bit and has not sent yet. It counts itself in
    // `ringing` from before the claim until after the send, so with the
    // count at zero the byte is there (one more look) or never comes.
    // Otherwise wait for it: microseconds, unless the peer is descheduled
    // (under load, for tens of milliseconds: a byte that came after we gave
    // up would make the socket readable with nothing to read) or gone.
    if (cdcmem::ringing(rx_control_).load(std::memory_order_seq_cst) == 0) {
      if (rechecked) break;
      rechecked = true;
      continue;
    }
    if (give_up_ms == 0) give_up_ms = sys::now_ms() + 2000;
    if (sys::now_ms() > give_up_ms || wait_fd(app_fd_, POLLIN, 1) < 0) break;
  }
  rd_owed_ = 0;
  arm_readable_locked(will_sleep);
}

void Connection::arm_readable_locked(bool will_sleep) {
  if (!rx_control_ || rd_armed_ || rd_owed_ > 0 || engine_end_ < 0) return;
  if (!will_sleep && readers_asleep_ == 0 && (parked_ || (deferral_ && deferral_->park(this, deferral_key_)))) {
    // Unarmed: the peer will not ring. What it published already is ours now.
    parked_ = true;
    pull_cdc_locked();
    return;
  }
  parked_ = false;
  set_data_arming_locked();
}

// A forked child's epoll and poll hooks reach here with connections it
// inherited: they answer before taking the connection (see foreign()).
bool Connection::deferrable() {
  if (foreign()) return false;
  std::lock_guard<Connection> lock(*this);
  return rx_control_ && engine_end_ >= 0 && !released_ && !deferral_forbidden_.load();
}

bool Connection::set_deferral(ReadinessDeferral* d, int key) {
  if (foreign()) return false;
  std::lock_guard<Connection> lock(*this);
  if (d && deferral_ && deferral_ != d) return false;
  if (d && deferral_forbidden_.load()) return false;
  deferral_key_ = key;
  if (deferral_ == d) return true;
  deferral_ = d;
  if (!d) unpark_locked();
  // Armed with nothing to read (an event loop that registers the fd anew
  // for each reply): the arming is taken back, unless the peer has already
  // claimed it, and the connection parked as if a read had just emptied it.
  if (d && rd_armed_ && rd_owed_ == 0 && !in_reader_ && readers_asleep_ == 0 &&
      rx_space_.used(rx_prod_, rx_cons_).value_or(0) == 0) {
    rd_armed_ = false;
    if (!cdcmem::disarm(rx_control_, cdcmem::Want::kData)) ++rd_owed_;  // its byte is on the way
    settle_readable_locked();
  }
  return true;
}

void Connection::forbid_deferral() {
  if (foreign()) return;  // only the owner parks, and only the owner may unpark
  if (deferral_forbidden_.load(std::memory_order_relaxed) || deferral_forbidden_.exchange(true)) return;
  std::lock_guard<Connection> lock(*this);
  deferral_ = nullptr;
  unpark_locked();
}

void Connection::arm_deferred(ReadinessDeferral* d) {
  if (foreign()) return;
  std::lock_guard<Connection> lock(*this);
  if (deferral_ == d) unpark_locked();  // d refuses to park it again while its thread sleeps
}

void Connection::unpark_locked() {
  if (!parked_) return;
  parked_ = false;
  settle_readable_locked();  // armed, or rung if data came meanwhile
}

Connection::Parked Connection::poll_parked(ReadinessDeferral* d, bool* writable, uint64_t* data_mark) {
  if (foreign()) return Parked::kGone;
  if (!mu_.try_lock()) return Parked::kBusy;
  std::lock_guard<Connection> lock(*this, std::adopt_lock);
  drain_inbox_locked();
  if (!parked_ || deferral_ != d) return Parked::kGone;
  *writable = !wr_filled_;
  *data_mark = (uint64_t{rx_prod_.wrap} << 32) | rx_prod_.offset;
  // What the readiness socket shows (end-of-file, reset, urgent data) the
  // kernel reports itself.
  if (app_fd_ < 0 || eof_signalled_ || reset_signalled_ || priority_raised_ || rd_owed_ > 0 || aborted_)
    return Parked::kEmpty;
  return rx_space_.used(rx_prod_, rx_cons_).value_or(0) > 0 ? Parked::kReadable : Parked::kEmpty;
}

void Connection::settle_readable_locked() {
  if (!rx_control_ || app_fd_ < 0 || eof_signalled_ || reset_signalled_) return;
  uint32_t unread = aborted_ ? 0 : rx_space_.used(rx_prod_, rx_cons_).value_or(0);
  if (unread > 0) {
    ring_readable_locked();
  } else {
    edge_wanted_ = false;
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
  if (!rx_control_ || budget == 0 || app_fd_ < 0) return false;
  if (!spin_backoff_.worth_trying()) return false;
  if (rd_armed_) {
    rd_armed_ = false;
    if (!cdcmem::disarm(rx_control_, cdcmem::Want::kData)) {
      // The peer published and is ringing.
      ++rd_owed_;
      pull_cdc_locked();
      return true;
    }
  }
  return watch_control_page_locked(spin_backoff_);
}

bool Connection::spin_for_window_locked() {
  if (!rx_control_ || spin_budget_ns() == 0 || app_fd_ < 0) return false;
  if (!window_backoff_.worth_trying()) return false;
  return watch_control_page_locked(window_backoff_);
}

bool Connection::watch_control_page_locked(SpinBackoff& backoff) {
  // Held: the connection cannot be released (and its page unmapped) by
  // another thread meanwhile; our engine parks its messages (inbox).
  uint32_t seen = rx_control_seen_;
  int64_t deadline = sys::now_ns() + spin_budget_ns();
  for (uint32_t i = 1;; ++i) {
    if (cdcmem::version(rx_control_) != seen || inbox_nonempty_.load(std::memory_order_relaxed)) {
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

void Connection::pull_cdc_locked() {
  // The control page is shared with the owner (MAP_SHARED memfd), and so are
  // the readiness socket and the link: a forked child that processed a CDC
  // on its stale copy of the connection would ring a doorbell byte into what
  // becomes its own data stream after the handover, take the owner's arming,
  // and post CDCs with stale cursors (the peer aborts). Only the owner reads.
  if (foreign()) return;
  if (!rx_control_ || released_ || cdcmem::version(rx_control_) == rx_control_seen_) return;
  cdc::Message m;
  cdcmem::UrgentRecord urgent;
  if (!cdcmem::fetch(rx_control_, &rx_control_seen_, &m, &urgent)) return;
  if (m.alert_token != local_token_) {
    protocol_violation_locked("CDC in the control page names another connection");
    return;
  }
  if (urgent.valid && (!rx_urgent_seen_valid_ || urgent.seq != rx_urgent_seen_)) {
    // The CDC that carried U may have been replaced by a newer one before we
    // looked: process it first, as the link would have delivered it. (When
    // it is the newest CDC itself, it is processed whole below: a stand-in
    // with its seq would make the real one look stale and lose its cursor
    // and flags.)
    rx_urgent_seen_valid_ = true;
    rx_urgent_seen_ = urgent.seq;
    cdc::Message u;
    u.seq = urgent.seq;
    u.alert_token = local_token_;
    u.producer = urgent.producer;
    u.consumer = tx_cons_peer_;
    u.flags.urgent_pending = u.flags.urgent_present = true;
    // Older than what we know already (its producer cursor behind ours:
    // its sequence number may have wrapped, see CdcSource), it came on the
    // link.
    auto known = rx_space_.used(rx_prod_, rx_cons_);
    auto at_urgent = unread_up_to_locked(urgent.producer);
    bool behind = rx_seq_seen_ && known && (!at_urgent || *at_urgent < *known);
    if (urgent.seq != m.seq && !behind) process_cdc_locked(u, CdcSource::kMemory);
  }
  process_cdc_locked(m, CdcSource::kMemory);
}

void Connection::send_bell_locked() {
  bell_owed_ = false;
  if (!rx_control_ || !link_ || engine_end_ < 0 || link_dead_ || released_) return;
  if (link_->post_message_with_fd(cdcmem::encode_bell(peer_token_), engine_end_))
    counters().bells_sent.fetch_add(1, std::memory_order_relaxed);
}

bool Connection::bell_rides_locked(const cdc::Message& m) const {
  return bell_owed_ && rx_control_ && engine_end_ >= 0 && !m.flags.peer_conn_closed && !m.flags.peer_conn_abort;
}

void Connection::set_peer_bell(int fd) {
  InboxItem item;
  item.bell_fd = fd;
  park(item);
}

void Connection::take_peer_bell_locked(int fd) {
  if (released_ || peer_bell_fd_ >= 0 || !group_ || !peer_rmb_on_[static_cast<size_t>(slot_)].control) {
    sys::close(fd);
    return;
  }
  set_peer_bell_fd_locked(sys::hide_fd(fd));
}

bool Connection::revoke_peer_bell_locked() {
  bell_owed_ = false;  // nor may it be handed out later
  if (!rx_control_) return true;
  cdcmem::forbid_direct(rx_control_);
  // A ring the peer took before it saw the prohibition may still be in
  // flight: its byte would land in the child's stream. The peer holds the
  // count for a few instructions, but a loaded machine can deschedule it for
  // far longer than that.
  bool quiet = wait_peer_quiet_locked(2000);
  rd_armed_ = wr_armed_ = false;
  pull_cdc_locked();
  return quiet;
}

bool Connection::wait_peer_quiet_locked(int timeout_ms) {
  int64_t deadline = sys::now_ms() + timeout_ms;
  bool quiet;
  while (!(quiet = cdcmem::ringing(rx_control_).load(std::memory_order_seq_cst) == 0) && sys::now_ms() < deadline)
    sched_yield();
  return quiet;
}

bool Connection::may_ring_peer_locked(uint8_t* page) const {
  return peer_bell_fd_ >= 0 && !cdcmem::direct_forbidden(page);
}

bool Connection::cursor_updates_cheap_locked() const {
  uint8_t* page = peer_rmb_on_[static_cast<size_t>(slot_)].control;
  return page && !link_->failed() && may_ring_peer_locked(page);
}

bool Connection::wake_peer_locked(uint8_t* page, const cdc::Message& m, bool data_moved, bool window_moved) {
  if (!may_ring_peer_locked(page)) return false;
  uint64_t want_data = data_moved ? cdcmem::load_want(page, cdcmem::Want::kData) : 0;
  uint64_t want_window = window_moved ? cdcmem::load_want(page, cdcmem::Want::kWindow) : 0;
  bool ring = want_data & cdcmem::kArmed;
  bool open = want_window & cdcmem::kArmed;
  if (!ring && !open) return true;
  auto ringing = cdcmem::ringing(page);
  ringing.fetch_add(1, std::memory_order_seq_cst);
  // Taken only as armed next to this CDC: an arming after the peer read
  // the data is not ours to answer.
  if (ring && !cdcmem::direct_forbidden(page) && cdcmem::take(page, cdcmem::Want::kData, want_data, m.producer)) {
    char b = 'r';
    sys::send(peer_bell_fd_, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  if (open && !cdcmem::direct_forbidden(page) && cdcmem::take(page, cdcmem::Want::kWindow, want_window, m.consumer)) {
    // The peer's writer filled its own socket to block POLLOUT: empty it.
    sys::empty_socket(peer_bell_fd_);
  }
  ringing.fetch_sub(1, std::memory_order_seq_cst);
  return true;
}

void Connection::drain_readiness_locked() {
  char junk[64];
  while (sys::recv(app_fd_, junk, sizeof junk, MSG_DONTWAIT) > 0) {
  }
  rd_owed_ = 0;
}

void Connection::signal_eof_locked() {
  if (eof_signalled_ || engine_end_ < 0) return;
  bool may_be_handed_over = handoff_ && (shared_beyond_process() || (!active_ && !app_has_read_));
  if (!shut_rd_ && !aborted_ && may_be_handed_over && rx_space_.used(rx_prod_, rx_cons_).value_or(0) > 0) {
    // A forked child may yet be handed this socket (core/handoff.h): an
    // accepted connection the application has not read from (accept-then-
    // fork servers fork before reading), or one that existed across a fork.
    // Its end-of-file must come after the data, so it waits until that is
    // read: a relay could not put bytes in front of it.
    eof_deferred_ = true;
    ring_readable_locked();
    return;
  }
  eof_deferred_ = false;
  sys::shutdown(engine_end_, SHUT_WR);
  eof_signalled_ = true;
}

void Connection::signal_reset_locked() {
  if (reset_signalled_ || engine_end_ < 0) return;
  make_writable_locked();
  sys::shutdown(engine_end_, SHUT_RDWR);
  reset_signalled_ = eof_signalled_ = true;
}

void Connection::make_unwritable_locked() {
  if (app_fd_ < 0) return;
  // Only we fill the socket, but with CDCs through memory the peer empties
  // it, possibly still from its last wake-up: wr_filled_ may be stale, so
  // fill again (one failing send when it is still full).
  if (wr_filled_ && !rx_control_) return;
  // A peer that took our last arming empties the socket until it finds it
  // empty, and may still be at it (we saw its CDC and wrote since): it would
  // take this filling too, and POLLOUT would return with the window full
  // (nginx-tests' proxy_upgrade.t client gives up on that EAGAIN). It counts
  // itself in `ringing` throughout; an arming it could take later is the
  // one we set below, for a window it has opened. (Not for long: a peer
  // killed while it counted itself would stall every full window.)
  if (rx_control_) wait_peer_quiet_locked(200);
  fill_readiness_socket(app_fd_, &app_sndbuf_small_);
  wr_filled_ = true;
  if (rx_control_ && engine_end_ >= 0) {
    // The peer empties the socket when it consumes (core/cdc_mem.h).
    cdcmem::arm(rx_control_, cdcmem::Want::kWindow, tx_cons_peer_, local_token_);
    wr_armed_ = true;
    pull_cdc_locked();
  }
}

void Connection::make_writable_locked() {
  if (!wr_filled_ || engine_end_ < 0) return;
  if (wr_armed_) {
    wr_armed_ = false;
    cdcmem::disarm(rx_control_, cdcmem::Want::kWindow);
  }
  sys::empty_socket(engine_end_);
  wr_filled_ = false;
}

// ---------------------------------------------------------------- CDC out

cdc::Message Connection::next_cdc_locked(bool done, bool close, bool abort) {
  cdc::Message m;
  m.seq = ++tx_seq_;
  m.alert_token = peer_token_;
  m.producer = tx_prod_;
  m.consumer = rx_cons_;
  m.flags.writer_blocked = tx_window_full_;
  m.flags.urgent_pending = m.flags.urgent_present = tx_urgent_;
  m.flags.peer_done_writing = done || sent_done_;
  m.flags.peer_conn_closed = close;
  m.flags.peer_conn_abort = abort;
  return m;
}

bool Connection::send_cdc_locked(bool done, bool close, bool abort) {
  if (link_dead_ || sent_close_ || sent_abort_ || released_) return false;
  cdc::Message m = next_cdc_locked(done, close, abort);
  if (!post_cdc_locked(m)) {
    counters().link_send_errors.fetch_add(1, std::memory_order_relaxed);
    counters().last_link_send_errno.store(errno, std::memory_order_relaxed);
    SMCR_LOG(1, "conn %08x: CDC send failed: %s", local_token_, strerror(errno));
    // The link failed under us: move to another one, whose replay carries
    // this CDC's cursors and flags (fail_over_locked posts them).
    if (done) sent_done_ = true;
    if (close) sent_close_ = true;
    if (abort) sent_abort_ = true;
    if (fail_over_locked(tx_prod_)) {
      rx_cons_sent_ = rx_cons_;
      peer_requested_update_ = false;
      return true;
    }
    link_dead_ = true;
    return false;
  }
  rx_cons_sent_ = rx_cons_;
  peer_requested_update_ = false;
  if (done) sent_done_ = true;
  if (close) sent_close_ = true;
  if (abort) sent_abort_ = true;
  counters().cdc_sent.fetch_add(1, std::memory_order_relaxed);
  SMCR_LOG(2, "conn %08x: CDC out seq=%u prod=%u/%u cons=%u/%u B=%d D=%d C=%d A=%d", local_token_, m.seq,
           m.producer.wrap, m.producer.offset, m.consumer.wrap, m.consumer.offset, m.flags.writer_blocked,
           m.flags.peer_done_writing, close, abort);
  return true;
}

// RFC 7609 4.5.1: when a consumer-cursor update is owed to the writer.
void Connection::maybe_send_consumer_update_locked() {
  if (sent_close_ || sent_abort_ || peer_closed_ || aborted_ || peer_lost_) return;
  uint32_t cap = rx_space_.capacity();
  uint32_t gain = rx_space_.used(rx_cons_, rx_cons_sent_).value_or(0);
  if (gain == 0) return;
  // Through memory an update costs a cache line: the writer always sees the
  // whole window (more often than RFC 4.5.1 requires, which it allows).
  if (uint8_t* page = peer_rmb_on_[static_cast<size_t>(slot_)].control;
      page && may_ring_peer_locked(page)) {
    send_cdc_locked(false, false, false);
    return;
  }
  uint32_t writer_view_used = rx_space_.used(rx_prod_, rx_cons_sent_).value_or(cap);
  uint32_t writer_window = cap - std::min(cap, writer_view_used);
  bool rule_a = writer_window < cap / 2 && gain >= cap / 10;
  if (peer_writer_blocked_ || peer_requested_update_ || rule_a) send_cdc_locked(false, false, false);
}

// ---------------------------------------------------------------- receive

namespace {

// Would the kernel restart a socket call that a signal interrupted? signal(7):
// yes if the handler has SA_RESTART and the socket has no SO_RCVTIMEO /
// SO_SNDTIMEO. Which signal it was is not known here, so: only if every
// caught signal's handler has SA_RESTART (rare path: a signal arrived).
bool restart_after_signal(int timeout_ms) {
  if (timeout_ms >= 0) return false;
  for (int sig = 1; sig < NSIG; ++sig) {
    // Signals a blocked poll cannot receive: uncatchable ones, and faults the
    // thread raises itself (sanitizers and crash handlers catch those).
    if (sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
        sig == SIGTRAP || sig == SIGSYS)
      continue;
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    bool caught = (old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != nullptr
                                               : (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN);
    if (caught && !(old.sa_flags & SA_RESTART)) return false;
  }
  return true;
}

ssize_t refuse_foreign(uint32_t token) {
  SMCR_LOG(1, "conn %08x: belongs to the parent process (fork); this process cannot use it", token);
  errno = EOPNOTSUPP;
  return -1;
}
}  // namespace

ssize_t Connection::recvv(const iovec* iov, int iovcnt, int flags) {
  if (foreign()) return refuse_foreign(local_token_);
  size_t want = iov_total(iov, iovcnt);
  bool peek = flags & MSG_PEEK;
  // As TCP: MSG_PEEK | MSG_WAITALL waits until the whole length can be seen.
  bool peek_waitall = peek && (flags & MSG_WAITALL);
  bool waitall = (flags & MSG_WAITALL) && !peek;
  std::unique_lock<Connection> lock(*this);
  first_use_locked();
  if (flags & MSG_OOB) return recv_urgent_locked(iov, iovcnt, flags);
  bool dontwait = nonblocking_ || (flags & MSG_DONTWAIT);
  if (want == 0) return 0;
  // Declared after `lock`: runs while the connection is still held.
  struct ReaderScope {
    Connection* c;
    explicit ReaderScope(Connection* conn) : c(conn) { c->in_reader_ = true; }
    ~ReaderScope() {
      c->in_reader_ = false;
      c->settle_readable_locked();
    }
  } reader(this);
  IovCursor out(iov, iovcnt);
  size_t done = 0;
  CallTimeout limit(rcvtimeo_ms_);
  for (;;) {
    if (released_) {
      errno = EBADF;
      return -1;
    }
    if (shut_rd_) return static_cast<ssize_t>(done);
    uint32_t avail = rx_space_.used(rx_prod_, rx_cons_).value_or(0);
    bool more_coming = !(peer_done_ || peer_closed_ || peer_lost_);
    if (avail > 0 && !(peek_waitall && avail < want && more_coming && !dontwait)) {
      if (!rmbe_eyecatcher_ok()) {
        protocol_violation_locked("RMBE eyecatcher overwritten");
        continue;
      }
      uint32_t n = static_cast<uint32_t>(std::min<size_t>(avail, want - done));
      if (!peek && cursor_updates_cheap_locked()) n = std::min(n, kStreamChunk);
      bool passes_urgent = false;
      if (rx_urgent_ != Urgent::kNone) {
        // As TCP: a read stops at the urgent byte; from it, the byte is read
        // in line (SO_OOBINLINE) or skipped (it is recv(MSG_OOB)'s).
        uint32_t to_mark = rx_space_.used(rx_urgent_mark_, rx_cons_).value_or(0);
        if (to_mark == 0 && done > 0) return static_cast<ssize_t>(done);
        if (to_mark == 0 && !oob_inline_) {
          // (A MSG_PEEK here consumes the urgent byte too: rare enough.)
          rx_cons_ = rx_space_.advance(rx_cons_, 1);
          urgent_done_locked();
          send_cdc_locked(false, false, false);  // RFC 4.7.5: always update after urgent data
          continue;
        }
        if (to_mark > 0) n = std::min(n, to_mark);
        else passes_urgent = !peek;
      }
      uint32_t first = std::min(n, rx_space_.contiguous_to_end(rx_cons_));
      out.copy(rmb_.addr + rx_cons_.offset, first, true);
      if (n > first) out.copy(rmb_.addr + rx_space_.base(), n - first, true);
      done += n;
      if (peek) return static_cast<ssize_t>(done);
      rx_cons_ = rx_space_.advance(rx_cons_, n);
      app_has_read_ = true;
      if (passes_urgent) urgent_done_locked();
      counters().rx_bytes.fetch_add(n, std::memory_order_relaxed);
      rx_bytes_ += n;
      maybe_send_consumer_update_locked();
      if (eof_deferred_ && rx_space_.used(rx_prod_, rx_cons_).value_or(0) == 0) signal_eof_locked();
      if (done == want || waitall) {
        if (done == want && avail == n && !peer_write_closed(state_)) clear_readable_locked();
        if (done == want) return static_cast<ssize_t>(done);
        continue;
      }
      // As TCP's receive: what is there when a copy ends is read too,
      // bytes the writer published while we copied (streamed, above)
      // included; never a wait for more.
      if (avail == n) pull_cdc_locked();
      bool left = rx_space_.used(rx_prod_, rx_cons_).value_or(0) > 0;
      if (left && !passes_urgent) continue;
      if (!left && !peer_write_closed(state_)) clear_readable_locked();
      return static_cast<ssize_t>(done);
    }
    if (aborted_ || peer_lost_) {
      // As TCP after an RST: what was received first is read first; then
      // the reset's error, once, unless the peer's FIN came before it (then
      // end-of-file, and the error waits for send() or SO_ERROR).
      if (done) return static_cast<ssize_t>(done);
      if (int e = peer_done_ ? 0 : take_reset_error_locked()) {
        errno = e;
        return -1;
      }
      return 0;
    }
    if (!more_coming && avail == 0) return static_cast<ssize_t>(done);  // EOF
    if (done > 0 && !waitall) return static_cast<ssize_t>(done);
    if (!dontwait && spin_for_data_locked()) continue;
    uint32_t seen = rx_control_seen_;
    clear_readable_locked(!dontwait);
    if (rx_control_seen_ != seen) continue;  // arming found a CDC: look again
    if (dontwait) {
      if (done) return static_cast<ssize_t>(done);
      errno = EAGAIN;
      return -1;
    }
    int fd = app_fd_;
    int timeout = limit.next_wait_ms();
    if (timeout == 0) {
      if (done) return static_cast<ssize_t>(done);
      errno = EAGAIN;
      return -1;
    }
    in_reader_ = false;
    ++readers_asleep_;
    lock.unlock();
    int r = wait_fd(fd, POLLIN, timeout);
    int saved = errno;
    lock.lock();
    --readers_asleep_;
    in_reader_ = true;
    if (r == 0) {
      if (done) return static_cast<ssize_t>(done);
      errno = EAGAIN;
      return -1;
    }
    if (r < 0 && saved == EINTR) {
      if (done) return static_cast<ssize_t>(done);
      if (restart_after_signal(limit.timeout_ms())) continue;
      errno = EINTR;
      return -1;
    }
  }
}

// ---------------------------------------------------------------- send

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
  std::unique_lock<Connection> lock(*this);
  first_use_locked();
  bool dontwait = nonblocking_ || (flags & MSG_DONTWAIT);
  IovCursor in(iov, iovcnt);
  size_t done = 0;
  CallTimeout limit(sndtimeo_ms_);
  for (;;) {
    if (released_) {
      errno = EBADF;
      return -1;
    }
    // (A peer whose process ended after reading everything is a closed
    // peer, below, though its link is gone: peer_vanished_locked.)
    if (aborted_ || peer_lost_ || (link_dead_ && !peer_closed_)) {
      if (done) return static_cast<ssize_t>(done);
      int e = take_reset_error_locked();
      errno = e ? e : EPIPE;
      sigpipe.raise = errno == EPIPE && !(flags & MSG_NOSIGNAL);
      return -1;
    }
    if (peer_closed_ && !local_write_closed(state_) && !wrote_after_peer_close_ && !reset_reported_ && want > 0) {
      // As TCP after the peer's close (FIN, its socket gone): this write is
      // accepted, and the peer's RST that answers it fails the next one
      // with EPIPE. Nothing may go into the peer's RMB after its C, so the
      // bytes go nowhere, as they would have. TCP takes no more than its
      // buffer holds before the RST comes: a window's worth, not 64 MB.
      wrote_after_peer_close_ = true;
      signal_reset_locked();
      return static_cast<ssize_t>(std::min<size_t>(want, std::max<uint32_t>(send_window_locked(), 1)));
    }
    // As TCP: writing nothing after the peer's close (FIN, and no RST yet)
    // is no error.
    if (want == 0 && !local_write_closed(state_) && !wrote_after_peer_close_ && !reset_reported_) return 0;
    if (local_write_closed(state_) || peer_closed_) {
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
    if (space > 0 && space < need && !tx_window_full_) {
      // Waiting for room: the peer must report consumption (B flag).
      tx_window_full_ = true;
      send_cdc_locked(false, false, false);
    }
    if (space >= need) {
      uint32_t n = static_cast<uint32_t>(std::min<size_t>(space, want - done));
      if (cursor_updates_cheap_locked()) n = std::min(n, kStreamChunk);
      uint32_t left = n;
      cdc::Cursor pos = tx_prod_;
      while (left > 0) {
        uint32_t room = std::min(left, tx_space_.contiguous_to_end(pos));
        uint32_t off = pos.offset;
        uint32_t filled = 0;
        const uint8_t* p;
        size_t k;
        while (filled < room && in.next_chunk(room - filled, &p, &k)) {
          if (!link_->write_remote(peer_rmb_on_[static_cast<size_t>(slot_)], off + filled, p, k)) {
            // The link failed: move to another and write these bytes there.
            // Bytes of this call already written (up to here) are written
            // again with the rest of the unacknowledged ones.
            if (link_->failed() && fail_over_locked(tx_space_.advance(pos, filled)) &&
                link_->write_remote(peer_rmb_on_[static_cast<size_t>(slot_)], off + filled, p, k)) {
              filled += static_cast<uint32_t>(k);
              continue;
            }
            if (link_->failed()) {
              link_dead_ = true;
              peer_lost_locked("link failed");
            } else {
              protocol_violation_locked("write outside the peer RMB");
            }
            break;
          }
          filled += static_cast<uint32_t>(k);
        }
        if (filled < room) break;
        pos = tx_space_.advance(pos, room);
        left -= room;
      }
      if (left > 0) continue;  // aborted above
      tx_prod_ = pos;
      done += n;
      tx_window_full_ = (n == space);
      counters().tx_bytes.fetch_add(n, std::memory_order_relaxed);
      tx_bytes_ += n;
      ++tx_writes_;
      // MSG_OOB: the last byte of the send is urgent (TCP's rule); the CDC
      // that completes it carries P and U (RFC 7609 4.7.5, scenario 5).
      tx_urgent_ = (flags & MSG_OOB) && done == want;
      bool posted = send_cdc_locked(false, false, false);
      tx_urgent_ = false;
      prefetch_next_write_locked(n);
      if (!posted) {
        aborted_ = true;
        signal_reset_locked();
        continue;
      }
      if (uint64_t after = take_down_link_after();
          after && tx_bytes_ >= after && !g_link_taken_down.exchange(true)) {
        SMCR_LOG(1, "conn %08x: SMCR_TEST_TAKE_DOWN_LINK_AFTER: taking link %u down after %llu bytes", local_token_,
                 group_->link_num_at(slot_), static_cast<unsigned long long>(tx_bytes_));
        link_->take_down();
      }
      if (done == want) {
        // As TCP, whose socket stops being writable when a write fills its
        // buffer: an event loop that writes on POLLOUT and gives up on EAGAIN
        // (Perl's IO::Select loops, nginx-tests' clients) must not be told
        // writable for a full window.
        if (tx_window_full_) make_unwritable_locked();
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
    uint32_t seen = rx_control_seen_;
    make_unwritable_locked();
    if (rx_control_seen_ != seen && send_space_locked() > 0) continue;
    if (dontwait) {
      if (done) return static_cast<ssize_t>(done);
      errno = EAGAIN;
      return -1;
    }
    int fd = app_fd_;
    int timeout = limit.next_wait_ms();
    if (timeout == 0) {
      if (done) return static_cast<ssize_t>(done);
      errno = EAGAIN;
      return -1;
    }
    lock.unlock();
    int r = wait_fd(fd, POLLOUT, timeout);
    int saved = errno;
    lock.lock();
    if (r < 0 && saved == EINTR && !done && restart_after_signal(limit.timeout_ms())) continue;
    if (r == 0 || (r < 0 && saved == EINTR)) {
      if (done) return static_cast<ssize_t>(done);
      errno = r == 0 ? EAGAIN : EINTR;
      return -1;
    }
  }
}

// ---------------------------------------------------------------- close

int Connection::shutdown(int how) {
  if (foreign()) return static_cast<int>(refuse_foreign(local_token_));
  std::lock_guard<Connection> lock(*this);
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
    errno = EINVAL;
    return -1;
  }
  if (how == SHUT_RD || how == SHUT_RDWR) {
    shut_rd_ = true;
    signal_eof_locked();
  }
  if (how == SHUT_WR || how == SHUT_RDWR) {
    if (!sent_done_ && !sent_close_ && !sent_abort_ && !aborted_) apply_close_event_locked(CloseEvent::kAppShutdownWrite);
  }
  return 0;
}

void Connection::app_close(bool abortive) {
  std::unique_lock<Connection> lock(*this);
  // As a TCP socket's file outlives close() while a forked child holds it
  // (even with SO_LINGER 0: only the last close resets).
  if (!app_closed_ && !relayed_ && handoff_ && shared_beyond_process() && !foreign() &&
      hand_over_locked())
    return;  // the handover thread owns the fd table's reference now
  close_for_app_locked(lock, abortive);
}

void Connection::close_for_app_locked(std::unique_lock<Connection>& lock, bool abortive) {
  if (!app_closed_) {
    app_closed_ = true;
    // Whether bytes are unread (then a close resets, as TCP's) is decided by
    // the peer's latest cursor, which may be in memory and not seen yet.
    pull_cdc_locked();
    if (short_flow_key_)
      shortflows::ended(short_flow_key_, tx_writes_, tx_bytes_ + rx_bytes_, sys::now_ms());
    apply_close_event_locked(abortive || linger_abort_ ? CloseEvent::kAppAbort : CloseEvent::kAppClose);
  }
  if (app_fd_ >= 0) sys::close(app_fd_);
  if (engine_end_ >= 0) sys::close(engine_end_);
  app_fd_ = engine_end_ = -1;
  if (state_ == CloseState::kClosed) release_resources_locked();
  lock.unlock();
  unref();  // the fd table's reference
}

void Connection::apply_close_event_locked(CloseEvent e) {
  CloseContext ctx;
  ctx.unread_data = !aborted_ && rx_space_.used(rx_prod_, rx_cons_).value_or(0) > 0;
  ctx.app_closed = app_closed_;
  ctx.peer_closed = peer_closed_;
  CloseTransition t = close_transition(state_, e, ctx);
  if (!t.valid) return;
  CloseState prev = state_;
  state_ = t.next;
  SMCR_LOG(1, "conn %08x: %s -> %s", local_token_, to_string(prev), to_string(state_));
  if (t.actions & kActSendAbort) {
    // The application's abortive close (SO_LINGER 0, unread data): TCP's peer
    // sees the reset before anything else (getpeername fails with ENOTCONN),
    // ours could read the A first while its TCP socket still answers. So the
    // TCP connection is reset before the A is posted: connect(AF_UNSPEC)
    // sends the RST and keeps the descriptor until release; our own reset is
    // no news of the peer for the watch.
    if (app_closed_ && (t.actions & kActResetTcp) && tcp_fd_ >= 0) {
      Engine::get().unwatch_tcp(this);
      sys::disconnect_tcp(tcp_fd_);
    }
    send_cdc_locked(false, false, true);
    counters().aborts.fetch_add(1, std::memory_order_relaxed);
  }
  if (t.actions & kActSendDone) send_cdc_locked(true, false, false);
  if (t.actions & kActSendClose) send_cdc_locked(false, true, false);
  if (t.actions & kActPurge) {
    aborted_ = true;
    rx_cons_ = rx_prod_;
  }
  if (t.actions & kActResetTcp) tcp_reset_ = true;
  if (t.actions & kActWakeReaders) {
    if (aborted_) signal_reset_locked();
    else signal_eof_locked();
  }
  if (t.actions & kActStartTimer) {
    timer_deadline_.store(sys::now_ms() + kCloseTimeoutMs);
    Engine::get().arm_timer(this);
  }
  if (state_ == CloseState::kClosed && app_closed_) release_resources_locked();
}

void Connection::protocol_violation_locked(const char* what) {
  SMCR_LOG(1, "conn %08x: protocol violation: %s; aborting", local_token_, what);
  counters().protocol_violations.fetch_add(1, std::memory_order_relaxed);
  apply_close_event_locked(CloseEvent::kAppAbort);
  aborted_ = true;
  rx_cons_ = rx_prod_;  // nothing of a misbehaving peer's is delivered any more
  signal_reset_locked();
}

void Connection::release_resources_locked() {
  if (released_) return;
  released_ = true;
  timer_deadline_.store(0);
  if (tcp_fd_ >= 0) {
    Engine::get().unwatch_tcp(this);
    if (tcp_reset_) {
      linger l{1, 0};
      sys::setsockopt(tcp_fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    sys::close(tcp_fd_);
    tcp_fd_ = -1;
  }
  if (peer_bell_fd_ >= 0) sys::close(peer_bell_fd_);
  peer_bell_fd_ = -1;
  rx_control_ = nullptr;  // unmapped with the RMB below
  if (group_) {
    bool had_rmb = rmb_.addr != nullptr;
    // Both C exchanged: neither side writes these RMBEs again, so the group
    // may give ours to its next connection.
    // (A relayed connection's child may still hold the readiness pair, and a
    // forked child never touches its parent's shared pages.)
    bool reusable = peer_closed_ && sent_close_ && !aborted_ && !link_dead_ && !tcp_reset_ && !relayed_ && !foreign();
    // The memfds stay with the RMBs where the group keeps them for the next
    // connection (closed otherwise): that one may be carried too.
    if (reusable && rmb_memfd_ >= 0 && rmb_on_[0].handle < 0 && rmb_on_[0].addr && !rmb_on_[0].alias) {
      rmb_on_[0].handle = rmb_memfd_;
      rmb_memfd_ = -1;
    }
    auto rkeys = group_->free_rmbs(&rmb_on_, &peer_rmb_on_, reusable, reusable ? &peer_rmb_memfd_ : nullptr);
    rmb_ = LocalRmb{};
    if (had_rmb && !link_dead_) group_->announce_rmb_deleted(rkeys);
  }
  close_memfds();
  rx_prod_ = rx_cons_;
  if (handoff_) {
    // A child still waiting for this connection learns it is over. Only a
    // child forked since the connection was made can be one: without such
    // a fork the word is not even read again (free_state), and the wake-up
    // (a system call on a shared futex) is saved.
    if (!relayed_ && shared_beyond_process()) handoff::publish(handoff_, handoff::kGone);
    handoff::free_state(handoff_);
    handoff_ = nullptr;
  }
  LinkGroup* g = group_;
  uint32_t token = local_token_;
  group_ = nullptr;
  if (g) g->remove_connection(token);
}

// ---------------------------------------------------------------- CDC in

void Connection::unlock() {
  for (;;) {
    drain_inbox_locked();
    mu_.unlock();
    if (!inbox_nonempty_.load(std::memory_order_acquire)) return;
    // Parked after our drain: process it unless another holder will.
    if (!mu_.try_lock()) return;
  }
}

void Connection::drain_inbox_locked() {
  if (foreign()) return;  // see pull_cdc_locked: nothing of the owner's is processed here
  // The CDC in memory first: a parked link message is never newer than it.
  pull_cdc_locked();
  if (!inbox_nonempty_.load(std::memory_order_acquire)) return;
  for (const InboxItem& item : take_inbox()) process_item_locked(item);
}

void Connection::process_item_locked(const InboxItem& item) {
  if (item.tcp_gone) {
    tcp_peer_gone_locked();
  } else if (item.timer_now_ms >= 0) {
    timer_locked(item.timer_now_ms);
  } else if (item.bell_fd >= 0) {
    take_peer_bell_locked(item.bell_fd);
  } else if (item.rehome_fd >= 0) {
    rehome_peer_locked(item.rehome_fd, item.rehome_token);
  } else if (item.down_slot == kAllLinks) {
    if (rx_control_) {
      shm_link_ended_locked();
    } else {
      link_dead_ = true;
      peer_lost_locked("link failed");
    }
  } else if (item.down_slot >= 0) {
    link_down_locked(item.down_slot);
  } else {
    process_cdc_locked(item.cdc);
    // The peer wrote to us (or opened our window) over the link because it
    // cannot ring us. The second time, it gets our bell: one request and
    // its reply (a short-lived connection) need none. Cursors compared with
    // the last link CDC, not with what we know: the same CDC in memory may
    // have been read first, and a CDC with only D or C moves nothing.
    bool moved = !(item.cdc.producer == link_seen_prod_) || !(item.cdc.consumer == link_seen_cons_);
    link_seen_prod_ = item.cdc.producer;
    link_seen_cons_ = item.cdc.consumer;
    if (bell_owed_ && moved && !item.cdc.flags.peer_conn_closed && !item.cdc.flags.peer_conn_abort &&
        !sent_close_ && !sent_abort_ && ++link_cdcs_unrung_ >= 2)
      send_bell_locked();
  }
}

std::vector<Connection::InboxItem> Connection::take_inbox() {
  std::vector<InboxItem> parked;
  std::lock_guard<std::mutex> lock(inbox_mu_);
  parked.swap(inbox_);
  inbox_nonempty_.store(false, std::memory_order_release);
  return parked;
}

void Connection::discard_inbox_locked() {
  for (const InboxItem& item : take_inbox()) {
    if (item.bell_fd >= 0) sys::close(item.bell_fd);
    if (item.rehome_fd >= 0) rehome_peer_locked(item.rehome_fd, item.rehome_token);  // refused: released
  }
}

void Connection::park(const InboxItem& item) {
  if (mu_.try_lock()) {
    drain_inbox_locked();  // keep arrival order
    process_item_locked(item);
    unlock();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    inbox_.push_back(item);
    inbox_nonempty_.store(true, std::memory_order_release);
  }
  // The holder may have let go before it could see the parked message.
  if (mu_.try_lock()) unlock();
}

void Connection::on_cdc(const cdc::Message& m) {
  InboxItem item;
  item.cdc = m;
  park(item);
}

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
  if (released_ || state_ == CloseState::kClosed || link_dead_ || slot != slot_) return;
  if (fail_over_locked(tx_prod_)) return;
  if (rx_control_) {
    shm_link_ended_locked();
    return;
  }
  link_dead_ = true;
  peer_lost_locked("link failed, no other link");
}

void Connection::prefetch_next_write_locked(uint32_t n) {
#if defined(__x86_64__)
  const RemoteRmb& rmb = peer_rmb_on_[static_cast<size_t>(slot_)];
  if (!rmb.addr || !rx_control_) return;  // shm only: the peer's RMB is mapped here
  if (n >= kStreamingCopyMin) return;      // streamed past this cache (core/stream_copy.h)
  uint32_t ahead = std::min<uint32_t>(n, kPrefetchAhead);
  uint32_t off = tx_prod_.offset;
  uint32_t run = std::min(ahead, tx_space_.contiguous_to_end(tx_prod_));
  for (uint32_t i = 0; i < ahead; i += 64) {
    uint32_t at = i < run ? off + i : tx_space_.advance(tx_prod_, i).offset;
    if (at >= rmb.size) break;
    __asm__ volatile("prefetchw %0" ::"m"(*(rmb.addr + at)));
  }
#else
  (void)n;
#endif
}

void Connection::pop_acked_locked(uint64_t completed, size_t at_most) {
#ifdef SMCR_HAVE_VERBS
  // A CDC holds a send queue slot until the adapter acknowledges it, so at
  // most kSendDepth are unacknowledged: a shallower ring would push out
  // (take for acknowledged, post_cdc_locked) one that is not, and a
  // failover would not replay it (SS, RFC 4.6).
  static_assert(kUnackedRing >= VerbsLink::kSendDepth, "the unacknowledged-CDC ring must cover the send queue");
#endif
  while (at_most-- > 0 && unacked_count_ > 0 && unacked_[unacked_head_].first <= completed) {
    tx_seq_acked_ = unacked_[unacked_head_].second;
    unacked_head_ = (unacked_head_ + 1) % kUnackedRing;
    --unacked_count_;
  }
}

bool Connection::post_cdc_locked(const cdc::Message& m) {
  // The link is the owner's: a CDC from a forked child's stale copy would
  // carry a sequence number and cursors the peer rejects.
  if (foreign()) return false;
  if (uint8_t* page = peer_rmb_on_[static_cast<size_t>(slot_)].control; page && !link_->failed()) {
    cdcmem::publish(page, m);
    bool data_moved = !(m.producer == tx_published_prod_);
    bool window_moved = !(m.consumer == tx_published_cons_);
    tx_published_prod_ = m.producer;
    tx_published_cons_ = m.consumer;
    // State changes also go on the link: the peer's engine must see them
    // even when no application thread of the peer is reading.
    bool state_change = m.flags.peer_conn_abort || m.flags.peer_conn_closed || m.flags.urgent_present ||
                        (m.flags.peer_done_writing && !tx_published_done_);
    tx_published_done_ = m.flags.peer_done_writing;
    if (!state_change && wake_peer_locked(page, m, data_moved, window_moved)) {
      if (unacked_count_ == 0) tx_seq_acked_ = m.seq;  // delivered: it is in the peer's memory
      counters().cdc_in_memory.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  uint64_t id = 0;
  if (bell_rides_locked(m)) {
    // One link message (one wake-up of the peer's engine) for both.
    if (!link_->post_message_with_fd(cdc::encode(m), engine_end_)) return false;
    bell_owed_ = false;
    counters().bells_on_cdc.fetch_add(1, std::memory_order_relaxed);
  } else if (!link_->post_message_tracked(cdc::encode(m), &id)) {
    return false;
  }
  // A full ring cannot happen while the send queue is shallower than the
  // ring (its oldest entry is then acknowledged); kept safe regardless.
  if (unacked_count_ == kUnackedRing) pop_acked_locked(UINT64_MAX, 1);
  unacked_[(unacked_head_ + unacked_count_) % kUnackedRing] = {id, m.seq};
  ++unacked_count_;
  pop_acked_locked(link_->completed_id(), kUnackedRing);
  return true;
}

bool Connection::fail_over_locked(cdc::Cursor replay_end) {
  if (!group_) return false;
  int to = group_->alternate_slot(slot_);
  if (to < 0) return false;
  RemoteRmb& target = peer_rmb_on_[static_cast<size_t>(to)];
  if (target.size == 0) {
    SMCR_LOG(1, "conn %08x: the peer's RMB has no RToken on link %u", local_token_, group_->link_num_at(to));
    return false;
  }
  Link* old = link_;
  RemoteRmb& old_rmb = peer_rmb_on_[static_cast<size_t>(slot_)];
  // SS (RFC 4.6): our last CDC the failed link's adapter acknowledged.
  pop_acked_locked(old->completed_id(), kUnackedRing);
  unacked_head_ = unacked_count_ = 0;
  const uint8_t* mirror = old->written_mirror(old_rmb);
  SMCR_LOG(1, "conn %08x: moving from link %u to link %u (SS=%u, last seq %u)", local_token_,
           group_->link_num_at(slot_), group_->link_num_at(to), tx_seq_acked_, tx_seq_);
  link_ = group_->link_at(to);
  slot_ = to;
  counters().conn_failovers.fetch_add(1, std::memory_order_relaxed);

  // 1. Failover validation: the peer checks it has processed SS.
  cdc::Message v;
  v.seq = tx_seq_acked_;
  v.alert_token = peer_token_;
  v.producer = tx_prod_;
  v.consumer = rx_cons_;
  v.flags.failover_validation = true;
  if (!link_->post_message(cdc::encode(v))) return false;
  // 2. Everything the peer may not have consumed is written again (same
  // bytes at the same offsets: harmless where they had arrived), merged
  // under one new sequence number (RFC 4.6, second option).
  if (!sent_abort_) {
    uint32_t unconsumed = tx_space_.used(replay_end, tx_cons_peer_).value_or(0);
    if (unconsumed > 0 && !mirror) return false;
    cdc::Cursor pos = tx_cons_peer_;
    while (unconsumed > 0) {
      uint32_t k = std::min(unconsumed, tx_space_.contiguous_to_end(pos));
      if (!link_->write_remote(target, pos.offset, mirror + pos.offset, k)) return false;
      pos = tx_space_.advance(pos, k);
      unconsumed -= k;
    }
  }
  // 3. The current cursors and flags, including a D, C or A already sent.
  if (!post_cdc_locked(next_cdc_locked(sent_done_, sent_close_, sent_abort_))) return false;
  rx_cons_sent_ = rx_cons_;
  return true;
}

std::optional<uint32_t> Connection::unread_up_to_locked(const cdc::Cursor& producer) const {
  return rx_space_.in_range(producer) ? rx_space_.used(producer, rx_cons_) : std::nullopt;
}

void Connection::process_cdc_locked(const cdc::Message& m, CdcSource from) {
  if (released_ || state_ == CloseState::kClosed) return;
  counters().cdc_received.fetch_add(1, std::memory_order_relaxed);
  if (m.flags.failover_validation) {
    // The peer moved to another link (RFC 4.6): its adapter had delivered
    // our CDCs up to m.seq, so we must have processed them; if not, bytes
    // or cursors were lost and the connection cannot continue.
    uint16_t have = rx_seq_seen_ ? rx_seq_ : 0;
    if (cdc::seq_newer(m.seq, have)) {
      SMCR_LOG(1, "conn %08x: failover validation: peer's CDC %u was delivered, we have %u", local_token_, m.seq, have);
      protocol_violation_locked("failover validation failed");
    }
    return;
  }
  if (from == CdcSource::kMemory) {
    // Newest by construction; the one a link message already brought (same
    // sequence number and cursors) needs nothing more.
    if (rx_seq_seen_ && m.seq == rx_seq_ && m.producer == rx_prod_ && m.consumer == tx_cons_peer_) return;
  } else if (rx_seq_seen_ && !cdc::seq_newer(m.seq, rx_seq_)) {
    SMCR_LOG(2, "conn %08x: stale CDC seq %u (last %u) discarded", local_token_, m.seq, rx_seq_);
    return;
  }
  rx_seq_ = m.seq;
  rx_seq_seen_ = true;
  SMCR_LOG(2, "conn %08x: CDC in seq=%u prod=%u/%u cons=%u/%u B=%d D=%d C=%d A=%d", local_token_, m.seq,
           m.producer.wrap, m.producer.offset, m.consumer.wrap, m.consumer.offset, m.flags.writer_blocked,
           m.flags.peer_done_writing, m.flags.peer_conn_closed, m.flags.peer_conn_abort);

  if (m.flags.peer_conn_abort) {
    // Bytes the peer wrote before it aborted stay readable (see
    // close_transition): the A may be the only CDC that announces them,
    // having replaced their own in the control page.
    if (!aborted_ && !peer_done_ && !peer_closed_) {
      auto old_used = rx_space_.used(rx_prod_, rx_cons_);
      auto new_used = unread_up_to_locked(m.producer);
      if (old_used && new_used && *new_used > *old_used) rx_prod_ = m.producer;
    }
    aborted_ = true;
    apply_close_event_locked(CloseEvent::kPeerAbort);
    signal_reset_locked();
    return;
  }
  if (aborted_) return;  // PeerAbortWait: ignore everything but A

  // Producer: may only move forward, and never past our consumer + capacity.
  auto old_used = rx_space_.used(rx_prod_, rx_cons_);
  auto new_used = unread_up_to_locked(m.producer);
  if (!new_used || *new_used < old_used.value_or(0)) {
    protocol_violation_locked("producer cursor out of range or moving backwards");
    return;
  }
  if (*new_used > *old_used && (peer_done_ || peer_closed_)) {
    protocol_violation_locked("data after the peer's D/C");
    return;
  }
  // Consumer: may only move forward, and never past what we produced.
  auto old_out = tx_space_.used(tx_prod_, tx_cons_peer_);
  auto new_out = tx_space_.in_range(m.consumer) ? tx_space_.used(tx_prod_, m.consumer) : std::nullopt;
  if (!new_out || *new_out > old_out.value_or(0)) {
    protocol_violation_locked("consumer cursor out of range or beyond our producer");
    return;
  }
  bool data_arrived = *new_used > *old_used;
  bool window_opened = *new_out < *old_out;
  rx_prod_ = m.producer;
  tx_cons_peer_ = m.consumer;
  peer_writer_blocked_ = m.flags.writer_blocked;
  if (m.flags.request_update) peer_requested_update_ = true;
  if (window_opened) {
    tx_window_full_ = false;
    make_writable_locked();
  }
  if (data_arrived) ring_readable_locked();
  if (data_arrived && m.flags.urgent_present) urgent_arrived_locked(m.producer);
  if (m.flags.peer_conn_closed && !peer_closed_) {
    peer_closed_ = true;
    peer_done_ = true;
    // The FIN that follows the peer's C tells nothing more (on_tcp_peer_gone
    // ignores it): without the watch it does not wake the engine.
    if (tcp_fd_ >= 0) Engine::get().unwatch_tcp(this);
    apply_close_event_locked(CloseEvent::kPeerClosed);
    signal_eof_locked();
    // A writer waiting for a window the peer will never open again (it
    // closed with our bytes unread: TCP's peer would reset) goes on to the
    // after-close path in sendv rather than wait for ever.
    make_writable_locked();
  } else if (m.flags.peer_done_writing && !peer_done_) {
    peer_done_ = true;
    apply_close_event_locked(CloseEvent::kPeerDone);
    signal_eof_locked();
  }
  // The peer may be blocked on a window we already opened locally.
  if (peer_writer_blocked_ && rx_space_.used(rx_cons_, rx_cons_sent_).value_or(0) > 0)
    maybe_send_consumer_update_locked();
}


// Like a TCP peer that vanished: data already in our RMBE stays readable,
// then calls fail with ECONNRESET. After a C either way there is nothing to report.
void Connection::peer_lost_locked(const char* why) {
  if (released_ || state_ == CloseState::kClosed) return;
  SMCR_LOG(1, "conn %08x: %s in %s", local_token_, why, to_string(state_));
  if (!sent_close_ && !sent_abort_ && !peer_closed_ && !aborted_) {
    peer_lost_ = true;
    counters().aborts.fetch_add(1, std::memory_order_relaxed);
  }
  state_ = CloseState::kClosed;
  tcp_reset_ = true;
  link_dead_ = true;  // never write into the peer's RMB again
  make_writable_locked();
  signal_reset_locked();
  if (app_closed_) release_resources_locked();
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
  if (released_ || state_ == CloseState::kClosed) return;
  pull_cdc_locked();
  bool everything_read = tx_space_.used(tx_prod_, tx_cons_peer_).value_or(1) == 0;
  if (!everything_read || peer_closed_ || sent_close_ || sent_abort_ || aborted_ || peer_lost_) {
    link_dead_ = true;
    peer_lost_locked(why);
    return;
  }
  SMCR_LOG(1, "conn %08x: %s in %s; it had read everything: ended as by its close", local_token_, why,
           to_string(state_));
  counters().peer_vanished.fetch_add(1, std::memory_order_relaxed);
  link_dead_ = true;
  peer_closed_ = peer_done_ = true;
  if (tcp_fd_ >= 0) Engine::get().unwatch_tcp(this);
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
  if (released_ || state_ == CloseState::kClosed || shm_link_gone_) return;
  link_dead_ = true;
  shm_link_gone_ = true;
  // Closing already (its C or A came, or ours went): the end is decided;
  // the link's end only wakes a writer waiting for a window it will not get.
  if (peer_closed_ || sent_close_ || sent_abort_ || aborted_ || peer_lost_) {
    peer_lost_locked("link failed");
    return;
  }
  if (tcp_gone_) {
    peer_vanished_locked("the peer's process ended (shm link and TCP closed)");
    return;
  }
  timer_deadline_.store(sys::now_ms() + kTcpGoneGraceMs);
  Engine::get().arm_timer(this);
}

void Connection::on_tcp_peer_gone() {
  InboxItem item;
  item.tcp_gone = true;
  park(item);
}

void Connection::tcp_peer_gone_locked() {
  if (released_ || state_ == CloseState::kClosed || peer_closed_ || tcp_gone_) return;
  // The peer's C or A may still be in flight on the fabric (it closes TCP
  // right after posting it): give it a moment before declaring the peer lost.
  tcp_gone_ = true;
  if (shm_link_gone_) {  // nothing more can come on the fabric: no grace
    peer_vanished_locked("the peer's process ended (shm link and TCP closed)");
    return;
  }
  timer_deadline_.store(sys::now_ms() + kTcpGoneGraceMs);
  Engine::get().arm_timer(this);
}

void Connection::on_timer(int64_t now_ms) {
  InboxItem item;
  item.timer_now_ms = now_ms;
  park(item);
}

void Connection::timer_locked(int64_t now_ms) {
  int64_t d = timer_deadline_.load();
  if (d == 0 || now_ms < d || released_) return;
  timer_deadline_.store(0);
  if (tcp_gone_ && !peer_closed_ && state_ != CloseState::kClosed) {
    // Linux's shutdown(SHUT_WR) of an SMC socket shuts its TCP socket down
    // too: a FIN after the peer's D is its half-close, not its end (its C
    // comes when it closes). A peer that dies after it is found by the link
    // (a write's error, TEST LINK).
    if (peer_done_ && !shm_link_gone_ && group_ && !group_->shm()) {
      SMCR_LOG(2, "conn %08x: the peer's TCP FIN follows its SMC-R half-close", local_token_);
      return;
    }
    peer_vanished_locked("peer's TCP connection closed without an SMC-R close");
    return;
  }
  if (shm_link_gone_ && !peer_closed_ && state_ != CloseState::kClosed) {
    peer_lost_locked("shm link ended, the TCP connection did not");
    return;
  }
  apply_close_event_locked(CloseEvent::kTimeout);
}

}  // namespace smcr
