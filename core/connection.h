// One SMC-R connection: its RMBE (receive side, smc_rx), the peer's RMBE that
// we write into (send side, smc_tx), CDC processing, and the close state
// machine. All socket-call semantics the application sees (blocking,
// EAGAIN, EOF, ECONNRESET, EPIPE) are produced here.
//
// Readiness: the application's fd number holds one end ("app end") of an
// AF_UNIX stream socketpair; the engine holds the other ("engine end"). The
// kernel's own poll/select/epoll machinery then reports SMC-R readiness:
//   readable   <- the engine writes one doorbell byte (data, EOF or reset)
//   EOF/RDHUP  <- shutdown(engine end, SHUT_WR)
//   HUP        <- shutdown(engine end, SHUT_RDWR) on reset
//   writable   <- normally true; when the peer's window is full the writer
//                 fills the app end's tiny send buffer, and the engine drains
//                 it when a CDC reopens the window.
// See docs/ARCHITECTURE.md for why.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/cdc.h"
#include "core/cdc_mem.h"
#include "core/close.h"
#include "core/fabric.h"
#include "core/handoff.h"
#include "core/mutex.h"
#include "core/connection_services.h"
#include "core/process.h"
#include "core/spin_backoff.h"

namespace smcr {

class LinkGroup;
class Connection;

// Deferred arming (preload/epoll.cc). A reader that empties the connection
// normally arms its wait bit at once, so that the peer rings the readiness
// socket when data comes: a system call on each side per message. While
// every thread that could sleep on the fd is known to ask an epoll
// interposition first, the connection may instead stay unarmed ("parked"):
// the interposition finds its data in memory (poll_parked), and arms it
// (arm_deferred) before any of its threads sleeps in the kernel.
//
// With a ready set (core/ready_set.h) a parked connection stays armed, but
// for a slot of the set's shared page: the peer's writer marks the slot and
// wakes the set's sleeping thread itself, so any number of connections may
// be parked, a thread may sleep while they are, and a wait costs O(ready).
class ReadinessDeferral {
 public:
  struct Parking {
    bool ok = false;  // may be parked
    // A ready set for it (null: unarmed, looked at by every wait).
    uint8_t* page = nullptr;
    cdcmem::ReadySetSlot where;
    int bell_fd = -1;  // the set's bell (sending end): marking our own page may need it
    // The set's bell and page memfd to hand to the peer first (once per
    // set and link group; -1 when already done).
    int announce_bell_fd = -1, announce_page_fd = -1;
  };
  // The connection (held) found nothing to read: whether it may stay
  // parked, and how. `group`: its link group (null: no ready set).
  virtual Parking park(Connection* c, int key, LinkGroup* group) = 0;

  // Its connections whose readiness socket may show data now (armed as
  // usual, so that the peer rings it, or rung already) or an end: a wait that found
  // other connections' data in memory looks at the kernel too while there
  // are any, or it would report newer data before theirs. Kept by each
  // connection as it is released (Connection::count_kernel_armed_locked).
  std::atomic<int> kernel_armed{0};

 protected:
  ~ReadinessDeferral() = default;
};

struct ConnectionSetup {
  LinkGroup* group = nullptr;   // takes one group reference
  // Our RMB (RMBE index 1 at offset 0) as registered with each link of the
  // group, by slot: one entry owns the memory, the others are aliases
  // (Link::register_alias); addr null where a link has none.
  std::array<LocalRmb, kMaxGroupLinks> rmbs;
  // The peer's RMBE as each link names it; size 0 where a link has none.
  std::array<RemoteRmb, kMaxGroupLinks> peer_rmbs;
  int slot = 0;                 // the link the connection starts on
  uint32_t local_token = 0;     // alert token the peer puts in CDCs to us
  uint32_t peer_token = 0;      // alert token we put in CDCs to the peer
  uint32_t rmbe_base = 4;       // 4: RFC eyecatcher model; 0: Linux model
  int tcp_fd = -1;
  bool active = false;          // we were the TCP client
  // shm: the RMBs' memfds (taken), kept while an exec may still carry the
  // connection along (core/exec_carry.h); -1 where there are none.
  int rmb_memfd = -1;
  int peer_rmb_memfd = -1;
};

namespace exec_carry {
struct Record;
}

// The application's number the calling thread's current call came in on
// (the interposer's ConnRef sets it for the call); -1 on the shim's own
// threads (a relay's reads and writes of the connection). Initial-exec: the
// interposer sets it on every call, and the library is preloaded (a static
// TLS slot, no __tls_get_addr call).
extern constinit thread_local int t_app_number __attribute__((tls_model("initial-exec")));

class Connection {
 public:
  static Connection* create(const ConnectionSetup& setup);
  // Connections of this process not yet released, less those whose RMB
  // takes no more data and waits only for the peer's C to be pooled
  // (welcome_close_in_memory_locked): the RMB budget's count.
  static size_t live();
  // A readiness socketpair (see above): both ends close-on-exec and out of
  // the application's fd range. False (errno) on failure.
  static bool make_readiness_pair(int* app_end, int* engine_end);
  // Makes the app end unwritable (no POLLOUT) by filling it, its send
  // buffer first set to a few bytes unless *made_small says it was.
  static void fill_readiness_socket(int app_end, bool* made_small);

  // Reference counting: the fd table holds one reference, the engine one
  // while the connection is registered with its group. Memory is recycled,
  // never returned to the allocator, so try_ref on a stale pointer is safe.
  bool try_ref();
  void ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void unref();

  // Called once a duplicate of `app_end` sits at the application's fd
  // number. The connection keeps `app_end` privately (to drain/fill it and to
  // block on it) and `engine_end`; both are closed when the last application
  // fd for the connection is closed.
  void attach_fds(int app_end, int engine_end, bool nonblocking);
  int tcp_fd() const { return tcp_fd_; }
  void set_tcp_fd(int fd) { tcp_fd_ = fd; }
  // Application fd numbers referring to this connection (dup/dup2/F_DUPFD).
  void add_user_fd() { user_fds_.fetch_add(1); }
  // Returns true when that was the last one.
  bool drop_user_fd() { return user_fds_.fetch_sub(1) == 1; }
  // The process is exiting with the connection open: close it the way the
  // kernel closes a TCP socket at exit (C, or A if unread data remains).
  void process_exit();

