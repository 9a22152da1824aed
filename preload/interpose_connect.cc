// The shim's connection calls: socket, connect, listen, accept/accept4,
// close, shutdown. A TCP socket that both ends opted in to SMC-R runs the
// CLC handshake inside connect()/accept() (after_tcp_established) and then
// has its fd number taken over by the engine's readiness socket.

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <atomic>
#include <cstring>

#include "bpf/option.h"
#include "core/connection.h"
#include "core/env.h"
#include "core/handshake.h"
#include "core/log.h"
#include "core/policy.h"
#include "core/short_flows.h"
#include "core/sys.h"
#include "preload/dup3_retry.h"
#include "preload/epoll.h"
#include "preload/exec_inherit.h"
#include "preload/fd_table.h"
#include "preload/interpose_internal.h"
#include "preload/late_connect.h"
#include "preload/own_listeners.h"
#include "preload/takeover.h"

// The helpers every interposer file shares (interpose_internal.h).
using namespace smcr::preload::interpose;

namespace {

// Makes `fd` fail like a reset TCP connection: RST to the peer, and the
// number holds an unconnected socket the application will close.
void reset_socket(int fd) {
  linger l{1, 0};
  smcr::sys::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  int family = smcr::sys::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0 ? ss.ss_family : AF_INET;
  int fresh = smcr::sys::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int fdflags = smcr::sys::fcntl(fd, F_GETFD);
  if (fresh >= 0) {
    int rc = smcr::preload::dup3_retrying(fresh, fd, (fdflags & FD_CLOEXEC) ? O_CLOEXEC : 0);
    int err = errno;
    smcr::sys::close(fresh);
    if (rc >= 0) return;
    // The number still holds the connected TCP socket: shut down, as
    // without a fresh socket, rather than left carrying the connection.
    SMCR_LOG(0, "fd %d: cannot replace the reset TCP socket (dup3: %s): shut down instead", fd, strerror(err));
  }
  smcr::sys::shutdown(fd, SHUT_RDWR);
}

uint16_t port_of(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

// The operator's policy (core/policy.h) for a connection to/from `peer` on
// the server port `port`; a listener passes peer = null.
bool policy_allows(uint16_t port, const sockaddr* peer) {
  const smcr::policy::Policy* p = smcr::policy::active();
  if (!p) return true;
  auto name = smcr::policy::program_name(), exe = smcr::policy::executable_name();
  return peer ? smcr::policy::allows(*p, port, peer, name, exe) : smcr::policy::may_allow(*p, port, name, exe);
}

// How long connect() waits for the server's first CLC answer before the
// rest of the client handshake moves to a thread (SMCR_CLC_CONNECT_WAIT_US;
// -1: inline). The server half of the CLC runs in the server application's
// accept(): past this, connect() returns as TCP's would, whatever that
// application's accept pace. 1 ms keeps a server that is already in
// accept() inline (a thread per connection costs ~15% of the connection
// rate) and a server that is not off connect() at once.
int connect_answer_wait_us() {
  static const int us = static_cast<int>(smcr::env_long("SMCR_CLC_CONNECT_WAIT_US", 1000, -1, 1000000));
  return us;
}

// After the TCP handshake: SMC-R if both ends offered it. Returns 0 when the
// fd is usable (SMC-R or TCP), -1 with errno when the connection was reset.
// `listener` is the fd accept() took a server's `fd` from (-1 for a client).
// `flow`: a client's short-flow key (core/short_flows.h), or 0.
// `accept_flags`: a server's accept4() flags (install()).
// `peer`: a client's connect() address (spares the CLC a getpeername).
int after_tcp_established(int fd, int listener, bool allowed = true, uint32_t flow = 0, int accept_flags = -1,
                          const sockaddr* peer = nullptr, socklen_t peer_len = 0) {
  bool client = listener < 0;
  using smcr::bpfopt::Result;
  // An accepted child's record completes in the softirq that queued it, so
  // it may come a moment late; kAcceptRecordWaitMs only bounds a stalled CPU.
  constexpr int kAcceptRecordWaitMs = 2000;
  Result r;
  if (client) {
    r = smcr::bpfopt::read_result(fd);
  } else if (smcr::preload::FdTable::Offers offers = fd_table().offers(listener);
             offers.slot && !smcr::bpfopt::offers_pending(offers.slot, offers.matched)) {
    // No SYN-ACK of this port carried the option that an accepted child
    // has not matched: this one's did not, and no record needs reading (a
    // TCP child of an opted-in listener costs no system call of ours).
    r = Result::kNotBoth;
    smcr::counters().accept_unoffered.fetch_add(1, std::memory_order_relaxed);
  } else {
    r = smcr::bpfopt::read_accepted_result(listener, fd, kAcceptRecordWaitMs);
    if (r == Result::kSmcBoth && offers.slot) fd_table().offer_matched(listener);
  }
  if (r != Result::kSmcBoth) {
    smcr::Fallback why = r == Result::kNotLoaded   ? smcr::Fallback::kBpfNotLoaded
                         : r == Result::kUndecided ? smcr::Fallback::kOptionUndecided
                                                   : smcr::Fallback::kPeerNoOption;
    smcr::count_fallback(why);
    // Undecided: the client may have seen the option and sent a Proposal
    // that the application will now read; say so whatever the log level.
    SMCR_LOG(r == Result::kUndecided ? 0 : 1, "fd %d: plain TCP (%s)", fd, smcr::bpfopt::to_string(r));
    return 0;
  }
  Reserved res = smcr::preload::reserve(fd);
  smcr::preload::FdTable::BufferRequest bufs = fd_table().buffers(fd);
  smcr::HandshakeRequest req;
  req.have_resources = res.ok();
  req.bell_fd = res.engine_end;
  req.allowed = allowed;
  req.rmb_size = bufs.rcvbuf;
  req.may_defer_confirm = !client && smcr::preload::defer_confirm_enabled();
  if (client) req.answer_wait_us = connect_answer_wait_us();
  if (client && peer &&
      ((peer->sa_family == AF_INET && peer_len >= sizeof(sockaddr_in)) ||
       (peer->sa_family == AF_INET6 && peer_len >= sizeof(sockaddr_in6))))
    std::memcpy(&req.peer, peer, peer->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
  // A client silent through the CLC spin or only partly heard (slow, or
  // hostile), or a first contact (which waits for the client's Confirm and
  // CONFIRM LINK reply), must not hold a single-threaded server in
  // accept(): its handshake runs on a thread.
  if (req.may_defer_confirm && res.ok() && allowed && !smcr::server_may_run_inline(fd) &&
      smcr::preload::start_accepting_threaded(fd, res, req, bufs.sndbuf, accept_flags))
    return 0;
  smcr::HandshakeOutcome o = client ? smcr::clc_client(fd, req) : smcr::clc_server(fd, req);
  if (o.kind == smcr::HandshakeOutcome::Kind::kPendingClient) {
    // The server's application has not called accept() yet: connect()
    // returns now, as TCP's, and the handshake ends on a thread.
    smcr::preload::EarlyRegistrations early = smcr::preload::epoll_unhook_before_takeover(fd);
    if (smcr::preload::start_connecting_threaded(fd, res, o.client_pending, bufs.sndbuf, flow)) {
      if (!early.empty()) smcr::preload::epoll_rehook_after_takeover(real_function(g_real.epoll_ctl, "epoll_ctl"), fd, early);
      SMCR_LOG(1, "fd %d: the server has not answered the Proposal yet: the CLC continues on a thread", fd);
      return 0;
    }
    // No thread to be had: the number is still the TCP socket; finish here.
    for (auto& [epfd, ev] : early) {
      smcr::sys::epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
      smcr::preload::epoll_note_before_takeover(epfd, EPOLL_CTL_ADD, fd, &ev);
    }
    o = smcr::clc_client_finish(fd, o.client_pending);
  }
  if (o.kind != smcr::HandshakeOutcome::Kind::kSmc && o.kind != smcr::HandshakeOutcome::Kind::kPending) res.release();
  switch (o.kind) {
    case smcr::HandshakeOutcome::Kind::kPending:
      smcr::preload::start_accepting(fd, o.pending, res, bufs.sndbuf, accept_flags);
      return 0;
    case smcr::HandshakeOutcome::Kind::kPendingClient:  // resolved above
      return 0;
    case smcr::HandshakeOutcome::Kind::kSmc: {
      if (bufs.sndbuf) o.conn->set_send_limit(bufs.sndbuf);
      // Sets that watch the TCP socket must watch the readiness socket.
      smcr::preload::EarlyRegistrations early = smcr::preload::epoll_unhook_before_takeover(fd);
      bool taken = install(fd, o.conn, res, accept_flags);
      // Not taken: the registrations go back on the TCP socket, still there.
      if (!early.empty()) smcr::preload::epoll_rehook_after_takeover(real_function(g_real.epoll_ctl, "epoll_ctl"), fd, early);
      if (taken) return 0;
      // As a connection reset during CLC (below).
      if (!client) {
        smcr::sys::abort_tcp(fd);
        return 0;
      }
      reset_socket(fd);
      errno = ECONNRESET;
      return -1;
    }
    case smcr::HandshakeOutcome::Kind::kFallback:
      smcr::count_fallback(o.reason);
      SMCR_LOG(1, "fd %d: TCP fallback (%s, diagnosis %08x)", fd, smcr::fallback_name(o.reason), o.diagnosis);
      return 0;
    case smcr::HandshakeOutcome::Kind::kTerminate:
      smcr::count_fallback(o.reason);
      if (o.reason == smcr::Fallback::kPeerNotClc) {
        // The peer hung up during the CLC: the TCP socket tells the
        // application what it tells a TCP application (EOF, a reset).
        SMCR_LOG(1, "fd %d: the peer hung up during CLC: plain TCP", fd);
        return 0;
      }
      if (!client) {
        // accept() returns the connection all the same, as TCP's returns one
        // its peer reset in the queue: ECONNRESET once, then end of file.
        // Offering the next one instead would hold a blocking accept()
        // called because select() saw this one, until another client came.
        SMCR_LOG(1, "fd %d: connection reset during CLC (%s): accept() returns it reset", fd,
                 smcr::fallback_name(o.reason));
        // A RST to the client now, and what it sent in place of its CLC
        // message thrown away (never read as the application's data).
        smcr::sys::abort_tcp(fd);
        return 0;
      }
      SMCR_LOG(1, "fd %d: connection reset during CLC (%s)", fd, smcr::fallback_name(o.reason));
      reset_socket(fd);
      errno = o.error ? o.error : ECONNRESET;
      return -1;
  }
  return 0;
}

void close_smc_fd(int fd, Connection* c, int (*real_close)(int)) {
  real_close(fd);
  if (c->foreign()) {
    // A forked child closing what it inherited: the parent's connection
    // lives on (see Connection::foreign).
    if (c->drop_user_fd()) c->forget_in_child();
    return;
  }
  if (c->drop_user_fd()) c->app_close(false);
  else c->unref();
}

// A connect() kept plain TCP: no opt-in, so no option on the SYN; `why` is
// counted once the connection is under way.
int connect_plain(int fd, const struct sockaddr* addr, socklen_t len, smcr::Fallback why) {
  REAL(connect);
  int rc = real_connect(fd, addr, len);
  if (rc == 0 || errno == EINPROGRESS) {
    smcr::count_fallback(why);
    smcr::preload::epoll_settled(fd);
  }
  return rc;
}

}  // namespace

void smcr::preload::interpose::forget_number(int fd) {
  smcr::preload::epoll_forget_fd(fd);
  smcr::preload::epoll_settled(fd);
  smcr::preload::own::forget(fd);
  smcr::preload::late::forget(fd);
  smcr::preload::exec_inherit::forget(fd);
}

int smcr::preload::interpose::close_number(int fd, int (*real_close)(int)) {
  if (refuse_own_fd(fd)) return -1;
  if ((fd_table().has_conn(fd) || fd_table().kind(fd) == smcr::preload::kFdAccepting ||
       fd_table().kind(fd) == smcr::preload::kFdExecInherited) &&
      in_vfork_child())
    return real_close(fd);
  forget_number(fd);
  if (fd_table().kind(fd) == smcr::preload::kFdAccepting && smcr::preload::close_accepting(fd, real_close)) return 0;
  if (Connection* c = fd_table().take(fd)) {
    fd_table().set_kind(fd, smcr::preload::kFdUnknown);
    close_smc_fd(fd, c, real_close);
    return 0;
  }
  if (fd_table().kind(fd) != smcr::preload::kFdUnknown) fd_table().set_kind(fd, smcr::preload::kFdUnknown);
  return real_close(fd);
}

void smcr::preload::interpose::forget_stale_number(int fd) {
  if (!table_knows(fd)) [[likely]]
    return;
  SMCR_LOG(1, "fd %d: was closed past close() (a raw system call?): its connection ends now", fd);
  close_number(fd, [](int) { return 0; });
}

extern "C" {
// The interposed libc entry points: the only symbols the shim exports
// (preload/exports.map; everything else is compiled hidden).
#pragma GCC visibility push(default)

int socket(int domain, int type, int protocol) {
  REAL(socket);
  int fd = real_socket(domain, type, protocol);
  if (fd >= 0) forget_stale_number(fd);
  if (fd >= 0 && enabled() && (domain == AF_INET || domain == AF_INET6) && (type & 0xF) == SOCK_STREAM &&
      (protocol == 0 || protocol == IPPROTO_TCP)) {
    fd_table().set_kind(fd, smcr::preload::kFdTcp);
    fd_table().set_buffers(fd, {});
    fd_table().add_flags(fd, smcr::preload::kFdDefaultOptions);
  }
  return fd;
}

int connect(int fd, const struct sockaddr* addr, socklen_t len) {
  REAL(connect);
  if (refuse_own_fd(fd)) return -1;
  // A client handshake still running on its thread: a non-blocking
  // connect() in progress says EALREADY. Asked before the table: the
  // handshake makes the number writable (a select() wakes) just before it
  // enters the connection, under the lock this waits for.
  if (fd_table().kind(fd) == smcr::preload::kFdAccepting &&
      (fd_table().flags(fd) & smcr::preload::kFdConnectUnreported) && smcr::preload::accepting_in_progress(fd)) {
    errno = EALREADY;
    return -1;
  }
  if (fd_table().has_conn(fd) || fd_table().kind(fd) == smcr::preload::kFdAccepting) {
    // Installed, relayed after a Decline, or reset (the next data call says
    // so): connected, 0 once, then EISCONN, as TCP's. The readiness socket
    // cannot answer for the connection.
    if (fd_table().clear_flags(fd, smcr::preload::kFdConnectUnreported) & smcr::preload::kFdConnectUnreported) return 0;
    errno = EISCONN;
    return -1;
  }
  if (fd_table().kind(fd) != smcr::preload::kFdTcp) return real_connect(fd, addr, len);
  if (addr && len >= sizeof(sa_family_t) && !policy_allows(port_of(addr), addr))
    return connect_plain(fd, addr, len, smcr::Fallback::kPolicy);
  // Our own listener, and this thread may be the one to accept: a CLC held
  // in connect() would wait for that accept().
  if (smcr::preload::own::unattended(addr, len)) return connect_plain(fd, addr, len, smcr::Fallback::kOwnListener);
  uint32_t flow = smcr::shortflows::destination_key(addr, len);
  if (flow && smcr::shortflows::keep_on_tcp(flow, smcr::sys::now_ms()))
    return connect_plain(fd, addr, len, smcr::Fallback::kShortFlow);
  bool opted = smcr::bpfopt::opt_in(fd);
  // From the end of the TCP handshake until the CLC ends (or moves to a
  // thread) the number may change hands: other threads' reads, polls and
  // selects on it wait (ConnRef, before_poll/before_select). Not during the
  // kernel's connect itself: that may take minutes, and a poll there must
  // keep its timeout.
  struct InlineClc {
    int fd;
    bool on;
    void end() {
      if (!on) return;
      on = false;
      t_inline_clc_fd = -1;
      std::atomic_thread_fence(std::memory_order_release);
      fd_table().clear_flags(fd, smcr::preload::kFdClcInline);
    }
    ~InlineClc() { end(); }
  } inline_clc{fd, false};
  int rc = real_connect(fd, addr, len);
  if (!opted) {
    if (rc == 0 || errno == EINPROGRESS) {
      smcr::count_fallback(smcr::Fallback::kBpfNotLoaded);
      smcr::preload::epoll_settled(fd);
    }
    return rc;
  }
  bool nonblocking = rc != 0;
  if (rc != 0) {
    if (errno != EINPROGRESS) return rc;
    // Non-blocking connect: finish the TCP handshake here, briefly, so that
    // the fd is SMC-R or TCP before the application can use it; past that
    // it stays TCP (preload/late_connect.h).
    int saved = errno;
    pollfd p{fd, POLLOUT, 0};
    int64_t deadline = smcr::sys::now_ms() + smcr::preload::late::kWaitMs;
    int n;
    do {
      int64_t left = deadline - smcr::sys::now_ms();
      n = smcr::sys::poll(&p, 1, left > 0 ? static_cast<int>(left) : 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
      if (n == 0) {
        smcr::preload::epoll_settled(fd);
        smcr::preload::late::start(fd);
      }
      errno = saved;
      return -1;
    }
    if (p.revents & (POLLERR | POLLHUP)) {
      // Refused or reset: as over TCP, connect() said EINPROGRESS and the
      // kernel keeps the error for SO_ERROR, poll() and the next connect()
      // (which returns it: asyncio's connect racing with listen()).
      errno = saved;
      return -1;
    }
  }
  inline_clc.on = true;
  fd_table().add_flags(fd, smcr::preload::kFdClcInline);
  t_inline_clc_fd = fd;
  int established = after_tcp_established(fd, -1, true, flow, -1, addr, len);
  int saved_errno = errno;
  inline_clc.end();  // what follows is the application's
  errno = saved_errno;
  if (established != 0) return -1;
  bool pending = fd_table().kind(fd) == smcr::preload::kFdAccepting;  // its thread ends it
  if (!fd_table().has_conn(fd)) smcr::preload::epoll_settled(fd);
  if (flow && !pending) {
    if (Connection* c = fd_table().get(fd)) {
      c->set_short_flow_key(flow);
      c->unref();
    } else {
      // Plain TCP after all (the server did not offer SMC-R, or declined):
      // for the history, as short as a connection gets, so that a server
      // without SMC-R costs the next connects no opt-in and no record read.
      smcr::shortflows::ended(flow, 0, 0, smcr::sys::now_ms());
    }
  }
  if (nonblocking) {
    // Finished here, but a non-blocking connect() over TCP says EINPROGRESS
    // and reports the outcome later (POLLOUT, SO_ERROR, the next connect()):
    // programs that count on that sequence get it. A TCP socket's next
    // connect() is the kernel's own answer.
    if (fd_table().has_conn(fd) || pending) fd_table().add_flags(fd, smcr::preload::kFdConnectUnreported);
    errno = EINPROGRESS;
    return -1;
  }
  return 0;
}

int listen(int fd, int backlog) {
  REAL(listen);
  if (refuse_own_fd(fd)) return -1;
  if (fd_table().kind(fd) == smcr::preload::kFdTcp) {
    sockaddr_storage local{};
    socklen_t llen = sizeof local;
    bool maybe = smcr::sys::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &llen) != 0 ||
                 policy_allows(port_of(reinterpret_cast<sockaddr*>(&local)), nullptr);
    if (!maybe) {
      fd_table().set_kind(fd, smcr::preload::kFdPolicyListener);
      return real_listen(fd, backlog);
    }
    bool opted = smcr::bpfopt::opt_in(fd);
    uint8_t defaults = fd_table().flags(fd) & smcr::preload::kFdDefaultOptions;
    fd_table().set_kind(fd, opted ? smcr::preload::kFdSmcListener : smcr::preload::kFdListenerNoBpf);
    fd_table().add_flags(fd, defaults);
    // The port's offer count may hold earlier listeners' SYN-ACKs (a server
    // restarted on its port): this listener's baseline is taken before it
    // can have any of its own. A socket bound to port 0 gets its port from
    // listen(): nobody can have learnt it before listen() returns, so the
    // baseline is taken just after.
    uint32_t slot = opted ? smcr::bpfopt::offer_slot(port_of(reinterpret_cast<sockaddr*>(&local))) : 0;
    uint64_t baseline = smcr::bpfopt::offers_counted(slot);
    int rc = real_listen(fd, backlog);
    // Asked again: listen() binds an unbound socket to a port of its own.
    llen = sizeof local;
    if (rc == 0 && opted && smcr::sys::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &llen) == 0) {
      smcr::preload::own::listening(fd, local);
      if (!slot) {
        slot = smcr::bpfopt::offer_slot(port_of(reinterpret_cast<sockaddr*>(&local)));
        baseline = smcr::bpfopt::offers_counted(slot);
      }
      fd_table().set_offers(fd, slot, baseline);
    }
    return rc;
  }
  return real_listen(fd, backlog);
}

int accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  REAL(accept4);
  if (refuse_own_fd(fd)) return -1;
  int nfd;
  {
    smcr::preload::own::Serving serving;
    serving.listener(fd);
    nfd = real_accept4(fd, addr, len, flags);
  }
  if (nfd < 0) return nfd;
  forget_stale_number(nfd);
  uint8_t kind = fd_table().kind(fd);
  if (kind == smcr::preload::kFdListenerNoBpf) smcr::count_fallback(smcr::Fallback::kBpfNotLoaded);
  if (kind == smcr::preload::kFdPolicyListener) smcr::count_fallback(smcr::Fallback::kPolicy);
  if (kind != smcr::preload::kFdSmcListener) return nfd;
  fd_table().set_kind(nfd, smcr::preload::kFdTcp);
  // As in the kernel, an accepted socket has its listener's buffer sizes
  // (and its other options).
  fd_table().set_buffers(nfd, fd_table().buffers(fd));
  fd_table().add_flags(nfd, fd_table().flags(fd) & smcr::preload::kFdDefaultOptions);
  // Rules about peer addresses are decided now (the listener could not);
  // without a policy there is nothing to look up.
  sockaddr_storage local{}, peer{};
  socklen_t ll = sizeof local, pl = sizeof peer;
  bool allowed = !smcr::policy::active() ||
                 smcr::sys::getsockname(nfd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
                 smcr::sys::getpeername(nfd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0 ||
                 policy_allows(port_of(reinterpret_cast<sockaddr*>(&local)), reinterpret_cast<sockaddr*>(&peer));
  // a server's never fails: see kTerminate
  after_tcp_established(nfd, fd, allowed, 0, flags & (SOCK_NONBLOCK | SOCK_CLOEXEC));
  if (!fd_table().has_conn(nfd)) smcr::preload::epoll_settled(nfd);
  return nfd;
}

int accept(int fd, struct sockaddr* addr, socklen_t* len) { return accept4(fd, addr, len, 0); }

int close(int fd) {
  REAL(close);
  return close_number(fd, real_close);
}

int shutdown(int fd, int how) {
  REAL(shutdown);
  if (refuse_own_fd(fd)) return -1;
  if (fd_table().kind(fd) == smcr::preload::kFdAccepting && !fd_table().has_conn(fd) &&
      smcr::preload::accepting_shutdown(fd, how))
    return 0;
  ConnRef c(fd, kNotIo, true);
  if (!c) return real_shutdown(fd, how);
  return c->shutdown(how);
}

#pragma GCC visibility pop
}  // extern "C"
