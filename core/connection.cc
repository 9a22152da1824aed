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

namespace {

std::atomic<ConnectionServices*> g_services{nullptr};

// Recycled connection shells: never freed, so a racing try_ref() on a stale
// table pointer touches valid memory and fails cleanly.
std::mutex g_pool_mu;
Connection* g_pool = nullptr;
std::atomic<size_t> g_live{0};

}  // namespace

namespace connection_internal {

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

}  // namespace connection_internal

using namespace connection_internal;

void set_connection_services(ConnectionServices* s) { g_services.store(s, std::memory_order_release); }

ConnectionServices& connection_services() {
  ConnectionServices* s = g_services.load(std::memory_order_acquire);
  return s ? *s : Engine::get();
}

size_t Connection::live() { return g_live.load(std::memory_order_relaxed); }

// A released connection holds no RMB, whoever still holds a reference (the
// engine's TCP watch, a dead watch awaiting the end of its batch).
void Connection::uncount_live() {
  if (counted_live_.exchange(false, std::memory_order_relaxed)) g_live.fetch_sub(1, std::memory_order_relaxed);
}

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
  g_live.fetch_add(1, std::memory_order_relaxed);
  c->counted_live_.store(true, std::memory_order_relaxed);
  // Connection::unlock: CDCs held for this token are delivered by
  // add_connection while we still hold the connection, and processed here.
  Hold lock(*c);
  c->reset_fields();
  c->fabric_.group = s.group;
  c->fabric_.slot = s.slot;
  c->fabric_.link = s.group->link_at(s.slot);
  c->fabric_.rmb_on = s.rmbs;
  c->fabric_.peer_rmb_on = s.peer_rmbs;
  for (const LocalRmb& r : s.rmbs)
    if (r.addr && !r.alias) c->fabric_.rmb = r;
  c->mem_.control = c->fabric_.rmb.control;
  const RemoteRmb& peer = s.peer_rmbs[static_cast<size_t>(s.slot)];
  c->rx_.space = cdc::CursorSpace(c->fabric_.rmb.size, s.rmbe_base);
  c->tx_.space = cdc::CursorSpace(peer.size, s.rmbe_base);
  c->local_token_ = s.local_token;
  c->fabric_.peer_token = s.peer_token;
  c->tcp_fd_ = s.tcp_fd;
  c->active_ = s.active;
  c->fabric_.rmb_memfd = s.rmb_memfd;
  c->fabric_.peer_rmb_memfd = s.peer_rmb_memfd;
  c->owner_generation_ = process_generation();
  c->forks_at_create_ = handoff::forks_made();
  c->handoff_ = handoff::alloc_state();
  c->rx_.prod = c->rx_.cons = c->rx_.cons_sent = c->rx_.space.initial();
  c->tx_.prod = c->tx_.cons_peer = c->tx_.space.initial();
  c->tx_.published_prod = c->tx_.space.initial();
  c->tx_.published_cons = c->rx_.space.initial();
  if (s.rmbe_base == 4) std::memcpy(c->fabric_.rmb.addr, kRmbeEyecatcher, 4);
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
  // The state groups by assignment: nothing of a recycled shell's last
  // connection survives (the cursors, edge and urgent marks included).
  fabric_ = {};
  app_ = {};
  tx_ = {};
  rx_ = {};
  mem_ = {};
  ready_ = {};
  close_ = {};
  move_ = {};
  // What lives outside the groups (atomics, or read without the lock).
  local_token_ = 0;
  tcp_fd_ = -1;
  active_ = false;
  owner_generation_ = forks_at_create_ = 0;
  handoff_ = nullptr;
  user_fds_.store(1);
  handover_seen_.store(false);
  rehoming_.store(false);
  passed_.store(false);
  claimant_fd_.store(-1);
  linger_abort_.store(false);
  deferral_forbidden_.store(false);
  tcp_cork_.store(-1);
  tcp_nodelay_.store(-1);
  spin_backoff_.reset();
  window_backoff_.reset();
  timer_deadline_.store(0);
  MutexLock lock(inbox_mu_);
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
  uncount_live();
  // Not counted by its set any more (it was released without a last
  // set_deferral(nullptr): a set may outlive it). Tried, not waited for:
  // nobody holds a connection whose last reference goes, unless this
  // thread itself (the count then stays one high: a look too many).
  if (mu_.try_lock()) {
    if (ready_.kernel_counted) ready_.kernel_counted->kernel_armed.fetch_sub(1, std::memory_order_relaxed);
    ready_.kernel_counted = nullptr;
    mu_.unlock();
  }
  std::lock_guard<std::mutex> lock(g_pool_mu);
  next_free_ = g_pool;
  g_pool = this;
}