  // fork(): a connection belongs to the process that made it. In a forked
  // child it is "foreign": data calls fail with EOPNOTSUPP (the engine and
  // the connection's state stay with the parent), and closing it closes only
  // the child's descriptors (forget_in_child), as closing one reference to a
  // TCP socket would. A child never processes its CDCs, posts or rings for
  // it: the control page, readiness socket and link are the owner's, shared
  // with the child's stale copy. See docs/ARCHITECTURE.md.
  bool foreign() const;
  // Not held: in a forked child the lock is the parent's copy (it may have
  // been held at the fork); only this process's copy of the object is read.
  void forget_in_child() SMCR_NO_THREAD_SAFETY_ANALYSIS;
  // In a forked child: true once the owner has handed the connection over
  // (core/handoff.h), waiting a moment while it still holds it; the child's
  // descriptor is then a plain stream socket to the owner's relay.
  // `claim`: the caller uses the stream (a data call): an inherited
  // connection its owner let go of (or will) becomes ours (re-homed) or
  // relayed, waiting for that up to a moment; without, nothing is waited
  // for or claimed.
  bool handed_over(bool claim) SMCR_NO_THREAD_SAFETY_ANALYSIS;  // child side: not held (see forget_in_child)
  // In a child about to exec: its descriptors that survive must be relayed
  // (the new program cannot map the RMBs): claims that before waiting.
  void claim_for_exec();

  // --- handover to forked children, owner side (core/handoff.h) ---
  std::atomic<uint32_t>* handoff_word() const { return handoff_; }
  // Offered: every other holder of the application's socket has closed it.
  // Handover thread, while the connection is offered (relayed: nothing
  // else uses its descriptors).
  bool holders_gone() SMCR_NO_THREAD_SAFETY_ANALYSIS;
  // Offered and never to be claimed (or no longer usable): closed as the
  // application's close would have.
  void end_offer();
  // A holder claimed it: asks the peer to move it to a new link whose other
  // end goes to the holder with the connection's state, and forgets it.
  // False when it cannot be (not shm, the peer refuses): relay it instead.
  bool rehome_to_child();
  // Turns the readiness socket the holders share into a byte stream for a
  // relay: *child_fd our end of it, *own_fd the connection's new app end.
  bool start_relaying(int* child_fd, int* own_fd);
  bool start_relaying_locked(int* child_fd, int* own_fd) SMCR_REQUIRES(mu_);
  std::array<int, 3> held_fds() const SMCR_NO_THREAD_SAFETY_ANALYSIS { return {app_.engine_end, tcp_fd_, mem_.peer_bell_fd}; }
  // Engine thread: the peer asks to move this connection to the link whose
  // end `fd` came with its request; `peer_token` is its name for it.
  void on_rehome_request(int fd, uint32_t peer_token);
  // Our own re-homing waits for the peer's answer: a request of the peer
  // for the same connection (both processes handing it over at once) is
  // refused, not parked behind our wait.
  bool rehoming() const { return rehoming_.load(); }

  // --- a program spawned from here takes it over (core/exec_carry.h, "take") ---
  // Whether it could be: ours, shm, both memfds kept, not ended.
  bool passable();
  // Its numbers may turn into a relay's stream now: no epoll wait of this
  // process is parked on it. A blocking read or write asleep on it goes on
  // on the stream once it wakes (resume_on_relay_stream).
  bool relayable_in_place();
  // A program spawned from here holds its socket and will ask for it: the
  // application's last close offers it (as with a forked child) instead of
  // closing it, and the memfds are kept.
  void mark_passed() { passed_.store(true); }
  bool passed() const { return passed_.load(); }
  // The program's claim (handoff::kClaimRemote) came on `fd`, a connection
  // to our diagnostics socket that the handover thread answers on.
  // Engine thread (never waits for the connection): the program's request
  // came on `fd`. kClaimed: offered, and claimed for it (the handover thread
  // answers on a duplicate of `fd`); kHeld: this process still holds it (or
  // it is busy): ask again; kGone: not to be had any more.
  enum class RemoteClaim { kClaimed, kHeld, kGone };
  RemoteClaim claim_remote(int fd);
  // Handover thread: moves the connection to the claimant's new link and
  // gives it the state and descriptors (exec_carry::Record) over its
  // connection, then forgets it. False when it cannot be: the claimant was
  // told to expect a relay, with the TCP socket.
  bool pass_to_claimant();

  // --- exec (core/exec_carry.h) ---
  // Whether an exec could take this connection along: shm, alone on its
  // link (or, inherited across fork, about to be: re-homed on our claim),
  // both memfds kept.
  bool exec_carriable() SMCR_NO_THREAD_SAFETY_ANALYSIS;  // not held: see its definition
  // Holds the connection (the engine paused) and writes its state and its
  // descriptors' current numbers into *r: true, and held until the exec
  // replaces the process (or exec_carry_cancel, if the exec fails).
  // Held across the exec: taken in exec_carry_begin, let go when the exec
  // replaces the process or by exec_carry_cancel.
  bool exec_carry_begin(exec_carry::Record* r) SMCR_NO_THREAD_SAFETY_ANALYSIS;
  void exec_carry_cancel() SMCR_NO_THREAD_SAFETY_ANALYSIS;
  // In the new program: the connection of *r on `group` (made for it), with
  // our RMB and the peer's mapped again. Referenced once per application
  // number in r->app_fds.
  static Connection* exec_adopt(const exec_carry::Record& r, LinkGroup* group, const LocalRmb& rmb,
                                const RemoteRmb& peer);
  // Taken over after an exec (exec_adopt).
  // Written once, by exec_adopt, before the connection is published.
  bool carried() const SMCR_NO_THREAD_SAFETY_ANALYSIS { return move_.carried; }
  // Before another program may use the application's socket where the shim
  // cannot take the connection over (a carried connection's fork: sshd's
  // seccomp-sandboxed child; a program spawned by posix_spawn, system() or
  // a vfork child's exec, which the shim never sees fork): the socket
  // becomes a plain stream that a relay here serves (core/handoff.h
  // relay_in_place), for this process and the others alike.
  bool relay_here(int* child_fd, int* own_fd);
  // Relayed in place (relay_here): the application's numbers are the
  // relay's stream, and its calls on them go there, once what the stream
  // holds before the relay's marker is drained (relay_stream_ready; until
  // then await_relay_stream waits, at most a few seconds: read then, the
  // readiness bytes would reach the application as data).
  bool relaying_in_place() const { return relay_stream_.load(std::memory_order_acquire) != 0; }
  void relay_stream_ready() { relay_stream_.store(kRelayStreamReady, std::memory_order_release); }
  void await_relay_stream() const;

