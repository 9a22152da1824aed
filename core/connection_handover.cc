// A connection that changes process: forked children (handed over,
// re-homed to the child, or relayed: core/handoff.h), programs that take
// it over after exec (core/exec_carry.h), and the RMB memfds that allow it.
#include "core/connection.h"

#include <pthread.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
  fabric_.memfds_settled = true;
  bool own_link = fabric_.group && fabric_.group->single_connection();
  if (!own_link) fabric_.memfds_counted = count_kept_memfds();
  if (!own_link && !fabric_.memfds_counted) {
    close_memfds();
    return;
  }
}

void Connection::close_memfds() {
  for (int* fd : {&fabric_.rmb_memfd, &fabric_.peer_rmb_memfd}) sys::close_reset(fd);
  if (fabric_.memfds_counted) g_kept_memfds.fetch_sub(1, std::memory_order_relaxed);
  fabric_.memfds_counted = false;
}

// How long a child's call on an inherited connection waits for the parent
// to let go of it (accept-then-fork servers close their copy at once).
constexpr int kHandoverWaitMs = 2000;
// How long a holder's claim waits for the owner to let go before it asks the
// owner to relay the connection it keeps (handoff::ask_owner_to_relay), and
// again each time after: an accept-then-fork server closes its copy well
// within this, and is re-homed.
constexpr int kAskOwnerEveryMs = 500;
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
  int64_t ask_owner_at = sys::now_ms() + kAskOwnerEveryMs;
  for (;;) {
    auto s = static_cast<State>(handoff_->load(std::memory_order_acquire));
    int left = static_cast<int>(std::max<int64_t>(deadline - sys::now_ms(), 0));
    switch (s) {
      case kOwned:
      case kOffered:
        // Our first use claims it: we will own it (re-homing).
        if (!claim) return false;
        if (transition(handoff_, s, kClaimDirect)) move_.claimed_ns = sys::now_ns();
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
        if ((s == kClaimDirect || s == kClaimExec) && sys::now_ms() >= ask_owner_at) {
          ask_owner_at = sys::now_ms() + kAskOwnerEveryMs;
          if (ask_owner_to_relay(handoff_, app_.fd)) {
            SMCR_LOG(1, "conn %08x: its owner still uses it: relayed by the owner", local_token_);
            continue;
          }
        }
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
          if (handoff::drain_to_marker(app_.fd, marker, kHandoverWaitMs, handoff::kRelayMarker) > 0)
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
      if (s == kGone && app_.fd >= 0) drain_readiness_locked();  // our stale copy's counters only
      // Our inherited copies of the readiness pair would keep the stream open
      // after the parent's relay (or the parent) is gone.
      for (int* fd : {&app_.fd, &app_.engine_end}) sys::close_reset(fd);
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
  if (close_.aborted || close_.peer_lost || fabric_.link_dead || close_.released || ready_.reset_signalled || app_.fd < 0 || app_.engine_end < 0)
    return false;
  // The peer closed both ways and nothing is left to read: a child could only
  // read end-of-file and fail to write, which a closed connection gives too.
  if (close_.peer_closed && rx_.space.used(rx_.prod, rx_.cons).value_or(0) == 0) return false;
  // A holder learns of data by the readiness socket from now on: no parking.
  ready_.deferral = nullptr;
  unpark_locked();
  // A program exec'd by a holder asks for the connection by this socket.
  struct stat app_st {};
  uint64_t app_ino = sys::fstat(app_.fd, &app_st) == 0 ? app_st.st_ino : 0;
  sys::close(app_.fd);
  app_.fd = -1;
  // Still open elsewhere? With every other copy closed the engine end hangs up.
  pollfd p{app_.engine_end, 0, 0};
  if (sys::poll(&p, 1, 0) < 0 || (p.revents & POLLHUP)) return false;
  move_.relayed = true;
  // A holder that already asked for it (its call waits) keeps its claim.
  handoff::transition(handoff_, handoff::kOwned, handoff::kOffered);
  if (!handoff::start_handover(this, {app_.engine_end, tcp_fd_, mem_.peer_bell_fd}, app_ino)) {
    move_.relayed = false;
    return false;
  }
  SMCR_LOG(1, "conn %08x: offered to the forked processes that hold it (socket %llu)", local_token_, static_cast<unsigned long long>(app_ino));
  return true;
}

bool Connection::holders_gone() {
  pollfd p{app_.engine_end, 0, 0};
  return sys::poll(&p, 1, 0) < 0 || (p.revents & POLLHUP);
}

void Connection::end_offer() {
  Hold lock(*this);
  move_.relayed = false;
  close_for_app_locked(false);
  lock.unlock();
  unref();  // the fd table's reference
}

bool Connection::start_relaying(int* child_fd, int* own_fd) {
  Hold lock(*this);
  return start_relaying_locked(child_fd, own_fd);
}

bool Connection::relay_here(int* child_fd, int* own_fd) {
  Hold lock(*this);
  if (move_.relayed || foreign() || app_.fd < 0) return false;
  // Nothing is parked from now on: the relay reads the connection as any
  // reader does, woken by the new readiness pair.
  ready_.deferral = nullptr;
  unpark_locked();
  int old_app_end = app_.fd;
  move_.relayed = true;
  if (!start_relaying_locked(child_fd, own_fd)) {
    move_.relayed = false;
    return false;
  }
  relay_stream_.store(kRelayStreamDraining, std::memory_order_release);
  // Our private copy of the application's socket, which is the stream now:
  // the relay must see it hang up when the application's last copy closes.
  // (A call of the application's already inside, or asleep, goes on on the
  // stream by its own number: resume_on_relay_stream.) Those asleep poll
  // this copy: it stays open until they have woken.
  if (int asleep = ready_.readers_asleep + ready_.writers_asleep; asleep > 0) {
    move_.sleepers_fd = old_app_end;
    move_.sleepers_left = asleep;
  } else {
    sys::close(old_app_end);
  }
  return true;
}

constinit thread_local int t_app_number __attribute__((tls_model("initial-exec"))) = -1;

void Connection::await_relay_stream() const {
  const int64_t until = sys::now_ms() + kHandoverWaitMs;
  while (relay_stream_.load(std::memory_order_acquire) == kRelayStreamDraining && sys::now_ms() < until) {
    timespec pause{0, 200 * 1000};  // a drain takes microseconds; this path is rare
    nanosleep(&pause, nullptr);
  }
}

void Connection::one_sleeper_woke_locked() {
  if (--move_.sleepers_left > 0) return;
  sys::close(move_.sleepers_fd);
  move_.sleepers_fd = -1;
}

ssize_t Connection::resume_on_relay_stream(const iovec* iov, int iovcnt, int flags, bool write, size_t done) {
  const int stream = t_app_number;
  unlock();  // the caller's Hold takes it back below
  ssize_t result = static_cast<ssize_t>(done);
  int error = 0;
  if (write || done == 0) {
    await_relay_stream();
    std::vector<iovec> rest;
    size_t skip = done;
    for (int i = 0; i < iovcnt; ++i) {
      if (skip >= iov[i].iov_len) {
        skip -= iov[i].iov_len;
        continue;
      }
      rest.push_back({static_cast<char*>(iov[i].iov_base) + skip, iov[i].iov_len - skip});
      skip = 0;
    }
    msghdr m{};
    m.msg_iov = rest.data();
    m.msg_iovlen = rest.size();
    // The application's own call, as its next one on the number will be.
    ssize_t k = rest.empty() ? 0 : write ? sys::sendmsg(stream, &m, flags) : sys::recvmsg(stream, &m, flags);
    if (k >= 0) result += k;
    else if (done == 0) result = -1, error = errno;
  }
  lock();
  if (result < 0) errno = error;
  return result;
}

bool Connection::start_relaying_locked(int* child_fd, int* own_fd) {
  if (close_.aborted || close_.peer_lost || fabric_.link_dead || close_.released || ready_.reset_signalled || app_.engine_end < 0) return false;
  uint32_t unread = rx_.space.used(rx_.prod, rx_.cons).value_or(0);
  if (ready_.eof_signalled && unread > 0) {
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
  int marker[1] = {app_.engine_end};
  if (!handoff::send_marker(app_.engine_end, marker, handoff::kRelayMarker)) return false;
  *child_fd = app_.engine_end;
  if (!make_readiness_pair(&app_.fd, &app_.engine_end)) {
    app_.engine_end = *child_fd;
    app_.fd = -1;
    return false;
  }
  ready_.wr_filled = ready_.eof_signalled = ready_.reset_signalled = ready_.app_sndbuf_small = false;
  ready_.rd_owed = 0;
  ready_.rd_armed = ready_.wr_armed = false;
  if (unread > 0) ring_readable_locked();
  if (peer_write_closed(close_.state)) signal_eof_locked();
  *own_fd = app_.fd;
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
  X(rx_.space, rx_space) X(tx_.space, tx_space) X(tx_.send_limit, tx_send_limit) X(local_token_, local_token) \
  X(fabric_.peer_token, fabric_peer_token) X(mem_.control_seen, mem_control_seen)                             \
  X(mem_.urgent_seen, mem_urgent_seen) X(mem_.urgent_seen_valid, mem_urgent_seen_valid)                       \
  X(mem_.bell_owed, mem_bell_owed) X(mem_.link_cdcs_unrung, mem_link_cdcs_unrung)                             \
  X(mem_.link_seen_prod, mem_link_seen_prod) X(mem_.link_seen_cons, mem_link_seen_cons)                       \
  X(ready_.rd_armed, ready_rd_armed) X(ready_.wr_armed, ready_wr_armed)                                       \
  X(tx_.published_prod, tx_published_prod) X(tx_.published_cons, tx_published_cons)                           \
  X(tx_.published_done, tx_published_done) X(tx_.bytes, tx_bytes) X(rx_.bytes, rx_bytes)                      \
  X(tx_.writes, tx_writes) X(tx_.short_flow_key, tx_short_flow_key) X(rx_.prod, rx_prod) X(rx_.cons, rx_cons) \
  X(rx_.cons_sent, rx_cons_sent) X(tx_.prod, tx_prod) X(tx_.cons_peer, tx_cons_peer) X(tx_.seq, tx_seq)       \
  X(rx_.seq, rx_seq) X(rx_.seq_seen, rx_seq_seen) X(rx_.peer_writer_blocked, rx_peer_writer_blocked)          \
  X(rx_.peer_requested_update, rx_peer_requested_update) X(tx_.window_full, tx_window_full)                   \
  X(close_.sent_done, close_sent_done) X(close_.sent_close, close_sent_close)                                 \
  X(close_.sent_abort, close_sent_abort) X(close_.peer_done, close_peer_done)                                 \
  X(close_.peer_closed, close_peer_closed) X(close_.aborted, close_aborted)                                   \
  X(close_.wrote_after_peer_close, close_wrote_after_peer_close)                                              \
  X(close_.reset_reported, close_reset_reported) X(close_.tcp_reset, close_tcp_reset)                         \
  X(fabric_.link_dead, fabric_link_dead) X(close_.peer_lost, close_peer_lost)                                 \
  X(close_.tcp_gone, close_tcp_gone) X(close_.shut_rd, close_shut_rd) X(close_.released, close_released)      \
  X(close_.shut_wr, close_shut_wr)                                                                            \
  X(ready_.rd_owed, ready_rd_owed) X(rx_.edge_wanted, rx_edge_wanted) X(rx_.edge_mark, rx_edge_mark)          \
  X(ready_.wr_filled, ready_wr_filled) X(ready_.eof_signalled, ready_eof_signalled)                           \
  X(ready_.reset_signalled, ready_reset_signalled) X(ready_.eof_deferred, ready_eof_deferred)                 \
  X(rx_.urgent, rx_urgent) X(rx_.urgent_mark, rx_urgent_mark) X(rx_.urgent_byte, rx_urgent_byte)              \
  X(rx_.oob_inline, rx_oob_inline) X(rx_.priority_raised, rx_priority_raised) X(tx_.urgent, tx_urgent)        \
  X(rx_.app_has_read, rx_app_has_read) X(close_.state, close_state)

struct Connection::HandoverSnapshot {
  uint32_t magic;
#define SMCR_FIELD(path, name) std::remove_cvref_t<decltype(std::declval<Connection&>().path)> name;
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
#define SMCR_SAVE(path, name) s->name = path;
  SMCR_HANDOVER_FIELDS(SMCR_SAVE)
#undef SMCR_SAVE
  s->timer_deadline = timer_deadline_.load();
  s->tcp_cork = tcp_cork_.load();
  s->tcp_nodelay = tcp_nodelay_.load();
}

void Connection::load_snapshot(const HandoverSnapshot& s) {
#define SMCR_LOAD(path, name) path = s.name;
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
  ask.receiver_token = fabric_.peer_token;
  ask.sender_token = local_token_;
  bool moved = fabric_.group->llc_exchange(handoff::encode_rehome(ask), peer_end, kRehomeAnswerMs);
  sys::close(peer_end);
  return moved;
}

namespace {
// Set while our own move of the connection waits for the peer's answer
// (Connection::rehoming()), cleared on every way out.
class RehomingFlag {
 public:
  explicit RehomingFlag(std::atomic<bool>& flag) : flag_(flag) { flag_.store(true); }
  ~RehomingFlag() { flag_.store(false); }
  RehomingFlag(const RehomingFlag&) = delete;
  RehomingFlag& operator=(const RehomingFlag&) = delete;

 private:
  std::atomic<bool>& flag_;
};
}  // namespace

const char* Connection::move_refusal_locked() const {
  if (!fabric_.group || !fabric_.group->shm() || fabric_.group->link_slots() != 1 || !mem_.control || !fabric_.link)
    return "not on the shared-memory fabric";
  if (close_.aborted || close_.peer_lost || fabric_.link_dead || close_.released || ready_.reset_signalled ||
      app_.engine_end < 0 || tcp_fd_ < 0)
    return "the connection has ended";
  return nullptr;
}

bool Connection::rehome_to_child() {
  Hold lock(*this);
  auto refused = [this](const char* why) {
    SMCR_LOG(1, "conn %08x: not re-homed (%s): relayed instead", local_token_, why);
    return false;
  };
  if (const char* why = move_refusal_locked()) return refused(why);
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
  RehomingFlag end_rehoming(rehoming_);
  drain_inbox_locked();
  pull_cdc_locked();
  save_snapshot_locked(static_cast<HandoverSnapshot*>(handoff::snapshot_area(handoff_)));
  int fds[2] = {holder_end, mem_.peer_bell_fd};
  bool sent = handoff::send_marker(app_.engine_end, std::span<const int>(fds, mem_.peer_bell_fd >= 0 ? 2 : 1),
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
    if (!fabric_.group->failed()) return refused("the peer did not move it");
    return refused("the link failed");
  }
  // From the peer's answer on, its messages for the connection go to the
  // new link. Those parked since the state was written down are not ours
  // to act on any more.
  die_here_in_tests("after_answer");
  close_.released = true;
  discard_inbox_locked();
  handoff::publish(handoff_, handoff::kRehomed);
  counters().rehomed.fetch_add(1, std::memory_order_relaxed);
  SMCR_LOG(1, "conn %08x: re-homed to a forked child (its own link, no relay; the peer moved it in %lld us)",
           local_token_, static_cast<long long>((sys::now_ns() - asked_ns) / 1000));
  // Forgotten here without a word to the peer: the holder has every
  // descriptor and mapping, and the peer its new link.
  forget_moved_locked();
  lock.unlock();
  unref();  // the fd table's reference, which the handover thread held
  return true;
}

void Connection::forget_moved_locked() {
  connection_services().unwatch_tcp(this);
  for (int* fd : {&tcp_fd_, &app_.engine_end, &mem_.peer_bell_fd}) sys::close_reset(fd);
  close_memfds();
  close_.released = close_.app_closed = true;
  close_.state = CloseState::kClosed;
  timer_deadline_.store(0);
  mem_.control = nullptr;
  fabric_.group->free_rmbs(&fabric_.rmb_on, &fabric_.peer_rmb_on, false);  // our mappings only: no DELETE RKEY
  fabric_.rmb = LocalRmb{};
  handoff::retire_state(handoff_);
  handoff_ = nullptr;
  LinkGroup* g = fabric_.group;
  fabric_.group = nullptr;
  fabric_.link = nullptr;
  g->remove_connection(local_token_);
}

bool Connection::passable() {
  Hold lock(*this);
  return !foreign() && !move_.relayed && !move_.carried && fabric_.group && fabric_.group->shm() && fabric_.group->link_slots() == 1 && mem_.control &&
         fabric_.link && fabric_.rmb_memfd >= 0 && fabric_.peer_rmb_memfd >= 0 && handoff_ && !close_.aborted && !close_.peer_lost && !fabric_.link_dead &&
         !close_.released && !ready_.reset_signalled && app_.fd >= 0 && app_.engine_end >= 0 && tcp_fd_ >= 0;
}

bool Connection::relayable_in_place() {
  Hold lock(*this);
  return !ready_.parked && !ready_.deferral;
}

Connection::RemoteClaim Connection::claim_remote(int fd) {
  if (!mu_.try_lock()) return RemoteClaim::kHeld;
  Hold lock(*this, std::adopt_lock);
  if (!passed_.load() || !handoff_ || foreign() || close_.released) return RemoteClaim::kGone;
  uint32_t v = handoff_->load(std::memory_order_acquire);
  if (v == handoff::kOwned) return close_.app_closed ? RemoteClaim::kGone : RemoteClaim::kHeld;
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
  Hold lock(*this);
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
  if (const char* why = move_refusal_locked()) return refused(why);
  if (fabric_.rmb_memfd < 0 || fabric_.peer_rmb_memfd < 0) return refused("its RMBs' memfds are closed");
  int peer_end, holder_end;
  if (!make_move_link(&peer_end, &holder_end)) return refused("no socket pair");
  // As rehome_to_child: the claimant has everything before the peer is
  // asked, so that our death from here on leaves it what it needs.
  RehomingFlag end_rehoming(rehoming_);
  drain_inbox_locked();
  pull_cdc_locked();
  exec_carry::Record r;
  r.role = static_cast<uint8_t>(fabric_.group->role());
  r.peer = fabric_.group->peer();
  r.link_num = fabric_.group->link_num();  // the identity the peer's new group keeps (LinkGroup::make_rehomed)
  r.local = fabric_.group->local();
  r.remote = fabric_.group->remote();
  const RemoteRmb& peer = fabric_.peer_rmb_on[static_cast<size_t>(fabric_.slot)];
  r.rmb_size = fabric_.rmb.size;
  r.rmb_rkey = fabric_.rmb.rkey;
  r.rmb_vaddr = fabric_.rmb.vaddr;
  r.peer_size = peer.size;
  r.peer_rkey = peer.rkey;
  r.peer_vaddr = peer.vaddr;
  r.rmbe_base = rx_.space.base();
  r.local_token = local_token_;
  r.peer_token = fabric_.peer_token;
  r.active = active_;
  r.linger_abort = linger_abort_;
  r.link_fd = holder_end;
  r.tcp_fd = tcp_fd_;
  r.app_end = -1;  // the claimant's own
  r.engine_end = app_.engine_end;
  r.peer_bell_fd = mem_.peer_bell_fd;
  r.memfd = fabric_.rmb_memfd;
  r.peer_memfd = fabric_.peer_rmb_memfd;
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
  if (!moved) return refused(fabric_.group->failed() ? "the link failed" : "the peer did not move it");
  close_.released = true;
  discard_inbox_locked();
  char verdict = exec_carry::kVerdictMoved;
  sys::send(claimant, &verdict, 1, MSG_NOSIGNAL);
  sys::close(claimant);
  handoff::publish(handoff_, handoff::kGone);  // for a forked child that holds it too
  counters().exec_carried.fetch_add(1, std::memory_order_relaxed);
  SMCR_LOG(1, "conn %08x: passed to the process that took it (a program spawned from here, or the receiver of an SCM_RIGHTS message): its own link, no relay; the peer moved it in %lld us",
           local_token_, static_cast<long long>((sys::now_ns() - asked_ns) / 1000));
  forget_moved_locked();
  lock.unlock();
  unref();  // the fd table's reference, which the handover thread held
  return true;
}

bool Connection::adopt_rehomed(int marker_wait_ms) {
  // Only this thread touches the object now: the word says kAdopting, and
  // other threads of this process wait for it. The locks are the parent's
  // copies from the fork (one may have been held then): made afresh.
  new (&mu_) Mutex();
  new (&inbox_mu_) Mutex();
  inbox_.clear();
  inbox_nonempty_.store(false);
  std::atomic<uint32_t>* old_word = handoff_;
  const auto* snap = static_cast<const HandoverSnapshot*>(handoff::snapshot_area(old_word));
  // Our copy of the peer's bell (if the parent had it at the fork) goes
  // before anything arrives that could take its number: the one that comes
  // with the marker replaces it.
  close_inherited_bell();
  int fds[2] = {-1, -1};
  int n = handoff::drain_to_marker(app_.fd, fds, marker_wait_ms, handoff::kRehomeMarker);
  if (n < 1 || snap->magic != kSnapshotMagic || !fabric_.group) {
    for (int fd : fds)
      if (fd >= 0) sys::close(fd);
    SMCR_LOG(1, "conn %08x: the re-homed connection did not arrive: resetting the socket", local_token_);
    if (app_.engine_end >= 0) sys::shutdown(app_.engine_end, SHUT_RDWR);
    return false;
  }
  // Written before the word said kRehomed, and never again.
  load_snapshot(*snap);
  set_peer_bell_fd_locked(n >= 2 ? sys::hide_fd(fds[1]) : -1);
  LinkGroup* fresh = LinkGroup::make_rehomed(*fabric_.group, std::make_unique<ShmLink>(sys::hide_fd(fds[0])));
  fabric_.group = fresh;
  fabric_.link = fresh->link_at(0);
  fabric_.slot = 0;
  tx_.unacked_head = tx_.unacked_count = 0;
  tx_.seq_acked = tx_.seq;
  ready_.deferral = nullptr;
  ready_.deferral_key = -1;
  ready_.parked = ready_.in_reader = false;
  ready_.readers_asleep = ready_.writers_asleep = 0;
  spin_backoff_.reset();
  window_backoff_.reset();
  move_.relayed = false;
  handover_seen_.store(false);
  read_descriptor_modes();
  handoff_ = handoff::alloc_state();
  forks_at_create_ = handoff::forks_made();
  owner_generation_ = process_generation();
  ref();  // the new group's
  fresh->add_connection(local_token_, this);
  LinkGroup::register_group(fresh);
  connection_services().add_group(fresh);
  connection_services().watch_tcp(this, tcp_fd_);
  if (timer_deadline_.load() != 0) connection_services().arm_timer(this);
  {
    Hold lock(*this);
    settle_after_move_locked();
  }
  counters().adopted.fetch_add(1, std::memory_order_relaxed);
  SMCR_LOG(1, "conn %08x: taken over from the parent process (%lld us after the claim)", local_token_,
           move_.claimed_ns ? static_cast<long long>((sys::now_ns() - move_.claimed_ns) / 1000) : -1LL);
  return true;
}

void Connection::read_descriptor_modes() {
  int fl = sys::fcntl(app_.fd, F_GETFL);
  app_.nonblocking = fl >= 0 && (fl & O_NONBLOCK);
  for (bool receive : {true, false}) {
    timeval tv{};
    socklen_t len = sizeof tv;
    int ms = -1;
    if (sys::getsockopt(tcp_fd_, SOL_SOCKET, receive ? SO_RCVTIMEO : SO_SNDTIMEO, &tv, &len) == 0 &&
        (tv.tv_sec || tv.tv_usec))
      ms = static_cast<int>(tv.tv_sec * 1000 + tv.tv_usec / 1000);
    (receive ? app_.rcvtimeo_ms : app_.sndtimeo_ms) = ms;
  }
}

void Connection::settle_after_move_locked() {
  // What the readiness socket holds now is ours to settle: the previous
  // owner's doorbell bytes (a re-homed one's drained up to the marker) and
  // any that came after. A ring the peer claimed may still be on its way.
  drain_readiness_locked();
  if (ready_.rd_armed && mem_.control && !(cdcmem::load_want(mem_.control, cdcmem::Want::kData) & cdcmem::kArmed)) {
    wait_peer_quiet_locked(100);
    drain_readiness_locked();
  }
  ready_.rd_armed = false;
  ready_.rd_owed = 0;
  cdcmem::disarm(mem_.control, cdcmem::Want::kData);
  pull_cdc_locked();
  settle_readable_locked();
  if (peer_write_closed(close_.state) && !ready_.eof_deferred) signal_eof_locked();
}

bool Connection::exec_carriable() {
  // Not locked: an inherited connection's lock is the parent's copy, and
  // exec_carry_begin checks again, held.
  if (!fabric_.group || !fabric_.group->shm() || fabric_.group->link_slots() != 1 || !mem_.control) return false;
  if (fabric_.rmb_memfd < 0 || fabric_.peer_rmb_memfd < 0) return false;
  // Inherited: our claim re-homes it onto a link of its own.
  return foreign() || fabric_.group->single_connection();
}

const char* Connection::exec_carry_refusal_locked() {
  if (foreign()) return "another process owns it";
  if (!fabric_.group || !fabric_.group->shm() || !fabric_.group->single_connection() || fabric_.group->link_slots() != 1 ||
      !fabric_.link || !mem_.control)
    return "it shares its link with other connections";
  if (fabric_.rmb_memfd < 0 || fabric_.peer_rmb_memfd < 0) return "its RMBs' memfds are closed";
  if (forks_at_create_ != handoff::forks_made()) return "a forked child may hold it too";
  if (passed_.load()) return "a program spawned from here takes it over";
  if (move_.relayed) return "it is being handed to a forked child";
  if (close_.aborted || close_.peer_lost || fabric_.link_dead || close_.released || ready_.reset_signalled ||
      app_.fd < 0 || app_.engine_end < 0 || tcp_fd_ < 0)
    return "it has ended";
  return nullptr;
}

bool Connection::exec_carry_begin(exec_carry::Record* r) {
  lock();
  if (const char* why = exec_carry_refusal_locked()) {
    SMCR_LOG(1, "conn %08x: not carried across exec (%s)", local_token_, why);
    unlock();
    return false;
  }
  pull_cdc_locked();
  r->role = static_cast<uint8_t>(fabric_.group->role());
  r->peer = fabric_.group->peer();
  r->link_num = fabric_.group->link_num();
  r->local = fabric_.group->local();
  r->remote = fabric_.group->remote();
  const RemoteRmb& peer = fabric_.peer_rmb_on[static_cast<size_t>(fabric_.slot)];
  r->rmb_size = fabric_.rmb.size;
  r->rmb_rkey = fabric_.rmb.rkey;
  r->rmb_vaddr = fabric_.rmb.vaddr;
  r->peer_size = peer.size;
  r->peer_rkey = peer.rkey;
  r->peer_vaddr = peer.vaddr;
  r->rmbe_base = rx_.space.base();
  r->local_token = local_token_;
  r->peer_token = fabric_.peer_token;
  r->active = active_;
  r->linger_abort = linger_abort_;
  r->link_fd = fabric_.link->notify_fd();
  r->tcp_fd = tcp_fd_;
  r->app_end = app_.fd;
  r->engine_end = app_.engine_end;
  r->peer_bell_fd = mem_.peer_bell_fd;
  r->memfd = fabric_.rmb_memfd;
  r->peer_memfd = fabric_.peer_rmb_memfd;
  static_assert(sizeof(HandoverSnapshot) <= sizeof r->snapshot);
  save_snapshot_locked(reinterpret_cast<HandoverSnapshot*>(r->snapshot));
  return true;  // held until the exec
}

void Connection::exec_carry_cancel() { unlock(); }

Connection* Connection::exec_adopt(const exec_carry::Record& r, LinkGroup* g, const LocalRmb& rmb,
                                   const RemoteRmb& peer) {
  static_assert(alignof(HandoverSnapshot) <= alignof(exec_carry::Record));
  const auto& snap = *reinterpret_cast<const HandoverSnapshot*>(r.snapshot);
  if (snap.magic != kSnapshotMagic || snap.local_token != r.local_token) return nullptr;
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
    Hold lock(*c);
    c->load_snapshot(snap);
    c->fabric_.rmb.control = c->fabric_.rmb_on[0].control = c->mem_.control = rmb.control;
    c->app_.fd = r.app_end;
    c->app_.engine_end = r.engine_end;
    c->set_peer_bell_fd_locked(r.peer_bell_fd);
    c->linger_abort_ = r.linger_abort;
    c->move_.carried = true;
    c->tx_.seq_acked = c->tx_.seq;
    c->read_descriptor_modes();
    uint32_t numbers = std::max<uint32_t>(r.n_app_fds, 1);
    c->user_fds_.store(static_cast<int>(numbers));
    for (uint32_t i = 1; i < numbers; ++i) c->ref();
  }
  LinkGroup::register_group(g);
  connection_services().add_group(g);
  connection_services().watch_tcp(c, c->tcp_fd_);
  if (c->timer_deadline_.load() != 0) connection_services().arm_timer(c);
  {
    Hold lock(*c);
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
  answer.receiver_token = fabric_.peer_token;
  answer.sender_token = local_token_;
  answer.reply = true;
  LinkGroup* old = fabric_.group;
  Link* old_link = fabric_.link;
  LinkGroup* fresh = nullptr;
  if (old && old_link && !close_.released && !rehoming_.load() && peer_token == fabric_.peer_token && mem_.control &&
      old->shm() && old->link_slots() == 1) {
    // The old group keeps a hold until our answer is posted on its link.
    fresh = old->rehome_connection(local_token_, std::make_unique<ShmLink>(sys::hide_fd(fd)),
                                   fabric_.peer_rmb_on[static_cast<size_t>(fabric_.slot)]);
    fd = -1;
  }
  if (fd >= 0) sys::close(fd);
  if (!fresh) {
    answer.negative = true;
    if (old_link) old_link->post_message(handoff::encode_rehome(answer));
    SMCR_LOG(1, "conn %08x: the peer's request to move the connection refused", local_token_);
    return;
  }
  fabric_.group = fresh;
  fabric_.link = fresh->link_at(0);
  fabric_.slot = 0;
  tx_.unacked_head = tx_.unacked_count = 0;
  tx_.seq_acked = tx_.seq;
  // Held: nothing of ours for this connection is posted on the old link
  // after the answer.
  old_link->post_message(handoff::encode_rehome(answer));
  old->release_hold();
  connection_services().add_group(fresh);
  // The new owner may lack our bell (core/cdc_mem.h): ours rode a link CDC
  // that reached the old owner after it forked, a copy the child never
  // got. Without it every CDC of the new owner's goes on the link (a wake-up
  // of both engines per CDC). One link message; a duplicate is dropped.
  send_bell_locked();
  counters().rehomed_peer.fetch_add(1, std::memory_order_relaxed);
  SMCR_LOG(1, "conn %08x: moved to the peer's new link (its connection changed process)", local_token_);
}

}  // namespace smcr