void Connection::attach_fds(int app_end, int engine_end, bool nonblocking) {
  Hold lock(*this);
  app_.fd = app_end;
  app_.engine_end = engine_end;
  app_.nonblocking = nonblocking;
  // Data or a close may have arrived between the handshake and now.
  if (rx_.space.used(rx_.prod, rx_.cons).value_or(0) > 0) ring_readable_locked();
  else arm_readable_locked();
  if (peer_write_closed(close_.state)) signal_eof_locked();
  if (close_.aborted || close_.peer_lost) signal_reset_locked();
  mem_.bell_owed = mem_.control && fabric_.link && app_.engine_end >= 0 && !fabric_.link_dead && !close_.released;
  mem_.bell_published = mem_.bell_owed && cdcmem::read_bell(mem_.control, local_token_).has_value();
}

bool Connection::foreign() const { return owner_generation_ != process_generation(); }

void Connection::forget_in_child() {
  // Only this process's descriptors: the parent's connection is untouched.
  for (int fd : {app_.fd, app_.engine_end, tcp_fd_, fabric_.rmb_memfd, fabric_.peer_rmb_memfd})
    if (fd >= 0) sys::close(fd);
  close_inherited_bell();
}

std::string Connection::describe() {
  // Diagnostics run on the engine thread, which must never wait for a
  // connection (its holder may be waiting for the engine).
  if (!mu_.try_lock()) {
    char busy[48];
    snprintf(busy, sizeof busy, "token=%08x state=busy", local_token_);
    return busy;
  }
  Hold lock(*this, std::adopt_lock);
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
           local_token_, active_ ? "client" : "server", to_string(close_.state), addr(false).c_str(), addr(true).c_str(),
           fabric_.rmb.size, fabric_.peer_rmb_on[static_cast<size_t>(fabric_.slot)].size, static_cast<unsigned long long>(tx_.bytes),
           static_cast<unsigned long long>(rx_.bytes), close_.aborted ? 0 : rx_.space.used(rx_.prod, rx_.cons).value_or(0),
           close_.app_closed ? 1 : 0, fabric_.group ? fabric_.group->link_num_at(fabric_.slot) : 0);
  std::string out = buf;
  if (mem_.control) {
    // CDCs through memory: what we wait for and what the peer may ring.
    const uint8_t* peer_page = fabric_.peer_rmb_on[static_cast<size_t>(fabric_.slot)].control;
    snprintf(buf, sizeof buf,
             " cdc=memory wants=%llx/%llx peer_wants=%llx/%llx peer_bell=%d readable=%s writable=%s window=%u",
             static_cast<unsigned long long>(cdcmem::load_want(mem_.control, cdcmem::Want::kData)),
             static_cast<unsigned long long>(cdcmem::load_want(mem_.control, cdcmem::Want::kWindow)),
             static_cast<unsigned long long>(peer_page ? cdcmem::load_want(const_cast<uint8_t*>(peer_page), cdcmem::Want::kData) : 0),
             static_cast<unsigned long long>(peer_page ? cdcmem::load_want(const_cast<uint8_t*>(peer_page), cdcmem::Want::kWindow) : 0),
             mem_.peer_bell_fd >= 0 ? 1 : 0,
             ready_.rd_owed ? "rung" : ready_.rd_armed ? "armed" : "quiet", ready_.wr_filled ? (ready_.wr_armed ? "armed" : "filled") : "yes",
             send_space_locked());
    out += buf;
  }
  return out;
}