  // --- application side (return -1 with errno like the libc calls) ---
  ssize_t recvv(const iovec* iov, int iovcnt, int flags);
  ssize_t sendv(const iovec* iov, int iovcnt, int flags);
  int shutdown(int how);
  // The application closed its last fd for the connection (already removed
  // from the fd table). Closes the app and engine ends and drops the table's
  // reference; the connection lingers until the peer's C.
  void app_close(bool abortive);
  void set_linger_abort(bool on) { linger_abort_.store(on); }
  bool linger_abort() const { return linger_abort_.load(); }
  void set_nonblocking(bool nb);
  void set_timeout(bool receive, int ms);
  // SO_ERROR: the reset's error if no call has reported it yet (as TCP's
  // sk_err, reported once), else `tcp_error` (the TCP socket's own).
  int take_socket_error(int tcp_error);
  // Whether a reset error waits to be reported (what makes a TCP socket
  // poll POLLERR until recv, send or SO_ERROR reports it).
  bool socket_error_pending();
  uint32_t bytes_readable();
  // An edge-triggered registration reported this connection readable, and
  // what it reported may stay unread (a reader that reads part, or an event
  // the application let pass): over TCP every arrival wakes the socket
  // again, so the next one must ring even though data waits.
  void want_next_edge();
  // Bytes a write could place in the peer's RMBE now without waiting (0 once
  // the connection can no longer send).
  uint32_t bytes_writable();
  uint32_t bytes_unsent() { return 0; }  // writes complete synchronously
  // Urgent data (RFC 7609 4.7.5; TCP's one urgent byte, the last of a
  // send(MSG_OOB)): SIOCATMARK, and SO_OOBINLINE (the urgent byte stays in
  // the stream instead of being read with recv(MSG_OOB)).
  bool at_urgent_mark();
  void set_oob_inline(bool on);
  // SO_SNDBUF: at most `bytes` of ours unconsumed in the peer's RMBE at a
  // time (0: the whole RMBE), as a TCP send buffer bounds unacknowledged data.
  void set_send_limit(uint32_t bytes);
  // connect(): the destination whose short-flow history this connection's
  // end updates (shortflows::destination_key).
  void set_short_flow_key(uint32_t key);
  // What SO_RCVBUF / SO_SNDBUF report: our RMBE's and our send window's
  // size, doubled as the kernel reports socket buffers (Linux SMC does too).
  uint32_t reported_rcvbuf();
  uint32_t reported_sndbuf();

  // TCP_CORK / TCP_NODELAY as the application last set them (-1: never;
  // ask the TCP socket). They change nothing on the SMC-R data path (a
  // write is visible to the peer at once, and there is nothing for the TCP
  // socket to send), so setting them costs no system call; getsockopt
  // reports them back.
  std::atomic<int8_t>& tcp_flag(bool cork) { return cork ? tcp_cork_ : tcp_nodelay_; }

  // --- deferred arming (ReadinessDeferral above) ---
  // Whether the connection can be parked at all (CDCs through memory).
  bool deferrable();
  // Hands the arming to `d` (its key: the fd it knows the connection by), or
  // back (null: armed as usual from now on). False if another deferral
  // has it: a connection in two epoll sets is then never parked.
  bool set_deferral(ReadinessDeferral* d, int key);
  // For good: something may sleep on the fd without asking (poll, select).
  void forbid_deferral();
  // `d`'s thread is about to sleep: a connection it parked is armed, or
  // rung if data is already here.
  void arm_deferred(ReadinessDeferral* d);
  enum class Parked : uint8_t { kGone, kBusy, kEmpty, kReadable };
  // Is there data on a connection `d` parked? kBusy: another thread holds
  // it (it will settle it); kGone: not parked by `d` any more. *writable:
  // what POLLOUT on its fd says now.
  // `data_mark` is set to a value that changes whenever data arrives (the
  // producer cursor), so that an edge-triggered registration is told of
  // each arrival once.
  // `since`: for kReadable, since when its data has waited (the control
  // page's stamp, cdcmem::ready_since; 0 without one).
  Parked poll_parked(ReadinessDeferral* d, bool* writable, uint64_t* data_mark, uint64_t* since = nullptr);
  // Since when the peer's unread data has waited (cdcmem::ready_since,
  // CLOCK_MONOTONIC ns), so that epoll reports connections in the order
  // their data came; 0 when unknown (no control page, busy, nothing).
  uint64_t arrival_stamp();
  // Returns once no other thread holds the connection (taken and let go;
  // what it parked meanwhile is processed). The caller holds no lock.
  void wait_until_released();
  // Everything epoll would report for the fd now (EPOLLIN, EPOLLOUT,
  // EPOLLRDHUP, EPOLLHUP, EPOLLERR, EPOLLPRI and their NORM/BAND twins), for
  // a registration the interposition keeps in memory (preload/epoll.cc,
  // "virtual"). Without a system call while the connection is open both
  // ways, its window open and nothing rung on its readiness socket; else
  // the readiness socket is polled too. kBusy: another thread holds it;
  // kGone: another process's; else kReadable. Re-arms a connection `d`
  // parked with a ready set, as poll_parked does. `edge_reader`: the
  // registration is edge-triggered (want_next_edge while data waits).
  Parked poll_events(ReadinessDeferral* d, uint32_t* events, uint64_t* data_mark, uint64_t* since = nullptr,
                     bool edge_reader = false);

  // --- engine side ---
  // Never blocks: if an application thread holds the connection (it may be
  // blocked sending on a full link while the peer's engine waits for ours to
  // drain), the message is parked and processed when that thread lets go.
  void on_cdc(const cdc::Message& m);
  // Engine thread, never blocks: every link of the group is gone.
  void on_link_failure();
  // Engine thread, never blocks: the link in `slot` went down. A connection
  // on it moves to a surviving link (RFC 4.6: validation CDC, unacknowledged
  // bytes written again, then the current cursors), or is reset.
  void on_link_down(int slot);
  // Engine thread, never blocks: the peer's TCP socket closed or reset (its
  // process died, or its kernel aborted the connection). Unless the SMC-R
  // close (C or A) arrives within a short grace period, the peer is treated
  // as lost.
  void on_tcp_peer_gone();
  // Engine thread: the peer's readiness socket (the engine end of its
  // socketpair) arrived over the shm link; ours takes ownership of `fd`.
  // From then on our CDCs reach the peer through memory and we ring its
  // socket ourselves (core/cdc_mem.h).
  void set_peer_bell(int fd);
  // Engine thread, never blocks: the timer armed with arm_timer is due. Both
  // this and on_tcp_peer_gone are parked like CDCs when an application
  // thread holds the connection (a blocking call can hold it for seconds).
  void on_timer(int64_t now_ms);
  int64_t timer_deadline() const { return timer_deadline_.load(std::memory_order_relaxed); }
  uint32_t local_token() const { return local_token_; }
  CloseState state();
  // One line of "key=value" pairs: token, state, addresses, RMBs, bytes.
  std::string describe();

  // The link an application thread waiting in epoll may poll for this
  // connection's messages (verbs: Link::app_poll), or null; only for
  // telling links apart, never dereferenced by the caller.
  const void* pollable_link();
  // One look at that link's receive queue from a thread that waits for
  // readiness (epoll_wait): the CDCs found are delivered (the readiness
  // sockets of their connections rung). `will_sleep`: the caller sleeps
  // next, so the link's notifications are armed. True when something was
  // delivered. Skipped (false) while another thread holds the connection,
  // unless `will_sleep`.
  bool poll_link_once(bool will_sleep);

  // Holding a connection: CDC messages parked while another thread held it
  // are processed when it is taken (so nothing else overtakes them: a link
  // failure must not be seen before the data and C that preceded it) and
  // again as it is released. Every function named *_locked requires it
  // (SMCR_REQUIRES(mu_), checked by scripts/check-thread-safety.sh).
  // Inside, a connection is held with a Hold; tests hold one as an
  // application thread would.
  void lock() SMCR_ACQUIRE(mu_) {
    mu_.lock();
    drain_inbox_locked();
  }
  void unlock() SMCR_RELEASE(mu_);

 private:
  Connection() = default;

  // std::unique_lock for a connection, which the analysis understands.
  class SMCR_SCOPED_LOCKABLE Hold {
   public:
    explicit Hold(Connection& c) SMCR_ACQUIRE(c.mu_) : c_(c) { c_.lock(); }
    // Taken already (mu_.try_lock()).
    Hold(Connection& c, std::adopt_lock_t) SMCR_REQUIRES(c.mu_) : c_(c) {}
    ~Hold() SMCR_RELEASE() {
      if (held_) c_.unlock();
    }
    void unlock() SMCR_RELEASE() {
      c_.unlock();
      held_ = false;
    }
    void lock() SMCR_ACQUIRE() {
      c_.lock();
      held_ = true;
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    Connection& c_;
    bool held_ = true;
  };
  // An application call (t_app_number) on a connection relayed in place
  // (relay_here) since it took the number from the table (it waited for
  // the lock, or fell asleep before): it goes on on the relay's stream, as
  // the application's next call on the number does (reading the connection
  // itself would race the relay for its bytes and reorder them). `done`:
  // bytes the call moved before; a read returns them, a write sends the
  // rest of `iov` after them. Takes the place of the call's return.
  bool on_relay_stream_locked() const SMCR_REQUIRES(mu_) { return t_app_number >= 0 && relaying_in_place(); }
  // A blocking call that slept on `fd` has woken.
  void woke_on_locked(int fd) SMCR_REQUIRES(mu_) {
    if (fd >= 0 && fd == move_.sleepers_fd) one_sleeper_woke_locked();
  }
  void one_sleeper_woke_locked() SMCR_REQUIRES(mu_);
  ssize_t resume_on_relay_stream(const iovec* iov, int iovcnt, int flags, bool write, size_t done)
      SMCR_REQUIRES(mu_);
  // A parked engine event: a CDC, a link going down (down_slot >= 0;
  // kAllLinks: every link), or the peer's readiness socket.
  struct InboxItem {
    cdc::Message cdc;
    int down_slot = -1;
    int bell_fd = -1;  // the peer's readiness socket (set_peer_bell)
    int rehome_fd = -1;  // on_rehome_request's link end
    uint32_t rehome_token = 0;
    int64_t timer_now_ms = -1;  // on_timer's
    bool tcp_gone = false;      // on_tcp_peer_gone's
  };
  static constexpr int kAllLinks = 1000;
  static_assert(kAllLinks >= kMaxGroupLinks, "kAllLinks must name no slot");
  void park(const InboxItem& item);
  void tcp_peer_gone_locked() SMCR_REQUIRES(mu_);
  void timer_locked(int64_t now_ms) SMCR_REQUIRES(mu_);
  void welcome_close_in_memory_locked() SMCR_REQUIRES(mu_);
  int64_t next_close_reap_locked(int64_t now_ms) SMCR_REQUIRES(mu_);
  void process_item_locked(const InboxItem& item) SMCR_REQUIRES(mu_);
  // Empties the inbox without acting on it (the connection was re-homed):
  // descriptors closed, a move the peer asks for refused.
  void discard_inbox_locked() SMCR_REQUIRES(mu_);
  // What the inbox holds, emptying it.
  std::vector<InboxItem> take_inbox();
  // Where a CDC came from. The control page always holds the newest CDC
  // the peer published, however many it published since we last looked
  // (a parked reader, a small-write flood: 65,536 and more), so its 16-bit
  // sequence number may have wrapped past ours: it is never stale (its
  // cursors are validated as any CDC's). A link CDC (every CDC on RDMA) is
  // judged by serial arithmetic: the link delivers in order, and on shm it
  // carries only state changes, never 32,768 CDCs behind the page.
  enum class CdcSource : uint8_t { kLink, kMemory };
  void process_cdc_locked(const cdc::Message& m, CdcSource from = CdcSource::kLink) SMCR_REQUIRES(mu_);
  void link_down_locked(int slot) SMCR_REQUIRES(mu_);
  // Moves to another link of the group, writing our bytes in
  // [peer's consumer cursor, replay_end) again; false if there is none.
  bool fail_over_locked(cdc::Cursor replay_end) SMCR_REQUIRES(mu_);
  // Posts a CDC on the current link, remembering which of our CDCs the
  // peer's adapter has acknowledged (the failover validation's SS).
  bool post_cdc_locked(const cdc::Message& m) SMCR_REQUIRES(mu_);
  // Drops up to `at_most` of the oldest unacknowledged CDCs whose post id is
  // <= `completed`, advancing tx_.seq_acked.
  void pop_acked_locked(uint64_t completed, size_t at_most) SMCR_REQUIRES(mu_);
  void drain_inbox_locked() SMCR_REQUIRES(mu_);
  void reset_fields() SMCR_REQUIRES(mu_);
  void peer_lost_locked(const char* why) SMCR_REQUIRES(mu_);
  // The peer's process ended without an SMC-R close: TCP's end if it had
  // read everything (connection.cc), peer_lost_locked's reset if not.
  void peer_vanished_locked(const char* why) SMCR_REQUIRES(mu_);
  void shm_link_ended_locked() SMCR_REQUIRES(mu_);
  void release_resources_locked() SMCR_REQUIRES(mu_);
  // The next CDC (a new sequence number) with the current cursors and flags.
  cdc::Message next_cdc_locked(bool done, bool close, bool abort) SMCR_REQUIRES(mu_);
  bool send_cdc_locked(bool done, bool close, bool abort) SMCR_REQUIRES(mu_);
  void apply_close_event_locked(CloseEvent e) SMCR_REQUIRES(mu_);
  void protocol_violation_locked(const char* what) SMCR_REQUIRES(mu_);
  void maybe_send_consumer_update_locked() SMCR_REQUIRES(mu_);
  void ring_readable_locked() SMCR_REQUIRES(mu_);
  // `will_sleep`: the calling thread sleeps on the fd next (never parked).
  void clear_readable_locked(bool will_sleep = false) SMCR_REQUIRES(mu_);
  // --- CDCs through memory (core/cdc_mem.h), shm fabric only ---
  // Processes the newest CDC the peer wrote into our control page, if any.
  void pull_cdc_locked() SMCR_REQUIRES(mu_);
  // Asks the peer to ring our readiness socket when data arrives.
  void arm_readable_locked(bool will_sleep = false) SMCR_REQUIRES(mu_);
  // Arms the doorbell although data is waiting (bytes_readable).
  void arm_for_next_arrival_locked() SMCR_REQUIRES(mu_);
  // The next producer-cursor move is an edge of its own (bytes_readable,
  // want_next_edge): armed over the data that waits.
  void want_next_edge_locked() SMCR_REQUIRES(mu_);
  // The arming itself, shared by the two above: the word in our page, then
  // a CDC published before the peer saw it.
  void set_data_arming_locked() SMCR_REQUIRES(mu_);
  // ReadinessDeferral::kernel_armed, brought up to date (on every release).
  void count_kernel_armed_locked() SMCR_REQUIRES(mu_);
  // After publishing a CDC: wakes the peer by the bits it set. False if the
  // peer must get the CDC as a link message instead.
  bool wake_peer_locked(uint8_t* page, const cdc::Message& m, bool data_moved, bool window_moved) SMCR_REQUIRES(mu_);
  // We hold the peer's readiness socket and it has not taken it back.
  bool may_ring_peer_locked(uint8_t* page) const SMCR_REQUIRES(mu_);
  // The peer's readiness socket fetched from its process (core/peer_fd.h)
  // where its control page names it; tried once per connection.
  bool fetch_peer_bell_locked(uint8_t* page) SMCR_REQUIRES(mu_);
  // A cursor update goes through memory (the peer's control page, its bell
  // known): publishing one costs no system call unless the peer sleeps.
  bool cursor_updates_cheap_locked() const SMCR_REQUIRES(mu_);
  // Inside recvv: a data arrival is not rung (the reader is about to take
  // it); on the way out the readiness socket is made to match what is left.
  void settle_readable_locked() SMCR_REQUIRES(mu_);
  // Leaves the parked state: the readiness socket made to match (armed, or
  // rung if data is already here).
  void unpark_locked() SMCR_REQUIRES(mu_);
  // Takes back our data arming (either kind): true if the peer had taken a
  // readiness-socket arming, whose doorbell byte is then owed.
  bool disarm_data_locked() SMCR_REQUIRES(mu_);
  // Parked with a ready set: arms for it (data will mark our slot).
  void arm_for_set_locked() SMCR_REQUIRES(mu_);
  // A connection `d` parked with a ready set and left unarmed (its arming
  // taken) is armed for the set again past what is here (poll_parked,
  // poll_events). Returns the data mark: the producer cursor, which changes
  // with every arrival.
  uint64_t rearm_parked_for_set_locked(ReadinessDeferral* d) SMCR_REQUIRES(mu_);
  // Marks our own slot of the ready set (data came by the link, or the
  // peer's marking was taken back), waking the set's sleeper if need be.
  void mark_own_set_locked() SMCR_REQUIRES(mu_);
  // Writer: the peer's kForSet arming we took: mark its slot, and wake its
  // set if asleep. False if that set is not known here (yet).
  bool mark_peer_set_locked(uint8_t* page) SMCR_REQUIRES(mu_);
  // Writer, having published data (`producer`, the CDC's) or an end (null:
  // news whatever cursor the arming names): the peer's kForSet arming is
  // taken and its set marked, if it is parked for one. Either way the CDC
  // also goes on the link (a peer bell we lack yet, or an end).
  void mark_peer_set_if_armed_locked(uint8_t* page, const cdc::Cursor* producer) SMCR_REQUIRES(mu_);
  // Blocking read with nothing to read: watch the control page for a while
  // before sleeping (bounded, adaptive). True if the peer published.
  bool spin_for_data_locked() SMCR_REQUIRES(mu_);
  // A blocking read that has `done` of the `want` bytes asked and found no
  // more: whether it waits for more (and until when: `until`, set on the
  // first call), because the writer reports it holds more than our RMB
  // could take (the B flag of its last CDC). The read then returns what
  // TCP's larger buffer would have held, not an RMB at a time (a program
  // that reads into a buffer of the size it asked for, as Python's recv
  // does, otherwise allocates and faults a fresh buffer per RMB). A writer
  // that stops, closes or has no more than fits ends it at once; at most
  // kFillWaitMs.
  bool fill_more_locked(size_t done, size_t want, bool no_wait, int64_t& until) SMCR_REQUIRES(mu_);
  // Without a control page (verbs): the bounded spin polls the link's
  // receive queue on this thread (LinkGroup::app_poll); true when something
  // for this connection came (processed).
  bool poll_link_locked(SpinBackoff& backoff) SMCR_REQUIRES(mu_);
  bool poll_link_once_locked(bool will_sleep) SMCR_REQUIRES(mu_);
  // Our link when an application thread may poll it (verbs, alive, the
  // connection not released), else null.
  Link* app_pollable_link_locked() SMCR_REQUIRES(mu_);
  // Blocking write with a full window: the same watch, for the CDC that
  // reports consumption. True if the peer published.
  bool spin_for_window_locked() SMCR_REQUIRES(mu_);
  // The watch both share: the control page's version or a parked link
  // message, up to the spin budget; drained when one came.
  bool watch_control_page_locked(SpinBackoff& backoff) SMCR_REQUIRES(mu_);
  void take_peer_bell_locked(int fd) SMCR_REQUIRES(mu_);
  void set_peer_bell_fd_locked(int fd) SMCR_REQUIRES(mu_);
  // The same for a descriptor whose device and inode are known already.
  void set_peer_bell_fd_locked(int fd, uint64_t dev, uint64_t ino) SMCR_REQUIRES(mu_);
  void close_inherited_bell() SMCR_NO_THREAD_SAFETY_ANALYSIS;  // child side: see forget_in_child
  // After a write through memory: takes the cache lines the next write of
  // the same size will fill (ownership, not data) while the application
  // is busy elsewhere. The reader last touched them a ring ago; without
  // this the next write's stores wait for them, and the CDC publish (a
  // full fence) waits for those stores.
  void prefetch_next_write_locked(uint32_t n) SMCR_REQUIRES(mu_);
  static constexpr uint32_t kPrefetchAhead = 4096;
  // Takes the readiness socket back from the peer (before a handover);
  // false if a ring of the peer may still be on its way into it.
  bool revoke_peer_bell_locked() SMCR_REQUIRES(mu_);
  // Waits (up to timeout_ms) until the peer neither rings our readiness
  // socket nor empties it (cdcmem::ringing); false if it still did.
  bool wait_peer_quiet_locked(int timeout_ms) SMCR_REQUIRES(mu_);
  // Sends the engine end of our readiness socket to the peer, alone.
  void send_bell_locked() SMCR_REQUIRES(mu_);
  // A CDC about to go on the link: whether our bell (still owed) may ride
  // on it (not with C or A: the peer writes to us no more).
  bool bell_rides_locked(const cdc::Message& m) const SMCR_REQUIRES(mu_);
  // Throws away every readiness byte queued on the app end.
  void drain_readiness_locked() SMCR_REQUIRES(mu_);
  void signal_eof_locked() SMCR_REQUIRES(mu_);
  void signal_reset_locked() SMCR_REQUIRES(mu_);
  void make_unwritable_locked() SMCR_REQUIRES(mu_);
  void make_writable_locked() SMCR_REQUIRES(mu_);
  bool rmbe_eyecatcher_ok() const SMCR_REQUIRES(mu_);
  // Urgent data: the peer's CDC with U names the byte before its producer
  // cursor; POLLPRI/SIGURG come from an AF_UNIX out-of-band byte on the
  // readiness socket while that byte is neither read nor passed.
  void urgent_arrived_locked(const cdc::Cursor& producer) SMCR_REQUIRES(mu_);
  ssize_t recv_urgent_locked(const iovec* iov, int iovcnt, int flags) SMCR_REQUIRES(mu_);
  void urgent_done_locked() SMCR_REQUIRES(mu_);
  void raise_priority_locked() SMCR_REQUIRES(mu_);
  void lower_priority_locked() SMCR_REQUIRES(mu_);
  // The owner closed its last descriptor while a forked child may hold the
  // application's socket: offer it to the holders instead of closing
  // (core/handoff.h).
  bool hand_over_locked() SMCR_REQUIRES(mu_);
  // The application's close once no handover takes the connection.
  void close_for_app_locked(bool abortive) SMCR_REQUIRES(mu_);
  // Peer side of a re-homing: moves to the link `fd` and answers.
  void rehome_peer_locked(int fd, uint32_t peer_token) SMCR_REQUIRES(mu_);
  // Child side: takes the re-homed connection (the word says kAdopting).
  // Takes over a connection re-homed to this process, waiting up to
  // marker_wait_ms for its marker.
  // Not held: its only thread re-initialises the parent's copies of the
  // locks (the handoff word says kAdopting; other threads wait for it).
  bool adopt_rehomed(int marker_wait_ms) SMCR_NO_THREAD_SAFETY_ANALYSIS;
  // The fields a re-homed connection's new owner takes from the old one.
  struct HandoverSnapshot;
  void save_snapshot_locked(HandoverSnapshot* s) const SMCR_REQUIRES(mu_);
  void load_snapshot(const HandoverSnapshot& s) SMCR_REQUIRES(mu_);
  // After a move to this process (re-homed, or carried across exec): the
  // readiness socket made to match the connection's state.
  void settle_after_move_locked() SMCR_REQUIRES(mu_);
  // app_.nonblocking from the app end, SO_RCVTIMEO/SO_SNDTIMEO from the TCP socket.
  void read_descriptor_modes() SMCR_REQUIRES(mu_);
  // The connection is done with its RMBs' memfds, or has no room to keep
  // them (settle_memfds_locked).
  void close_memfds() SMCR_REQUIRES(mu_);
  // The first data call in a process that has not forked since the
  // connection was made: the memfds an exec or an SCM_RIGHTS receiver
  // needs to take the connection along are kept while the process holds
  // few enough of them (kept_memfd_budget()); beyond, a connection on a
  // link shared with others closes them (one of its own, a re-homed or
  // carried one, always keeps them) and would be relayed instead.
  void first_use_locked() SMCR_REQUIRES(mu_) {
    if (!fabric_.memfds_settled && (fabric_.rmb_memfd >= 0 || fabric_.peer_rmb_memfd >= 0) && !shared_beyond_process()) [[unlikely]]
      settle_memfds_locked();
  }
  void settle_memfds_locked() SMCR_REQUIRES(mu_);
  // Free room in the peer's RMBE within our send limit, and that window's size.
  uint32_t send_space_locked() const SMCR_REQUIRES(mu_);
  uint32_t send_window_locked() const SMCR_REQUIRES(mu_);
  // Whether the application is told it may write (POLLOUT): as TCP's
  // sk_stream_is_writeable, once a third of the window is free. A program
  // that polls for POLLOUT and then writes a buffer blocking (socat) must
  // not find a sliver that one write overruns: its blocking write would
  // wait on a peer that may be waiting on it.
  bool writable_enough_locked() const SMCR_REQUIRES(mu_) {
    return send_space_locked() >= writable_low_water(send_window_locked());
  }
  // The free room a window of `size` needs to be reported writable; the
  // peer's reader applies it to our RMB (wake_peer_locked).
  static uint32_t writable_low_water(uint32_t size) { return std::max<uint32_t>(1, size / 3); }