CloseState Connection::state() {
  Hold lock(*this);
  return close_.state;
}

void Connection::set_nonblocking(bool nb) {
  if (foreign()) return;  // the owner's (its lock may have been held at the fork)
  Hold lock(*this);
  app_.nonblocking = nb;
}

void Connection::set_timeout(bool receive, int ms) {
  if (foreign()) return;  // the owner's (its lock may have been held at the fork)
  Hold lock(*this);
  (receive ? app_.rcvtimeo_ms : app_.sndtimeo_ms) = ms;
}

uint32_t Connection::bytes_writable() {
  Hold lock(*this);
  if (close_.aborted || fabric_.link_dead || close_.peer_lost || close_.peer_closed || close_.released || local_write_closed(close_.state)) return 0;
  return send_space_locked();
}

uint32_t Connection::send_window_locked() const {
  uint32_t cap = tx_.space.capacity();
  return tx_.send_limit > 0 && tx_.send_limit < cap ? tx_.send_limit : cap;
}

uint32_t Connection::send_space_locked() const {
  uint32_t free = tx_.space.free_space(tx_.prod, tx_.cons_peer).value_or(0);
  uint32_t window = send_window_locked();
  uint32_t used = tx_.space.capacity() - free;
  return used >= window ? 0 : std::min(free, window - used);
}

void Connection::set_send_limit(uint32_t bytes) {
  if (foreign()) return;  // the window is the owner's; its readiness socket too
  Hold lock(*this);
  tx_.send_limit = bytes;
  // A larger window may let a blocked writer go on.
  if (writable_enough_locked()) make_writable_locked();
}

void Connection::set_short_flow_key(uint32_t key) {
  if (foreign()) return;  // the owner's (its lock may have been held at the fork)
  Hold lock(*this);
  tx_.short_flow_key = key;
}

uint32_t Connection::reported_rcvbuf() {
  Hold lock(*this);
  return 2 * (rx_.space.capacity() + rx_.space.base());  // the RMBE, eyecatcher included
}

uint32_t Connection::reported_sndbuf() {
  Hold lock(*this);
  uint32_t window = send_window_locked();
  return 2 * (window < tx_.space.capacity() ? window : tx_.space.capacity() + tx_.space.base());
}

void Connection::unlock() {
  for (;;) {
    drain_inbox_locked();
    count_kernel_armed_locked();
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
    if (mem_.control) {
      shm_link_ended_locked();
    } else {
      fabric_.link_dead = true;
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
    bool moved = !(item.cdc.producer == mem_.link_seen_prod) || !(item.cdc.consumer == mem_.link_seen_cons);
    mem_.link_seen_prod = item.cdc.producer;
    mem_.link_seen_cons = item.cdc.consumer;
    // Not when the peer fetched it (those link CDCs had another reason:
    // its ready set's page not known yet, a state change).
    if (mem_.bell_owed && moved && !item.cdc.flags.peer_conn_closed && !item.cdc.flags.peer_conn_abort &&
        !close_.sent_close && !close_.sent_abort && ++mem_.link_cdcs_unrung >= 2 &&
        !(mem_.bell_published && cdcmem::bell_acked(mem_.control, local_token_)))
      send_bell_locked();
  }
}

std::vector<Connection::InboxItem> Connection::take_inbox() {
  std::vector<InboxItem> parked;
  MutexLock lock(inbox_mu_);
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
    MutexLock lock(inbox_mu_);
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

}  // namespace smcr