  // Set before the connection is published (create, exec_adopt) and read
  // without its lock, or atomic.
  std::atomic<int> refs_{0};
  // Counted in live() (from create until release or the last unref).
  std::atomic<bool> counted_live_{false};
  void uncount_live();
  std::atomic<int> user_fds_{1};
  uint64_t owner_generation_ = 0;  // process_generation() of the process that made it
  uint64_t forks_at_create_ = 0;   // handoff::forks_made() when it was made
  std::atomic<uint32_t>* handoff_ = nullptr;  // shared with forked children
  uint32_t local_token_ = 0;       // alert token the peer puts in CDCs to us
  int tcp_fd_ = -1;
  bool active_ = false;            // we were the TCP client
  std::atomic<bool> handover_seen_{false};  // child side: the descriptor is a plain stream now
  std::atomic<bool> rehoming_{false};
  std::atomic<bool> passed_{false};     // mark_passed()
  static constexpr uint32_t kRelayStreamDraining = 1, kRelayStreamReady = 2;
  std::atomic<uint32_t> relay_stream_{0};  // relaying_in_place()
  std::atomic<int> claimant_fd_{-1};    // set_claimant()
  std::atomic<bool> linger_abort_{false};  // SO_LINGER with a zero timeout
  std::atomic<bool> deferral_forbidden_{false};
  std::atomic<int8_t> tcp_cork_{-1}, tcp_nodelay_{-1};
  SpinBackoff spin_backoff_;       // whether a blocking read spins before sleeping
  SpinBackoff window_backoff_;     // whether a blocking write spins before sleeping
  std::atomic<int64_t> timer_deadline_{0};
  Connection* next_free_ = nullptr;  // the pool of recycled shells (connection.cc)

  // Another process may hold the application's socket: a forked child, or
  // a program spawned from here that takes it over.
  bool shared_beyond_process() const { return forks_at_create_ != handoff::forks_made() || passed_.load(); }
  // A handover moved it to another process: nothing of it is ours any more.
  void forget_moved_locked() SMCR_REQUIRES(mu_);
  // The new link of a move to another process: the peer's end and the
  // holder's (SEQPACKET, hidden). Then the peer is asked, over the old link,
  // to move the connection to it (`peer_end` goes with the request and is
  // closed here): true once it answered yes.
  // Why the connection cannot move to another process's link now (not on
  // one shm link of its own kind, or ended), or null.
  const char* move_refusal_locked() const SMCR_REQUIRES(mu_);
  // Why the connection cannot be carried across exec now, or null.
  const char* exec_carry_refusal_locked() SMCR_REQUIRES(mu_);
  bool make_move_link(int* peer_end, int* holder_end) SMCR_REQUIRES(mu_);
  bool ask_peer_to_move(int peer_end) SMCR_REQUIRES(mu_);
  // Unread bytes if the peer's producer cursor were `producer`; nullopt
  // when that cursor is outside our RMBE.
  std::optional<uint32_t> unread_up_to_locked(const cdc::Cursor& producer) const SMCR_REQUIRES(mu_);
  // The error a reset leaves pending (ECONNRESET, or EPIPE after the
  // peer's FIN), 0 once reported.
  int take_reset_error_locked() SMCR_REQUIRES(mu_);
  // Whether such an error waits to be reported.
  bool reset_error_pending_locked() const SMCR_REQUIRES(mu_) {
    return !close_.reset_reported && (close_.aborted || close_.peer_lost || close_.wrote_after_peer_close);
  }

  Mutex mu_;
  Mutex inbox_mu_ SMCR_ACQUIRED_AFTER(mu_);
  std::vector<InboxItem> inbox_ SMCR_GUARDED_BY(inbox_mu_);
  std::atomic<bool> inbox_nonempty_{false};

  // The connection's state, by concern, each group a value with its
  // defaults: reset_fields() assigns fresh ones, so a field added to a
  // group is reset without anyone remembering to.

  // Where the connection lives: its group and link, its RMB and the
  // peer's as each link names them.
  struct FabricState {
    LinkGroup* group = nullptr;
    Link* link = nullptr;          // the link in slot
    int slot = 0;
    LocalRmb rmb;                  // the memory (the owning registration)
    std::array<LocalRmb, kMaxGroupLinks> rmb_on{};
    std::array<RemoteRmb, kMaxGroupLinks> peer_rmb_on{};
    int rmb_memfd = -1, peer_rmb_memfd = -1;  // ConnectionSetup::rmb_memfd, peer_rmb_memfd
    bool memfds_settled = false;   // settle_memfds_locked ran
    bool memfds_counted = false;   // counted against kept_memfd_budget()
    uint32_t peer_token = 0;       // alert token we put in CDCs to the peer
    bool link_dead = false;
    bool shm_link_gone = false;    // the shm link ended: the TCP socket's end decides (shm_link_ended_locked)
  };
  FabricState fabric_ SMCR_GUARDED_BY(mu_);

  // The application's side: our ends of the readiness socketpair and the
  // descriptor modes.
  struct AppState {
    int fd = -1;                   // the app end (a duplicate sits at the application's number)
    int engine_end = -1;
    bool nonblocking = false;
    int rcvtimeo_ms = -1;
    int sndtimeo_ms = -1;
  };
  AppState app_ SMCR_GUARDED_BY(mu_);

  // CDCs posted on the current link and not yet known acknowledged
  // (Link::completed_id), oldest first; their count is bounded by the
  // link's send queue.
  static constexpr size_t kUnackedRing = 256;

  // Send side (smc_tx): our writes into the peer's RMBE.
  struct TxState {
    cdc::CursorSpace space{16384, 4};
    cdc::Cursor prod, cons_peer;   // our producer cursor; the peer's consumer cursor as last told
    uint16_t seq = 0;
    uint16_t seq_acked = 0;        // SS: our last CDC the peer's adapter acknowledged
    std::array<std::pair<uint64_t, uint16_t>, kUnackedRing> unacked{};
    size_t unacked_head = 0, unacked_count = 0;
    uint32_t send_limit = 0;       // SO_SNDBUF; 0: the peer's whole RMBE
    bool window_full = false;
    // The write whose CDC this is holds more than the window left after it:
    // sent as B too (RFC 7609's writer-blocked: the writer has data the RMB
    // cannot take), so that a reader asking for more waits for the refill.
    bool more_than_window = false;
    uint64_t bytes = 0;
    uint64_t writes = 0;           // data-moving writes (short_flows.h)
    uint32_t short_flow_key = 0;   // destination of an active connection, or 0
    // What the last CDC we published said (to know whether data or window moved).
    cdc::Cursor published_prod, published_cons;
    bool published_done = false;
    bool urgent = false;           // the CDC being sent carries P and U
    int64_t data_since = 0;        // cdcmem::set_ready_since: since when the peer has had unread data of ours
  };
  TxState tx_ SMCR_GUARDED_BY(mu_);

  // Receive side (smc_rx): our RMBE and what the peer asked of it.
  enum class Urgent : uint8_t { kNone, kValid, kRead };
  struct RxState {
    cdc::CursorSpace space{16384, 4};
    cdc::Cursor prod, cons, cons_sent;  // peer's producer; ours; ours as last told
    uint16_t seq = 0;
    bool seq_seen = false;
    uint64_t bytes = 0;
    bool peer_writer_blocked = false;
    bool peer_requested_update = false;
    // SIOCINQ told the application how much to read (bytes_readable): the
    // next arrival past `edge_mark` must wake the socket again, as over TCP.
    bool edge_wanted = false;
    cdc::Cursor edge_mark;
    // Urgent data: the byte the peer's CDC with U names, in our RMBE.
    Urgent urgent = Urgent::kNone;
    cdc::Cursor urgent_mark;
    uint8_t urgent_byte = 0;
    bool oob_inline = false;       // SO_OOBINLINE
    bool priority_raised = false;  // the out-of-band byte sits on the readiness socket
    bool app_has_read = false;     // the application consumed bytes (not just peeked)
  };
  RxState rx_ SMCR_GUARDED_BY(mu_);

  // CDCs through memory (core/cdc_mem.h): our control page (the peer's
  // CDCs, our wants), the version of it last processed, and the peer's
  // readiness socket ("bell").
  struct MemoryCdcState {
    uint8_t* control = nullptr;
    uint32_t control_seen = 0;
    uint16_t urgent_seen = 0;
    bool urgent_seen_valid = false;
    int peer_bell_fd = -1;
    // Which file peer_bell_fd named when it was set: a forked child checks
    // before closing its inherited copy (set_peer_bell_fd_locked).
    uint64_t peer_bell_dev = 0, peer_bell_ino = 0;
    // Our readiness socket has not been passed to the peer yet. It goes
    // with our first CDC on the link, or alone once the peer's data (or
    // window) has reached us on the link twice: a connection that ends after
    // one request and one reply never sends it on its own (each link
    // message wakes the peer's engine).
    bool bell_owed = false;
    bool bell_fetch_tried = false;  // fetch_peer_bell_locked
    // Our control page names our bell for the peer to fetch (core/peer_fd.h):
    // it rides no CDC; a peer that could not fetch it still gets it by the
    // second-link-CDC rule (process_item_locked).
    bool bell_published = false;
    uint8_t link_cdcs_unrung = 0;
    // The peer's ready set we marked last (mark_peer_set_locked): the
    // group keeps it mapped while we hold the group.
    uint64_t peer_set_group = 0;  // LinkGroup::serial
    uint32_t peer_set_id = 0;
    uint8_t* peer_set_page = nullptr;
    int peer_set_bell_fd = -1;
    cdc::Cursor link_seen_prod, link_seen_cons;  // the cursors of the peer's last link CDC
  };
  MemoryCdcState mem_ SMCR_GUARDED_BY(mu_);

  // What the readiness socket says, and who arms it (see the top of this file).
  struct ReadinessState {
    bool rd_armed = false, wr_armed = false;  // our wait bits are set (maybe claimed since)
    bool in_reader = false;        // recvv holds the connection
    ReadinessDeferral* deferral = nullptr;  // who arms for us (set_deferral)
    ReadinessDeferral* kernel_counted = nullptr;  // counts us in kernel_armed
    int deferral_key = -1;
    bool parked = false;           // unarmed and empty: deferral arms before sleeping
    bool rd_for_set = false;       // rd_armed names the ready set below (cdcmem::kForSet)
    uint8_t* set_page = nullptr;   // parked with a ready set: its page, our slot, its bell
    cdcmem::ReadySetSlot set_where;
    int set_bell_fd = -1;
    uint16_t readers_asleep = 0;   // blocking reads waiting on the fd (never parked meanwhile)
    uint16_t writers_asleep = 0;   // blocking writes waiting for the peer's window
    uint32_t rd_owed = 0;          // doorbell bytes on (or on their way to) the readiness socket
    bool wr_filled = false, eof_signalled = false, reset_signalled = false;
    bool app_sndbuf_small = false;  // app end's send buffer set to its minimum (fill_readiness_socket)
    bool eof_deferred = false;     // EOF held back behind unread data (see signal_eof_locked)
  };
  ReadinessState ready_ SMCR_GUARDED_BY(mu_);

  // Closing (smc_close): the state machine of core/close.h and what each
  // side has said or lost.
  struct CloseFlags {
    CloseState state = CloseState::kActive;
    bool sent_done = false, sent_close = false, sent_abort = false;
    bool peer_done = false, peer_closed = false;
    bool aborted = false;          // reset: calls fail with ECONNRESET once, then EOF/EPIPE
    bool reset_reported = false;
    // A write came after the peer's C: TCP's peer would have answered it
    // with an RST (EPIPE pending, as after a FIN then RST).
    bool wrote_after_peer_close = false;
    bool tcp_reset = false;        // close the TCP socket with RST
    bool peer_lost = false;        // link failed: readable data stays, then ECONNRESET
    bool tcp_gone = false;         // the peer's TCP socket closed before its SMC-R close
    bool shut_rd = false;
    bool shut_wr = false;          // the application's shutdown(SHUT_WR): its socket is too
    bool app_closed = false;
    bool released = false;
    // The peer's C may come through memory alone (welcome_close_in_memory):
    // the timer looks for it every kCloseReapMs until this close deadline.
    bool close_in_memory = false;
    int close_reap_looks = 0;
    int64_t close_in_memory_until = 0;
  };
  CloseFlags close_ SMCR_GUARDED_BY(mu_);

  // Owner side of a move to another process (core/handoff.h, exec_carry.h).
  struct MoveState {
    bool relayed = false;          // offered, re-homed or relayed (the handover thread holds it)
    bool carried = false;          // taken over after an exec (exec_adopt)
    int64_t claimed_ns = 0;        // child side: when this process claimed it (diagnostics)
    // relay_here with blocking calls asleep on our copy of the application's
    // socket: kept open (a number closed under a sleeping poll can be reused
    // by another socket, which it then waits on for ever) until the last of
    // them (sleepers_left) has woken (woke_on_locked).
    int sleepers_fd = -1;
    int sleepers_left = 0;
  };
  MoveState move_ SMCR_GUARDED_BY(mu_);
};

}  // namespace smcr
