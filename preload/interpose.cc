// The LD_PRELOAD shim: libc's socket calls, interposed. A TCP socket that
// both ends opted in to SMC-R (the eBPF option in SYN and SYN-ACK) runs the
// CLC handshake inside connect()/accept() and then has its fd number taken
// over by the engine's readiness socket (see core/connection.h); every other
// fd goes straight to libc after one fd-table lookup.
//
// Engine I/O never calls these exported symbols (core/sys.h uses raw
// syscalls), so the shim cannot recurse into itself.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <spawn.h>
#include <linux/sockios.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "bpf/option.h"
#include "core/connection.h"
#include "core/handoff.h"
#include "core/engine.h"
#include "core/env.h"
#include "core/handshake.h"
#include "core/link_group.h"
#include "core/log.h"
#include "core/policy.h"
#include "core/short_flows.h"
#include "core/sys.h"
#include "core/threads.h"
#include "preload/epoll.h"
#include "preload/exec_carry.h"
#include "preload/exec_inherit.h"
#include "preload/fd_table.h"
#include "preload/late_connect.h"
#include "preload/own_listeners.h"
#include "preload/takeover.h"

using smcr::Connection;
using smcr::preload::FdTable;

namespace smcr::preload {

FdTable& fd_table() {
  static FdTable* t = new FdTable();
  return *t;
}

}  // namespace smcr::preload

namespace {

using smcr::preload::fd_table;
using smcr::preload::Reserved;
using smcr::preload::install;
using smcr::preload::kNotIo;

template <typename F>
F resolve(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p) {
    static const char msg[] = "smcr: cannot resolve libc symbol\n";
    smcr::sys::write(2, msg, sizeof msg - 1);
    abort();
  }
  return reinterpret_cast<F>(p);
}

// libc's own entry points, resolved once at load time (a constructor) so that
// no interposed call made later, e.g. from a signal handler, runs dlsym or a
// static-initialisation guard. A call that arrives before the constructor
// (another library's constructor) resolves lazily.
#define SMCR_INTERPOSED(X)                                                                     \
  X(socket) X(connect) X(listen) X(accept4) X(close) X(shutdown) X(read) X(write) X(readv)      \
  X(writev) X(recv) X(send) X(recvfrom) X(sendto) X(recvmsg) X(sendmsg) X(fcntl) X(ioctl)      \
  X(setsockopt) X(getsockopt) X(getsockname) X(getpeername) X(dup) X(dup3) X(sendfile) X(splice)      \
  X(recvmmsg) X(sendmmsg) X(execve) X(execvpe) X(fexecve) X(epoll_ctl) X(epoll_pwait) \
  X(poll) X(ppoll) X(select) X(pselect) X(fdopen) X(vdprintf) X(fork) X(posix_spawn) X(posix_spawnp) \
  X(system) X(popen)

// libc marks some of these with attributes (nonnull, warn_unused_result) that
// do not belong to the pointer type; that is fine here.
#pragma GCC diagnostic ignored "-Wignored-attributes"
struct RealFunctions {
#define SMCR_DECLARE(name) std::atomic<decltype(&::name)> name{nullptr};
  SMCR_INTERPOSED(SMCR_DECLARE)
#undef SMCR_DECLARE
};
RealFunctions g_real;

template <typename F>
F real_function(std::atomic<F>& slot, const char* name) {
  F f = slot.load(std::memory_order_relaxed);
  if (!f) {
    f = resolve<F>(name);
    slot.store(f, std::memory_order_relaxed);
  }
  return f;
}

// This process's pid, kept across fork(): a vfork()/posix_spawn child runs
// in its parent's memory (counters included) until it execs or exits, and
// must not write them as its own (see _exit).
std::atomic<pid_t> g_own_pid{0};
void note_own_pid() {
  g_own_pid.store(static_cast<pid_t>(::syscall(SYS_getpid)), std::memory_order_relaxed);
  static const int atfork = pthread_atfork(nullptr, nullptr, [] {
    g_own_pid.store(static_cast<pid_t>(::syscall(SYS_getpid)), std::memory_order_relaxed);
  });
  (void)atfork;
}

// A vfork() child (CPython's subprocess, for one) runs in this process's
// memory, the fd table included, but has descriptors of its own: what it
// closes or duplicates changes only its numbers, so it must leave the table
// alone (a close through the table would end the parent's connection, a
// dup2 onto 0 would make the parent's stdin that connection). Asked only
// where the table has something for the numbers: a plain socket's close
// costs no system call.
bool in_vfork_child() {
  return static_cast<pid_t>(::syscall(SYS_getpid)) != g_own_pid.load(std::memory_order_relaxed);
}
bool table_knows(int fd) {
  return fd_table().has_conn(fd) || fd_table().kind(fd) != smcr::preload::kFdUnknown;
}

__attribute__((constructor(101))) void resolve_all() {
  smcr::threads::install_fork_gate();  // first: see its comment
  smcr::snapshot_env();  // before the program can clear its environment
  smcr::preload::exec_inherit::adopt_from_environment();
  smcr::preload::exec_carry::adopt_from_environment();
  smcr::preload::exec_inherit::take_from_environment();
  // A policy that does not parse: refuse to run rather than guess (smc_run
  // checks this before starting the program).
  std::string policy_error;
  if (!smcr::policy::active(&policy_error) && !policy_error.empty()) {
    std::string msg = "smcr: policy: " + policy_error + "\n";
    smcr::sys::write(2, msg.data(), msg.size());
    _exit(2);
  }
#define SMCR_RESOLVE(name) real_function(g_real.name, #name);
  SMCR_INTERPOSED(SMCR_RESOLVE)
#undef SMCR_RESOLVE
  note_own_pid();
  // The two cached map descriptors sat at the application's lowest free
  // numbers: its next socket got 5 where TCP's got 4.
  smcr::bpfopt::set_fd_placer(smcr::sys::hide_fd);
  smcr::stats_enabled();  // its one-time lookup done now, not in an _exit
}

#define REAL(name) const auto real_##name = real_function(g_real.name, #name)

bool enabled() {
  static const bool on = [] {
    const char* v = smcr::env("SMCR_ENABLE");
    return !(v && strcmp(v, "0") == 0);
  }();
  return on;
}

// The fd whose client handshake this thread runs inside connect() (-1):
// a signal handler that reads it must not wait for its own thread.
thread_local int t_inline_clc_fd = -1;

// Waits while another thread's connect() runs `fd`'s client CLC inline
// (kFdClcInline): read there, the TCP socket would hand the application
// the server's Accept, or a blocking read would sleep on a socket that the
// takeover then moves away from the number. The wait is the rest of a
// handshake whose server has answered (connect() waits inline only then),
// bounded by the CLC timeout.
void await_inline_clc(int fd) {
  if (fd == t_inline_clc_fd) return;
  while (fd_table().flags(fd) & smcr::preload::kFdClcInline) {
    timespec pause{0, 50000};
    nanosleep(&pause, nullptr);
  }
  // Pairs with the release fence before connect() clears the flag: what the
  // handshake installed (the connection, the kind) is visible now.
  std::atomic_thread_fence(std::memory_order_acquire);
}

// Holds a referenced connection for the duration of one call. A connection
// inherited from the parent and handed over to us (core/handoff.h) is none:
// the descriptor is a plain stream socket now.
// `io_flags`: a data call's MSG_* flags (smcr::preload::await_accepting);
// such a call returns -1 at once when refuse() says so.
struct ConnRef {
  Connection* c;
  int refused = 0;
  // `claim`: a call that uses the connection's stream (every data call:
  // io_flags given) claims an inherited connection its owner has let go
  // of, and waits for it (core/handoff.h); others leave it where it is.
  explicit ConnRef(int fd, int io_flags = kNotIo, bool claim = false, bool write = false) : c(fd_table().get(fd)) {
    if (!c) {
      uint8_t kind = fd_table().kind(fd);
      if (kind == smcr::preload::kFdTcp && (fd_table().flags(fd) & smcr::preload::kFdClcInline)) {
        await_inline_clc(fd);
        c = fd_table().get(fd);
        kind = fd_table().kind(fd);
      }
      if (!c && kind == smcr::preload::kFdAccepting)
        c = smcr::preload::await_accepting(fd, io_flags, &refused, write);
      else if (!c && kind == smcr::preload::kFdLateConnect) smcr::preload::late::settle(fd);
    }
    if (c && c->foreign()) {
      bool uses_stream = claim || io_flags != kNotIo;
      // Handed over (a stream now), or not ours and not claimed: the call
      // acts on the descriptor as the kernel sees it. A data call keeps a
      // connection it could not claim, and fails as such (EOPNOTSUPP).
      if (c->handed_over(uses_stream) || (!uses_stream && c->foreign())) {
        c->unref();
        c = nullptr;
      }
    }
  }
  ~ConnRef() {
    if (c) c->unref();
  }
  explicit operator bool() const { return c != nullptr; }
  Connection* operator->() const { return c; }
  bool refuse() const {
    if (!refused) return false;
    errno = refused;
    return true;
  }
};

// What a duplicate of `fd` refers to: its connection, also one inherited
// from the parent, handed over or not (the duplicate stays one of its
// descriptors: an exec inherits it with its TCP socket, preload/
// exec_inherit.h, or waits for its relay), else what ConnRef finds.
struct DupRef : ConnRef {
  explicit DupRef(int fd) : ConnRef(fd) {
    if (!c && fd_table().has_conn(fd)) c = fd_table().get(fd);
  }
};

// `fd`, a duplicate just made, is one more descriptor of `c` (dup, dup3,
// F_DUPFD): the table takes a reference of its own.
void share_connection(int fd, Connection* c) {
  c->ref();
  c->add_user_fd();
  if (Connection* old = fd_table().set(fd, c)) old->unref();
}

// `to`, a duplicate just made of `from` (no connection there), names the
// same socket: what the table knows of it goes with it. Without its kind a
// TCP socket connected through the duplicate never tried SMC-R.
void copy_fd_entry(int from, int to) {
  fd_table().set_kind(to, fd_table().kind(from));
  fd_table().set_buffers(to, fd_table().buffers(from));
  fd_table().add_flags(to, fd_table().flags(from) & smcr::preload::kFdDefaultOptions);
}

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
    smcr::sys::dup3(fresh, fd, (fdflags & FD_CLOEXEC) ? O_CLOEXEC : 0);
    smcr::sys::close(fresh);
  } else {
    smcr::sys::shutdown(fd, SHUT_RDWR);
  }
}

// The TCP socket of a connection this process inherited from its parent
// (fork), or -1.
int inherited_tcp_fd(int fd) {
  if (!fd_table().has_conn(fd)) {  // or an accept relayed after a late fallback, or inherited across exec
    uint8_t kind = fd_table().kind(fd);
    if (kind == smcr::preload::kFdAccepting) return smcr::preload::accepting_tcp_fd(fd);
    return kind == smcr::preload::kFdExecInherited ? smcr::preload::exec_inherit::tcp_fd(fd) : -1;
  }
  Connection* c = fd_table().get(fd);
  if (!c) return -1;
  int tcp = c->foreign() ? c->tcp_fd() : -1;
  c->unref();
  return tcp;
}

// After the TCP handshake: SMC-R if both ends offered it. Returns 0 when the
// fd is usable (SMC-R or TCP), -1 with errno when the connection was reset.
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

// TCP options kept with an SMC-R connection instead of set on its TCP
// socket (Connection::tcp_flag).
bool is_kept_tcp_flag(int level, int name) { return level == IPPROTO_TCP && (name == TCP_CORK || name == TCP_NODELAY); }

bool is_buffer_option(int name) {
  return name == SO_RCVBUF || name == SO_RCVBUFFORCE || name == SO_SNDBUF || name == SO_SNDBUFFORCE;
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
  Result r = client ? smcr::bpfopt::read_result(fd) : smcr::bpfopt::read_accepted_result(listener, fd, kAcceptRecordWaitMs);
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

ssize_t smc_recv(Connection* c, void* buf, size_t len, int flags) {
  iovec iov{buf, len};
  return c->recvv(&iov, 1, flags);
}

ssize_t smc_send(Connection* c, const void* buf, size_t len, int flags) {
  iovec iov{const_cast<void*>(buf), len};
  return c->sendv(&iov, 1, flags);
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

// Descriptors sent to another process (SCM_RIGHTS) may be waited on there,
// past this process's epoll interposition; an SMC-R connection among them
// is left for the receiver to take over (a child of ours with the shim) or
// relayed first (the receiver gets its readiness socket, a plain stream
// from then on): preload/exec_inherit.h, relay_passed.
void fds_passed(int via, const struct msghdr* m) {
  for (cmsghdr* h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR(const_cast<msghdr*>(m), h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* data = CMSG_DATA(h);
    int passed[64];
    size_t smc = 0;
    for (size_t i = 0; i < n; ++i) {
      int fd;
      memcpy(&fd, data + i * sizeof(int), sizeof fd);
      smcr::preload::epoll_fd_polled(fd);
      if (fd_table().kind(fd) == smcr::preload::kFdAccepting) {  // its handshake ends first
        int ignored;
        if (Connection* c = smcr::preload::await_accepting(fd, smcr::preload::kNotIo, &ignored)) c->unref();
      }
      if (fd_table().has_conn(fd) && smc < std::size(passed)) passed[smc++] = fd;
    }
    if (smc > 0) smcr::preload::exec_inherit::relay_passed(passed, smc, via);
  }
}

// Descriptors received over SCM_RIGHTS: a stream another process relays for
// an SMC-R connection gets that connection's TCP socket to answer for it
// (preload/exec_inherit.h, adopt_received).
void fds_received(int via, const struct msghdr* m) {
  for (cmsghdr* h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR(const_cast<msghdr*>(m), h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* data = CMSG_DATA(h);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      memcpy(&fd, data + i * sizeof(int), sizeof fd);
      smcr::preload::exec_inherit::adopt_received(via, fd);
    }
  }
}

// A poll or select that starts while another thread's connect() runs the
// fd's client CLC inline would wait on the TCP socket, which the takeover
// then moves away from the number: the kernel would go on watching it (the
// peer's close seen only when the application closed its own end). Such a
// wait starts after the handshake, as a read does (ConnRef).
void await_inline_clc_before_wait(int fd) {
  if (fd_table().flags(fd) & smcr::preload::kFdClcInline) await_inline_clc(fd);
}

// poll() and select() wait for readability without asking epoll.
void before_poll(const struct pollfd* fds, nfds_t n) {
  for (nfds_t i = 0; i < n; ++i) {
    if (fds[i].fd < 0) continue;
    await_inline_clc_before_wait(fds[i].fd);
    if (fds[i].events & (POLLIN | POLLRDNORM)) smcr::preload::epoll_fd_polled(fds[i].fd);
  }
}

void before_select(int nfds, const fd_set* readfds, const fd_set* writefds) {
  if (!readfds && !writefds) return;
  for (int fd = 0; fd < nfds && fd < FD_SETSIZE; ++fd) {
    bool read = readfds && FD_ISSET(fd, readfds);
    if (read || (writefds && FD_ISSET(fd, writefds))) await_inline_clc_before_wait(fd);
    if (read) smcr::preload::epoll_fd_polled(fd);
  }
}

void flush_socket_streams_at_exit();

__attribute__((destructor)) void at_exit() {
  // exit() flushes stdio buffers only after the library destructors (this
  // one) have run: streams on SMC-R connections are flushed first, while
  // their connections are still open.
  flush_socket_streams_at_exit();
  smcr::preload::flush_relays_at_exit(2000);
  // Close open SMC-R connections as the kernel closes TCP sockets at exit,
  // so peers see EOF after the last byte rather than a reset.
  fd_table().for_each_conn([](int fd) {
    // Not ConnRef: a forked child must not wait for handovers at exit
    // (process_exit leaves inherited connections alone).
    if (Connection* c = fd_table().get(fd)) {
      c->process_exit();
      c->unref();
    }
  });
  // Connections a forked child still holds outlive us there.
  smcr::handoff::finish_offers_at_exit(1000);
  smcr::LinkGroup::farewell_at_exit(1000);
  smcr::write_stats_file();
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

extern "C" {
// The interposed libc entry points: the only symbols the shim exports
// (preload/exports.map; everything else is compiled hidden).
#pragma GCC visibility push(default)

int socket(int domain, int type, int protocol) {
  REAL(socket);
  int fd = real_socket(domain, type, protocol);
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
    int rc = real_listen(fd, backlog);
    if (rc == 0 && opted) smcr::preload::own::listening(fd);
    return rc;
  }
  return real_listen(fd, backlog);
}

int accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  REAL(accept4);
  int nfd;
  {
    smcr::preload::own::Serving serving;
    serving.listener(fd);
    nfd = real_accept4(fd, addr, len, flags);
  }
  if (nfd < 0) return nfd;
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
  if ((fd_table().has_conn(fd) || fd_table().kind(fd) == smcr::preload::kFdAccepting ||
       fd_table().kind(fd) == smcr::preload::kFdExecInherited) &&
      in_vfork_child())
    return real_close(fd);
  smcr::preload::epoll_forget_fd(fd);
  smcr::preload::epoll_settled(fd);
  smcr::preload::own::forget(fd);
  smcr::preload::late::forget(fd);
  smcr::preload::exec_inherit::forget(fd);
  if (fd_table().kind(fd) == smcr::preload::kFdAccepting && smcr::preload::close_accepting(fd, real_close)) return 0;
  if (Connection* c = fd_table().take(fd)) {
    fd_table().set_kind(fd, smcr::preload::kFdUnknown);
    close_smc_fd(fd, c, real_close);
    return 0;
  }
  if (fd_table().kind(fd) != smcr::preload::kFdUnknown) fd_table().set_kind(fd, smcr::preload::kFdUnknown);
  return real_close(fd);
}

int shutdown(int fd, int how) {
  REAL(shutdown);
  ConnRef c(fd, kNotIo, true);
  if (!c) return real_shutdown(fd, how);
  return c->shutdown(how);
}

ssize_t read(int fd, void* buf, size_t n) {
  REAL(read);
  ConnRef c(fd, 0);
  if (c.refuse()) return -1;
  if (!c) return real_read(fd, buf, n);
  return smc_recv(c.c, buf, n, 0);
}

ssize_t write(int fd, const void* buf, size_t n) {
  REAL(write);
  ConnRef c(fd, 0, false, true);
  if (c.refuse()) return -1;
  if (!c) return real_write(fd, buf, n);
  return smc_send(c.c, buf, n, 0);
}

ssize_t readv(int fd, const struct iovec* iov, int cnt) {
  REAL(readv);
  ConnRef c(fd, 0);
  if (c.refuse()) return -1;
  if (!c) return real_readv(fd, iov, cnt);
  if (cnt < 0 || cnt > IOV_MAX) {
    errno = EINVAL;
    return -1;
  }
  return c->recvv(iov, cnt, 0);
}

ssize_t writev(int fd, const struct iovec* iov, int cnt) {
  REAL(writev);
  ConnRef c(fd, 0, false, true);
  if (c.refuse()) return -1;
  if (!c) return real_writev(fd, iov, cnt);
  if (cnt < 0 || cnt > IOV_MAX) {
    errno = EINVAL;
    return -1;
  }
  return c->sendv(iov, cnt, 0);
}

ssize_t recv(int fd, void* buf, size_t n, int flags) {
  REAL(recv);
  ConnRef c(fd, flags);
  if (c.refuse()) return -1;
  if (!c) return real_recv(fd, buf, n, flags);
  return smc_recv(c.c, buf, n, flags);
}

ssize_t send(int fd, const void* buf, size_t n, int flags) {
  REAL(send);
  ConnRef c(fd, flags, false, true);
  if (c.refuse()) return -1;
  if (!c) return real_send(fd, buf, n, flags);
  return smc_send(c.c, buf, n, flags);
}

ssize_t recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* addr, socklen_t* alen) {
  REAL(recvfrom);
  ConnRef c(fd, flags);
  if (c.refuse()) return -1;
  if (!c) return real_recvfrom(fd, buf, n, flags, addr, alen);
  ssize_t r = smc_recv(c.c, buf, n, flags);
  if (r >= 0 && alen) *alen = 0;  // TCP reports no source address
  return r;
}

ssize_t sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* addr, socklen_t alen) {
  REAL(sendto);
  ConnRef c(fd, flags, false, true);
  if (c.refuse()) return -1;
  if (!c) return real_sendto(fd, buf, n, flags, addr, alen);
  return smc_send(c.c, buf, n, flags);  // a connected TCP socket ignores the address
}

ssize_t recvmsg(int fd, struct msghdr* m, int flags) {
  REAL(recvmsg);
  ConnRef c(fd, flags);
  if (c.refuse()) return -1;
  if (!c) {
    ssize_t r = real_recvmsg(fd, m, flags);
    if (r >= 0 && m && m->msg_controllen) fds_received(fd, m);
    return r;
  }
  if (m->msg_iovlen > IOV_MAX) {
    errno = EMSGSIZE;
    return -1;
  }
  ssize_t r = c->recvv(m->msg_iov, static_cast<int>(m->msg_iovlen), flags);
  if (r >= 0) {
    m->msg_namelen = 0;
    m->msg_controllen = 0;
    m->msg_flags = 0;
  }
  return r;
}

ssize_t sendmsg(int fd, const struct msghdr* m, int flags) {
  REAL(sendmsg);
  if (m && m->msg_controllen) fds_passed(fd, m);
  ConnRef c(fd, flags, false, true);
  if (c.refuse()) return -1;
  if (!c) return real_sendmsg(fd, m, flags);
  if (m->msg_iovlen > IOV_MAX) {
    errno = EMSGSIZE;
    return -1;
  }
  return c->sendv(m->msg_iov, static_cast<int>(m->msg_iovlen), flags);
}

int fcntl(int fd, int cmd, ...) {
  REAL(fcntl);
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  // The status and descriptor flags of a number whose handshake still runs
  // are the readiness socket's (the connection takes O_NONBLOCK from it
  // when it is installed): no reason to wait for a server's accept().
  if (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC && !fd_table().has_conn(fd) &&
      fd_table().kind(fd) == smcr::preload::kFdAccepting)
    return real_fcntl(fd, cmd, arg);
  if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
    if (table_knows(fd) && in_vfork_child()) return real_fcntl(fd, cmd, arg);
    DupRef c(fd);
    int rc = real_fcntl(fd, cmd, arg);
    if (rc < 0) return rc;
    if (c) share_connection(rc, c.c);
    else copy_fd_entry(fd, rc);
    smcr::preload::exec_inherit::duplicated(fd, rc);
    return rc;
  }
  ConnRef c(fd);
  if (!c) return real_fcntl(fd, cmd, arg);
  int rc = real_fcntl(fd, cmd, arg);
  if (rc < 0) return rc;
  if (cmd == F_SETFL) c->set_nonblocking(reinterpret_cast<intptr_t>(arg) & O_NONBLOCK);
  // Signal-driven I/O waits for readiness without asking epoll.
  if (cmd == F_SETFL && (reinterpret_cast<intptr_t>(arg) & O_ASYNC)) c->forbid_deferral();
  return rc;
}

// Programs built with _FILE_OFFSET_BITS=64 (redis, nginx and most of Debian)
// call fcntl64; without this their O_NONBLOCK never reached the connection.
// On 64-bit systems the two take the same arguments.
int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return fcntl(fd, cmd, arg);
}

int ioctl(int fd, unsigned long req, ...) {
  REAL(ioctl);
  va_list ap;
  va_start(ap, req);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  ConnRef c(fd);
  if (!c) return real_ioctl(fd, req, arg);
  switch (req) {
    // Properties of the descriptor or its file, not of the TCP connection:
    // they belong to the fd number the application holds.
    case FIOCLEX:
    case FIONCLEX:
    case FIOASYNC:
    case FIOSETOWN:
    case FIOGETOWN:
    case SIOCSPGRP:
    case SIOCGPGRP:
      return real_ioctl(fd, req, arg);
    case FIONBIO: {
      int rc = real_ioctl(fd, req, arg);
      if (rc == 0 && arg) c->set_nonblocking(*static_cast<int*>(arg) != 0);
      return rc;
    }
    case FIONREAD:  // == SIOCINQ
      if (!arg) {
        errno = EFAULT;
        return -1;
      }
      *static_cast<int*>(arg) = static_cast<int>(c->bytes_readable());
      return 0;
    case SIOCATMARK:
      if (!arg) {
        errno = EFAULT;
        return -1;
      }
      *static_cast<int*>(arg) = c->at_urgent_mark() ? 1 : 0;
      return 0;
    case SIOCOUTQ:
    case SIOCOUTQNSD:
      if (!arg) {
        errno = EFAULT;
        return -1;
      }
      *static_cast<int*>(arg) = static_cast<int>(c->bytes_unsent());
      return 0;
    default:
      return real_ioctl(c->tcp_fd(), req, arg);
  }
}

int setsockopt(int fd, int level, int name, const void* val, socklen_t len) {
  REAL(setsockopt);
  if (level == SOL_SOCKET && (name == SO_LINGER || name == SO_OOBINLINE || name == SO_RCVTIMEO || name == SO_SNDTIMEO ||
                              name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_NEW))
    fd_table().clear_flags(fd, smcr::preload::kFdDefaultOptions);
  // Still accepting (or relayed): options are the TCP socket's, set with
  // the handshake held (a linger set while it ends would otherwise be lost).
  if (int rc; fd_table().kind(fd) == smcr::preload::kFdAccepting && !fd_table().has_conn(fd) &&
              smcr::preload::accepting_setsockopt(fd, level, name, val, len, real_setsockopt, &rc))
    return rc;
  // Inherited from the parent (handed over or not): options are the TCP
  // socket's (TCP_NODELAY on the relayed stream socket would fail).
  if (int tcp = inherited_tcp_fd(fd); tcp >= 0) return real_setsockopt(tcp, level, name, val, len);
  ConnRef c(fd);
  if (!c) {
    int rc = real_setsockopt(fd, level, name, val, len);
    if (rc == 0 && level == SOL_SOCKET && is_buffer_option(name) && fd_table().kind(fd) != smcr::preload::kFdUnknown) {
      // Before the connection exists: SO_RCVBUF sizes its RMB, SO_SNDBUF
      // caps its send window (what the kernel granted, not what was asked).
      smcr::preload::FdTable::BufferRequest b = fd_table().buffers(fd);
      (name == SO_RCVBUF || name == SO_RCVBUFFORCE ? b.rcvbuf : b.sndbuf) = smcr::preload::granted_buffer(fd, name);
      fd_table().set_buffers(fd, b);
    }
    return rc;
  }
  if (is_kept_tcp_flag(level, name) && val && len >= sizeof(int)) {
    int v;
    memcpy(&v, val, sizeof v);
    c->tcp_flag(name == TCP_CORK).store(v != 0, std::memory_order_relaxed);
    return 0;
  }
  int rc = real_setsockopt(c->tcp_fd(), level, name, val, len);
  if (rc != 0 || level != SOL_SOCKET) return rc;
  // An RMB keeps its size for the connection's life (it would take a new
  // RMB and CONFIRM RKEY); the send window follows SO_SNDBUF at once.
  if (name == SO_SNDBUF || name == SO_SNDBUFFORCE) c->set_send_limit(smcr::preload::granted_buffer(c->tcp_fd(), name));
  if ((name == SO_RCVTIMEO || name == SO_SNDTIMEO) && len >= sizeof(timeval)) {
    const timeval* tv = static_cast<const timeval*>(val);
    long ms = tv->tv_sec * 1000 + tv->tv_usec / 1000;
    c->set_timeout(name == SO_RCVTIMEO, ms > 0 ? static_cast<int>(ms) : -1);
  } else if (name == SO_OOBINLINE && len >= sizeof(int)) {
    c->set_oob_inline(*static_cast<const int*>(val) != 0);
  } else if (name == SO_LINGER && len >= sizeof(linger)) {
    const linger* l = static_cast<const linger*>(val);
    c->set_linger_abort(l->l_onoff && l->l_linger == 0);
  }
  return rc;
}

int getsockopt(int fd, int level, int name, void* val, socklen_t* len) {
  REAL(getsockopt);
  if (int tcp = inherited_tcp_fd(fd); tcp >= 0) return real_getsockopt(tcp, level, name, val, len);
  ConnRef c(fd);
  if (!c) return real_getsockopt(fd, level, name, val, len);
  if (is_kept_tcp_flag(level, name) && val && len && *len >= sizeof(int))
    if (int8_t v = c->tcp_flag(name == TCP_CORK).load(std::memory_order_relaxed); v >= 0) {
      int out = v;
      memcpy(val, &out, sizeof out);
      *len = sizeof out;
      return 0;
    }
  int rc = real_getsockopt(c->tcp_fd(), level, name, val, len);
  if (rc == 0 && level == SOL_SOCKET && name == SO_ERROR && val && len && *len >= sizeof(int)) {
    // One pending error, reported once by whichever of recv, send and
    // SO_ERROR comes first, as TCP's (the reading above cleared the TCP
    // socket's own).
    int tcp_error = 0;
    memcpy(&tcp_error, val, sizeof tcp_error);
    int e = c->take_socket_error(tcp_error);
    memcpy(val, &e, sizeof e);
  }
  if (rc == 0 && level == SOL_SOCKET && (name == SO_RCVBUF || name == SO_SNDBUF) && val && len) {
    // The buffers that really hold this connection's bytes: our RMB and the
    // send window in the peer's, doubled as the kernel reports buffers.
    int v = static_cast<int>(name == SO_RCVBUF ? c->reported_rcvbuf() : c->reported_sndbuf());
    memcpy(val, &v, std::min<size_t>(*len, sizeof v));
  }
  return rc;
}

// Addresses come from the TCP socket, for a connection handed over from the
// parent too (its relayed stream socket has AF_UNIX addresses).
static int tcp_fd_for_addresses(int fd) {
  Connection* c = fd_table().get(fd);  // no handover wait: the TCP socket's either way
  if (!c && fd_table().kind(fd) == smcr::preload::kFdExecInherited) {
    int tcp = smcr::preload::exec_inherit::tcp_fd(fd);
    return tcp >= 0 ? tcp : fd;
  }
  if (!c && fd_table().kind(fd) == smcr::preload::kFdAccepting) {
    // Still in its handshake, or relayed: the TCP socket's, without waiting.
    if (int tcp = smcr::preload::accepting_tcp_fd(fd); tcp >= 0) return tcp;
    int ignored;
    c = smcr::preload::await_accepting(fd, kNotIo, &ignored);
    if (!c) {  // relayed after a late fallback, or failed
      int tcp = smcr::preload::relayed_tcp_fd(fd);
      return tcp >= 0 ? tcp : fd;
    }
  }
  if (!c) return fd;
  int tcp = c->tcp_fd();
  c->unref();
  return tcp >= 0 ? tcp : fd;
}

int getsockname(int fd, struct sockaddr* addr, socklen_t* len) {
  REAL(getsockname);
  return real_getsockname(tcp_fd_for_addresses(fd), addr, len);
}

int getpeername(int fd, struct sockaddr* addr, socklen_t* len) {
  REAL(getpeername);
  return real_getpeername(tcp_fd_for_addresses(fd), addr, len);
}

int dup(int fd) {
  REAL(dup);
  if (table_knows(fd) && in_vfork_child()) return real_dup(fd);
  int rc = real_dup(fd);
  DupRef c(fd);
  if (c && rc >= 0) share_connection(rc, c.c);
  else if (rc >= 0) copy_fd_entry(fd, rc);
  if (rc >= 0) smcr::preload::exec_inherit::duplicated(fd, rc);
  return rc;
}

int dup3(int oldfd, int newfd, int flags) {
  REAL(dup3);
  if (oldfd == newfd) {
    errno = EINVAL;
    return -1;
  }
  if ((table_knows(oldfd) || table_knows(newfd)) && in_vfork_child()) return real_dup3(oldfd, newfd, flags);
  DupRef c(oldfd);
  smcr::preload::epoll_forget_fd(newfd);
  smcr::preload::epoll_settled(newfd);
  smcr::preload::own::forget(newfd);
  smcr::preload::late::forget(newfd);
  smcr::preload::exec_inherit::forget(newfd);
  // dup2/dup3 over an SMC-R fd closes that connection's fd first.
  if (fd_table().kind(newfd) == smcr::preload::kFdAccepting)
    smcr::preload::close_accepting(newfd, [](int) { return 0; });  // dup3 below replaces it
  if (Connection* victim = fd_table().take(newfd)) {
    fd_table().set_kind(newfd, smcr::preload::kFdUnknown);
    if (victim->foreign()) {
      // Inherited: the owner's connection lives on (see close_smc_fd).
      if (victim->drop_user_fd()) victim->forget_in_child();
    } else if (victim->drop_user_fd()) {
      victim->app_close(false);
    } else {
      victim->unref();
    }
  }
  int rc = real_dup3(oldfd, newfd, flags);
  if (rc >= 0 && c) share_connection(rc, c.c);
  else if (rc >= 0) copy_fd_entry(oldfd, rc);
  if (rc >= 0) smcr::preload::exec_inherit::duplicated(oldfd, rc);
  return rc;
}

// --- glibc _FORTIFY_SOURCE entry points. A fortified program calls these
// instead of read/recv/recvfrom when the buffer size is known at compile
// time (Debian builds its packages that way); glibc's own versions go
// straight to the system call, past this shim. Same check, then the
// interposed call.
extern void __chk_fail(void) __attribute__((__noreturn__));

ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  if (n > buflen) __chk_fail();
  return read(fd, buf, n);
}

ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
  if (n > buflen) __chk_fail();
  return recv(fd, buf, n, flags);
}

ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags, struct sockaddr* addr,
                       socklen_t* alen) {
  if (n > buflen) __chk_fail();
  return recvfrom(fd, buf, n, flags, addr, alen);
}

// --- Zero-copy calls. The kernel would move the bytes into the readiness
// socket that sits at an SMC-R fd number, so they are done here by copying:
// never more is taken from the source than the connection accepts, so
// nothing is lost when a non-blocking send stops short.
namespace {
constexpr size_t kCopyChunk = 32 * 1024;
}

ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t count) {
  REAL(sendfile);
  ConnRef in(in_fd);
  if (in) {  // as for TCP: a socket cannot be sendfile's source
    errno = EINVAL;
    return -1;
  }
  ConnRef c(out_fd, 0, false, true);
  if (c.refuse()) return -1;
  if (!c) return real_sendfile(out_fd, in_fd, offset, count);
  char buf[kCopyChunk];
  size_t done = 0;
  off_t pos = offset ? *offset : 0;
  while (done < count) {
    size_t want = std::min(count - done, sizeof buf);
    // A non-blocking socket takes what fits now; read no more than that.
    if (uint32_t room = c->bytes_writable(); room > 0) want = std::min<size_t>(want, room);
    ssize_t n = offset ? ::pread(in_fd, buf, want, pos) : smcr::sys::read(in_fd, buf, want);
    if (n <= 0) {
      if (n < 0 && done == 0) return -1;
      break;
    }
    ssize_t s = smc_send(c.c, buf, static_cast<size_t>(n), 0);
    size_t sent = s > 0 ? static_cast<size_t>(s) : 0;
    // Bytes read but not sent go back to the file position.
    if (sent < static_cast<size_t>(n) && !offset) ::lseek(in_fd, -static_cast<off_t>(static_cast<size_t>(n) - sent), SEEK_CUR);
    done += sent;
    pos += static_cast<off_t>(sent);
    if (s < 0) {
      if (done == 0) return -1;
      break;
    }
    if (sent < static_cast<size_t>(n)) break;
  }
  if (offset) *offset = pos;
  return static_cast<ssize_t>(done);
}

ssize_t sendfile64(int out_fd, int in_fd, off64_t* offset, size_t count) {
  static_assert(sizeof(off_t) == sizeof(off64_t), "64-bit off_t");
  return sendfile(out_fd, in_fd, reinterpret_cast<off_t*>(offset), count);
}

ssize_t splice(int fd_in, loff_t* off_in, int fd_out, loff_t* off_out, size_t len, unsigned int flags) {
  REAL(splice);
  int io = (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0;
  ConnRef in(fd_in, io), out(fd_out, io);
  if (in.refuse() || out.refuse()) return -1;
  if (!in && !out) return real_splice(fd_in, off_in, fd_out, off_out, len, flags);
  if (in && out) {  // one end must be a pipe
    errno = EINVAL;
    return -1;
  }
  // As the kernel: an offset on the pipe side is ESPIPE, on the socket EINVAL.
  if ((in && off_out) || (out && off_in)) {
    errno = ESPIPE;
    return -1;
  }
  if ((in && off_in) || (out && off_out)) {
    errno = EINVAL;
    return -1;
  }
  if (len == 0) return 0;
  char buf[kCopyChunk];
  size_t want = std::min(len, sizeof buf);
  int pipe_flags = smcr::sys::fcntl(out ? fd_in : fd_out, F_GETFL);
  if (pipe_flags < 0) return -1;
  if (flags & SPLICE_F_NONBLOCK) smcr::sys::fcntl(out ? fd_in : fd_out, F_SETFL, pipe_flags | O_NONBLOCK);
  ssize_t result;
  if (out) {
    // pipe -> SMC-R: take from the pipe only what the connection accepts
    // now (a blocking one waits for room first, as the kernel would).
    if (uint32_t room = out->bytes_writable(); room > 0) want = std::min<size_t>(want, room);
    ssize_t n = smcr::sys::read(fd_in, buf, want);
    result = n <= 0 ? n : smc_send(out.c, buf, static_cast<size_t>(n), 0);
  } else {
    // SMC-R -> pipe: look, move what the pipe takes, consume only that.
    ssize_t n = smc_recv(in.c, buf, want, MSG_PEEK);
    result = n;
    if (n > 0) {
      ssize_t w = smcr::sys::write(fd_out, buf, static_cast<size_t>(n));
      result = w;
      if (w > 0) smc_recv(in.c, buf, static_cast<size_t>(w), MSG_DONTWAIT);
    }
  }
  int saved = errno;
  if (flags & SPLICE_F_NONBLOCK) smcr::sys::fcntl(out ? fd_in : fd_out, F_SETFL, pipe_flags);
  errno = saved;
  return result;
}

int recvmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen, int flags, struct timespec* timeout) {
  REAL(recvmmsg);
  ConnRef c(fd, flags);
  if (c.refuse()) return -1;
  if (!c) {
    int r = real_recvmmsg(fd, msgs, vlen, flags, timeout);
    for (int i = 0; i < r; ++i)
      if (msgs[i].msg_hdr.msg_controllen) fds_received(fd, &msgs[i].msg_hdr);
    return r;
  }
  // A stream socket fills one message after the other, as the kernel does
  // for TCP (the timeout is checked only between messages there too).
  unsigned int got = 0;
  for (; got < vlen; ++got) {
    int f = flags & ~MSG_WAITFORONE;
    if (got > 0 && (flags & MSG_WAITFORONE)) f |= MSG_DONTWAIT;
    ssize_t r = recvmsg(fd, &msgs[got].msg_hdr, f);
    if (r < 0) {
      if (got == 0) return -1;
      break;
    }
    msgs[got].msg_len = static_cast<unsigned int>(r);
  }
  return static_cast<int>(got);
}

int sendmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen, int flags) {
  REAL(sendmmsg);
  for (unsigned int i = 0; msgs && i < vlen; ++i)
    if (msgs[i].msg_hdr.msg_controllen) fds_passed(fd, &msgs[i].msg_hdr);
  ConnRef c(fd, flags, false, true);
  if (c.refuse()) return -1;
  if (!c) return real_sendmmsg(fd, msgs, vlen, flags);
  unsigned int sent = 0;
  for (; sent < vlen; ++sent) {
    ssize_t r = sendmsg(fd, &msgs[sent].msg_hdr, flags);
    if (r < 0) {
      if (sent == 0) return -1;
      break;
    }
    msgs[sent].msg_len = static_cast<unsigned int>(r);
  }
  return static_cast<int>(sent);
}

// --- exec. A connection handed over from the parent (core/handoff.h) is a
// plain stream socket the new program can use as it is (inetd-style servers
// dup it onto 0 and 1 and exec). One the parent still holds would carry its
// readiness bytes, never data, so before an exec the descriptors that survive
// it wait for the handover; if it does not come they are replaced by a
// socket that reads end-of-file, rather than handing the new program bytes
// that are not the peer's.
#pragma GCC visibility pop
}  // extern "C"

// C++ helpers of the exec family (C++ linkage, not exported).
namespace {
// Returns the environment to exec with: `envp`, or a copy naming the TCP
// sockets of handed-over connections that survive the exec
// (preload/exec_inherit.h), which `env` keeps.
// The program: `file` (found on PATH when `search_path`), or `fd`.
char* const* prepare_exec(const char* file, bool search_path, int fd_of_program, char* const envp[],
                          smcr::preload::exec_inherit::ExecEnvironment* env) {
  smcr::preload::settle_all_accepting();
  std::vector<std::pair<int, int>> handed_over;
  smcr::preload::exec_inherit::surviving(&handed_over);
  // A vfork() child shares its parent's memory: it carries nothing. Nor
  // does a program that will not load the shim (it would hold descriptors
  // it cannot use): a relay serves it.
  bool vfork_child = in_vfork_child();
  bool may_carry = smcr::preload::exec_carry::enabled() && !vfork_child;
  // What a vfork child keeps, its parent relays (it cannot: its threads end
  // with the exec).
  if (vfork_child) {
    bool any = false;
    fd_table().for_each_conn([&](int) { any = true; });
    using smcr::preload::exec_carry::NewProgram;
    NewProgram program =
        any ? smcr::preload::exec_carry::new_program(file, search_path, fd_of_program, envp) : NewProgram::kMissing;
    // An exec that will fail (CPython tries each directory of PATH) changes nothing.
    if (program != NewProgram::kMissing)
      smcr::preload::exec_inherit::relay_for_vfork_exec(
          &handed_over, program == NewProgram::kWithShim && smcr::preload::exec_carry::enabled(), &env->take_variable);
  }
  using smcr::preload::exec_carry::NewProgram;
  std::optional<NewProgram> program;  // asked once there is a connection
  std::vector<std::pair<int, Connection*>> carry;  // referenced
  fd_table().for_each_conn([&](int fd) {
    Connection* c = fd_table().get(fd);
    if (!c) return;
    if (!program) program = smcr::preload::exec_carry::new_program(file, search_path, fd_of_program, envp);
    int fdflags = smcr::sys::fcntl(fd, F_GETFD);
    // An exec that will fail (execvp trying each directory) changes nothing.
    if (*program == NewProgram::kMissing || fdflags < 0 || (fdflags & FD_CLOEXEC)) {
      c->unref();
      return;
    }
    bool carriable = may_carry && c->exec_carriable() && *program == NewProgram::kWithShim;
    if (c->foreign()) {
      // Carried: ours first (re-homed to this process), then into the new
      // program. Otherwise the owner relays it to the new program.
      if (!carriable) c->claim_for_exec();
      if (c->handed_over(true)) {
        if (c->tcp_fd() >= 0) handed_over.emplace_back(fd, c->tcp_fd());
        c->unref();
        return;
      }
      if (c->foreign()) {
        SMCR_LOG(1, "fd %d: exec while the parent still holds its SMC-R connection: the new program gets end-of-file",
                 fd);
        int sv[2];
        if (smcr::sys::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
          smcr::sys::dup3(sv[0], fd, 0);
          smcr::sys::close(sv[0]);
          smcr::sys::close(sv[1]);
        }
        c->unref();
        return;
      }
    }
    if (carriable && c->exec_carriable()) {  // asked again: a claim above moved it here
      carry.emplace_back(fd, c);
      return;
    }
    c->unref();
  });
  if (!carry.empty()) smcr::preload::exec_carry::prepare(carry, env);
  return smcr::preload::exec_inherit::environment_for_exec(envp, handed_over, env);
}

// The exec failed: what prepare_exec set up is undone.
void undo_prepare_exec(smcr::preload::exec_inherit::ExecEnvironment* env) {
  smcr::preload::exec_carry::exec_failed(env);
  smcr::preload::exec_inherit::exec_failed(env);
}

std::vector<char*> collect_args(const char* arg0, va_list ap, char*** envp) {
  std::vector<char*> args{const_cast<char*>(arg0)};
  while (args.back()) args.push_back(va_arg(ap, char*));
  if (envp) *envp = va_arg(ap, char**);
  return args;
}
}  // namespace

extern "C" {
#pragma GCC visibility push(default)

int execve(const char* path, char* const argv[], char* const envp[]) {
  REAL(execve);
  smcr::preload::exec_inherit::ExecEnvironment env;
  char* const* exec_envp = prepare_exec(path, false, -1, envp, &env);
  int rc = real_execve(path, argv, exec_envp);
  undo_prepare_exec(&env);
  return rc;
}

int execvpe(const char* file, char* const argv[], char* const envp[]) {
  REAL(execvpe);
  smcr::preload::exec_inherit::ExecEnvironment env;
  char* const* exec_envp = prepare_exec(file, true, -1, envp, &env);
  int rc = real_execvpe(file, argv, exec_envp);
  undo_prepare_exec(&env);
  return rc;
}

int fexecve(int fd, char* const argv[], char* const envp[]) {
  REAL(fexecve);
  smcr::preload::exec_inherit::ExecEnvironment env;
  char* const* exec_envp = prepare_exec(nullptr, false, fd, envp, &env);
  int rc = real_fexecve(fd, argv, exec_envp);
  undo_prepare_exec(&env);
  return rc;
}

// A connection carried across exec into this program is relayed once the
// program forks (preload/exec_carry.h, before_fork): its children may use
// it where the shim cannot run.
pid_t fork() {
  REAL(fork);
  smcr::preload::exec_carry::before_fork();
  return real_fork();
}

#pragma GCC visibility pop
}  // extern "C"

namespace {
// A program spawned without a fork the shim sees (posix_spawn, system(),
// popen(): glibc clones and execs on its own) inherits this process's
// descriptors as they are. The connections it would inherit are relayed
// first (preload/exec_inherit.h, relay_for_spawn), and its environment names
// their TCP sockets, as an exec's would; `spawn(envp)` starts it. With
// `swap_environ` (system, popen: they take `environ`) the process' environment
// is the new one while it starts, only when there is something to name.
template <typename Spawn>
auto spawn_inheriting(const char* file, bool search_path, char* const envp[], bool swap_environ, Spawn spawn) {
  smcr::preload::exec_carry::before_fork();
  smcr::preload::settle_all_accepting();
  bool any = false;
  fd_table().for_each_conn([&](int) { any = true; });
  smcr::preload::exec_inherit::ExecEnvironment env;
  if (any) {
    using smcr::preload::exec_carry::NewProgram;
    NewProgram program = smcr::preload::exec_carry::new_program(file, search_path, -1, envp);
    // A spawn that will fail changes nothing.
    if (program != NewProgram::kMissing)
      smcr::preload::exec_inherit::relay_for_spawn(
          program == NewProgram::kWithShim && smcr::preload::exec_carry::enabled(), &env.take_variable);
  }
  std::vector<std::pair<int, int>> pairs;  // these and earlier ones, as an exec names them
  smcr::preload::exec_inherit::surviving(&pairs);
  char* const* spawn_envp = smcr::preload::exec_inherit::environment_for_exec(envp, pairs, &env);
  char** saved = environ;
  bool swapped = swap_environ && spawn_envp != envp;
  if (swapped) environ = const_cast<char**>(spawn_envp);
  auto rc = spawn(spawn_envp);
  int saved_errno = errno;
  if (swapped && environ == spawn_envp) environ = saved;
  smcr::preload::exec_inherit::exec_failed(&env);  // our inheritable copies; the child has its own
  errno = saved_errno;
  return rc;
}
}  // namespace

extern "C" {
#pragma GCC visibility push(default)

int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  REAL(posix_spawn);
  return spawn_inheriting(path, false, envp, false,
                          [&](char* const* e) { return real_posix_spawn(pid, path, actions, attr, argv, e); });
}

int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                 const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  REAL(posix_spawnp);
  return spawn_inheriting(file, true, envp, false,
                          [&](char* const* e) { return real_posix_spawnp(pid, file, actions, attr, argv, e); });
}

int system(const char* command) {
  REAL(system);
  if (!command) return real_system(command);  // "is there a shell?"
  return spawn_inheriting("/bin/sh", false, environ, true, [&](char* const*) { return real_system(command); });
}

FILE* popen(const char* command, const char* type) {
  REAL(popen);
  return spawn_inheriting("/bin/sh", false, environ, true, [&](char* const*) { return real_popen(command, type); });
}

// glibc's execv/execvp/execl* reach execve through internal aliases, past
// this shim: each is routed here instead.
int execv(const char* path, char* const argv[]) { return execve(path, argv, environ); }
int execvp(const char* file, char* const argv[]) { return execvpe(file, argv, environ); }

int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  std::vector<char*> args = collect_args(arg, ap, nullptr);
  va_end(ap);
  return execve(path, args.data(), environ);
}

int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  std::vector<char*> args = collect_args(arg, ap, nullptr);
  va_end(ap);
  return execvpe(file, args.data(), environ);
}

int execle(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  char** envp = nullptr;
  std::vector<char*> args = collect_args(arg, ap, &envp);
  va_end(ap);
  return execve(path, args.data(), envp);
}

// --- epoll, and the other ways to wait for readiness (preload/epoll.h).
int epoll_ctl(int epfd, int op, int fd, struct epoll_event* ev) {
  REAL(epoll_ctl);
  int rc = smcr::preload::epoll_ctl_hook(real_epoll_ctl, epfd, op, fd, ev);
  if (rc != 0) return rc;
  uint8_t kind = fd_table().kind(fd);
  if (kind == smcr::preload::kFdSmcListener) {
    smcr::preload::own::epoll_watch(epfd, op, fd, ev ? ev->events : 0);
  } else if (kind == smcr::preload::kFdTcp && !fd_table().has_conn(fd) &&
             !(fd_table().flags(fd) & smcr::preload::kFdSettledTcp)) {
    int saved = errno;
    smcr::preload::epoll_note_before_takeover(epfd, op, fd, ev);
    errno = saved;
  }
  return rc;
}

int epoll_wait(int epfd, struct epoll_event* ev, int max, int timeout) {
  return epoll_pwait(epfd, ev, max, timeout, nullptr);
}

int epoll_pwait(int epfd, struct epoll_event* ev, int max, int timeout, const sigset_t* mask) {
  REAL(epoll_pwait);
  smcr::preload::own::Serving serving;
  serving.epoll_set(epfd);
  return smcr::preload::epoll_wait_hook(real_epoll_pwait, nullptr, epfd, ev, max,
                                        timeout < 0 ? -1 : timeout * 1000000LL, mask);
}

// Newer than the rest (glibc 2.35): looked up when first called, so that the
// shim still loads where libc lacks it.
int epoll_pwait2(int epfd, struct epoll_event* ev, int max, const struct timespec* ts, const sigset_t* mask) {
  using Fn = smcr::preload::EpollPwait2Fn;
  static std::atomic<Fn> slot{nullptr};
  Fn real = slot.load(std::memory_order_relaxed);
  if (!real) {
    real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "epoll_pwait2"));
    if (!real) {
      errno = ENOSYS;
      return -1;
    }
    slot.store(real, std::memory_order_relaxed);
  }
  if (ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000)) return real(epfd, ev, max, ts, mask);
  REAL(epoll_pwait);
  smcr::preload::own::Serving serving;
  serving.epoll_set(epfd);
  long long ns = ts ? ts->tv_sec * 1000000000LL + ts->tv_nsec : -1;
  return smcr::preload::epoll_wait_hook(real_epoll_pwait, real, epfd, ev, max, ns, mask);
}

int poll(struct pollfd* fds, nfds_t n, int timeout) {
  REAL(poll);
  before_poll(fds, n);
  smcr::preload::own::Serving serving;
  serving.poll_set(fds, n);
  int rc = real_poll(fds, n, timeout);
  if (rc > 0) smcr::preload::poll_add_errors(fds, n);
  return rc;
}

int ppoll(struct pollfd* fds, nfds_t n, const struct timespec* ts, const sigset_t* mask) {
  REAL(ppoll);
  before_poll(fds, n);
  smcr::preload::own::Serving serving;
  serving.poll_set(fds, n);
  int rc = real_ppoll(fds, n, ts, mask);
  if (rc > 0) smcr::preload::poll_add_errors(fds, n);
  return rc;
}

int __poll_chk(struct pollfd* fds, nfds_t n, int timeout, size_t fdslen) {
  if (fdslen / sizeof(*fds) < n) __chk_fail();
  return poll(fds, n, timeout);
}

int __ppoll_chk(struct pollfd* fds, nfds_t n, const struct timespec* ts, const sigset_t* mask, size_t fdslen) {
  if (fdslen / sizeof(*fds) < n) __chk_fail();
  return ppoll(fds, n, ts, mask);
}

// _exit runs no library destructor, so the counters would be as the
// engine last wrote them (at most 250 ms old): an accept-then-fork server's
// child (Python's ForkingMixIn) ends this way moments after taking its
// connection over. Its connections need nothing more: a close already sent
// its CDC, and the kernel closes the rest as TCP's; but one passed to another
// process that has yet to claim it (a forked child that sends its connection
// to its parent over SCM_RIGHTS, then calls os._exit) is waited for, and one
// a forked child holds unclaimed (a parent that accepts, forks and calls
// os._exit) is re-homed to it first, as exit() does.
void _exit(int status) {
  if (g_own_pid.load(std::memory_order_relaxed) == static_cast<pid_t>(::syscall(SYS_getpid))) {
    smcr::handoff::await_passed_offers_at_exit();
    smcr::write_stats_file_from_exit();
  }
  ::syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

void _Exit(int status) { _exit(status); }

int select(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, struct timeval* tv) {
  REAL(select);
  before_select(nfds, readfds, writefds);
  smcr::preload::own::Serving serving;
  serving.select_set(nfds, readfds);
  return real_select(nfds, readfds, writefds, exceptfds, tv);
}

int pselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, const struct timespec* ts,
            const sigset_t* mask) {
  REAL(pselect);
  before_select(nfds, readfds, writefds);
  smcr::preload::own::Serving serving;
  serving.select_set(nfds, readfds);
  return real_pselect(nfds, readfds, writefds, exceptfds, ts, mask);
}

#pragma GCC visibility pop
}  // extern "C"

// --- stdio. A FILE that glibc makes on a descriptor (fdopen) reads, writes
// and closes through glibc's internal calls, past this shim, and so do
// dprintf/vdprintf: on an SMC-R fd they would read the readiness socket's
// doorbell bytes and write into it, and fclose() would leave the connection
// open. fdopen therefore returns, for a descriptor the shim looks after, a
// cookie stream (fopencookie) whose read, write, seek and close are the
// interposed calls, with _fileno set to the descriptor so that fileno()
// works (fopencookie sets -2; glibc's close path tests only for -1, and
// closes through the cookie exactly once, then sets -1). dprintf formats
// into a buffer and writes it through the shim.
namespace {

struct StreamCookie {
  int fd;
  FILE* file;
};

std::mutex& streams_mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<StreamCookie*>& streams() {  // under streams_mu; never destroyed (read at exit)
  static auto* v = new std::vector<StreamCookie*>;
  return *v;
}

// The shim's calls are needed under the descriptor: an SMC-R connection, an
// accept whose Confirm may be pending, a late connect that may owe a
// Decline.
bool needs_shim_io(int fd) {
  if (fd_table().has_conn(fd)) return true;
  uint8_t k = fd_table().kind(fd);
  return k == smcr::preload::kFdAccepting || k == smcr::preload::kFdLateConnect;
}

// For a stream: also a TCP socket not connected yet (fdopen, then connect:
// it may become SMC-R). A connected one that is not SMC-R stays TCP.
bool stream_needs_shim(int fd) {
  if (needs_shim_io(fd)) return true;
  if (fd_table().kind(fd) != smcr::preload::kFdTcp) return false;
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  return smcr::sys::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 && errno == ENOTCONN;
}

ssize_t stream_read(void* cookie, char* buf, size_t n) { return read(static_cast<StreamCookie*>(cookie)->fd, buf, n); }

// As glibc's file streams: everything, or up to the first error.
ssize_t stream_write(void* cookie, const char* buf, size_t n) {
  int fd = static_cast<StreamCookie*>(cookie)->fd;
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, buf + done, n - done);
    if (w < 0) break;
    done += static_cast<size_t>(w);
  }
  return static_cast<ssize_t>(done);
}

int stream_seek(void* cookie, off64_t* off, int whence) {  // ESPIPE, as a socket's
  off64_t r = lseek64(static_cast<StreamCookie*>(cookie)->fd, *off, whence);
  if (r < 0) return -1;
  *off = r;
  return 0;
}

int stream_close(void* cookie) {
  auto* ck = static_cast<StreamCookie*>(cookie);
  {
    std::lock_guard<std::mutex> lock(streams_mu());
    auto& v = streams();
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i] == ck) {
        v[i] = v.back();
        v.pop_back();
        break;
      }
  }
  int fd = ck->fd;
  delete ck;
  return close(fd);
}

void flush_socket_streams_at_exit() {
  std::lock_guard<std::mutex> lock(streams_mu());
  for (StreamCookie* ck : streams())
    if (ck->file && ftrylockfile(ck->file) == 0) {  // one held by another thread mid-call: left alone
      fflush_unlocked(ck->file);
      funlockfile(ck->file);
    }
}

using VdprintfChkFn = int (*)(int, int, const char*, va_list);
extern "C" int __vsnprintf_chk(char*, size_t, int, size_t, const char*, va_list);

// dprintf on a descriptor the shim looks after: formatted here (the
// fortified variant keeps its checks), then written whole, or -1.
int dprintf_through_shim(int fd, int chk_flag, const char* fmt, va_list ap) {
  char stack[1024];
  va_list again;
  va_copy(again, ap);
  auto format = [&](char* buf, size_t size, va_list a) {
    return chk_flag < 0 ? vsnprintf(buf, size, fmt, a) : __vsnprintf_chk(buf, size, chk_flag, size, fmt, a);
  };
  int n = format(stack, sizeof stack, ap);
  char* buf = stack;
  char* heap = nullptr;
  if (n >= 0 && static_cast<size_t>(n) >= sizeof stack) {
    heap = static_cast<char*>(malloc(static_cast<size_t>(n) + 1));
    if (!heap) {
      errno = ENOMEM;
      n = -1;
    } else {
      format(heap, static_cast<size_t>(n) + 1, again);
      buf = heap;
    }
  }
  va_end(again);
  for (size_t done = 0; n > 0 && done < static_cast<size_t>(n);) {
    ssize_t w = write(fd, buf + done, static_cast<size_t>(n) - done);
    if (w < 0) n = -1;
    else done += static_cast<size_t>(w);
  }
  free(heap);
  return n;
}

using CloseRangeFn = int (*)(unsigned int, unsigned int, int);

int raw_close_range(unsigned int first, unsigned int last, int flags) {
  return static_cast<int>(::syscall(SYS_close_range, first, last, flags));
}

CloseRangeFn real_close_range() {
  static std::atomic<CloseRangeFn> slot{nullptr};
  CloseRangeFn f = slot.load(std::memory_order_relaxed);
  if (!f) {  // glibc 2.34+: looked up when first called
    f = reinterpret_cast<CloseRangeFn>(dlsym(RTLD_NEXT, "close_range"));
    if (!f) f = raw_close_range;
    slot.store(f, std::memory_order_relaxed);
  }
  return f;
}

// close_range(first, last, 0) as the application means it: its SMC-R
// connections (and whatever else the shim follows by number) are closed
// through close(), so that the peer sees the end; the shim's own
// descriptors stay open: those in the hidden upper half are left out
// (the range is clamped below it), those below (sys::is_own_low_fd) are
// skipped; the rest goes to the kernel in runs.
//
// Not in a vfork()ed child (CPython's subprocess, for one, calls
// close_range there): it shares our memory, so closing through close()
// would end the parent's connections; the kernel's close_range closes only
// the child's copies, as it did before the shim. Such a child ran no
// pthread_atfork handler, so its pid is not the one recorded.
std::atomic<pid_t> g_pid{getpid()};
[[maybe_unused]] const int g_pid_atfork = pthread_atfork(nullptr, nullptr, [] { g_pid.store(getpid()); });

int close_fd_range(unsigned int first, unsigned int last, int flags) {
  CloseRangeFn real = real_close_range();
  if (getpid() != g_pid.load(std::memory_order_relaxed)) return real(first, last, flags);
  int base = smcr::sys::hidden_fd_base();
  unsigned int top = last;
  if (base > 0) {
    if (first >= static_cast<unsigned int>(base)) return 0;  // only the shim's own up there
    top = std::min(last, static_cast<unsigned int>(base) - 1);
  }
  // Looked at one by one up to here; with no hidden range, anything above
  // the descriptor limit goes to the kernel in one piece.
  unsigned int scan_top = top;
  if (base == 0) {
    rlimit rl{};
    rlim_t lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    lim = std::max<rlim_t>(lim, smcr::sys::kOwnFdBits);
    if (lim > static_cast<rlim_t>(FdTable::kMaxFd)) lim = FdTable::kMaxFd;
    scan_top = std::min<unsigned int>(top, static_cast<unsigned int>(lim) - 1);
  }
  int rc = 0, saved = 0;
  long run = -1;
  auto flush = [&](unsigned int end) {
    if (run < 0) return;
    if (real(static_cast<unsigned int>(run), end, flags) != 0 && rc == 0) {
      rc = -1;
      saved = errno;
    }
    run = -1;
  };
  for (unsigned int fd = first; fd <= scan_top; ++fd) {
    int n = static_cast<int>(fd);
    if (smcr::sys::is_own_low_fd(n)) {
      flush(fd - 1);
    } else if (fd_table().has_conn(n) || fd_table().kind(n) != smcr::preload::kFdUnknown) {
      flush(fd - 1);
      close(n);
    } else {
      smcr::preload::epoll_forget_fd(n);
      smcr::preload::own::forget(n);
      smcr::preload::late::forget(n);
      if (run < 0) run = fd;
    }
    if (fd == scan_top) break;  // no wrap at UINT_MAX
  }
  flush(scan_top);
  if (scan_top < top && real(scan_top + 1, top, flags) != 0 && rc == 0) {
    rc = -1;
    saved = errno;
  }
  if (rc) errno = saved;
  return rc;
}

}  // namespace

extern "C" {
#pragma GCC visibility push(default)

FILE* fdopen(int fd, const char* mode) {
  REAL(fdopen);
  if (!mode || !enabled() || !stream_needs_shim(fd)) return real_fdopen(fd, mode);
  // The mode as glibc's fdopen reads it: r, w or a, then '+' among the
  // next four characters.
  char m[3] = {0, 0, 0};
  if (mode[0] != 'r' && mode[0] != 'w' && mode[0] != 'a') {
    errno = EINVAL;
    return nullptr;
  }
  m[0] = mode[0];
  for (int i = 1; i < 5 && mode[i]; ++i)
    if (mode[i] == '+') {
      m[1] = '+';
      break;
    }
  int fl = smcr::sys::fcntl(fd, F_GETFL);
  if (fl < 0) return nullptr;
  if (((fl & O_ACCMODE) == O_RDONLY && (m[0] != 'r' || m[1])) || ((fl & O_ACCMODE) == O_WRONLY && (m[0] == 'r' || m[1]))) {
    errno = EINVAL;
    return nullptr;
  }
  // As glibc: "a" sets O_APPEND on the descriptor (meaningless on a socket).
  if (m[0] == 'a' && !(fl & O_APPEND) && smcr::sys::fcntl(fd, F_SETFL, fl | O_APPEND) < 0) return nullptr;
  auto* ck = new (std::nothrow) StreamCookie{fd, nullptr};
  if (!ck) {
    errno = ENOMEM;
    return nullptr;
  }
  FILE* f = fopencookie(ck, m, cookie_io_functions_t{stream_read, stream_write, stream_seek, stream_close});
  if (!f) {
    delete ck;
    return nullptr;
  }
  f->_fileno = fd;
  ck->file = f;
  std::lock_guard<std::mutex> lock(streams_mu());
  streams().push_back(ck);
  return f;
}

int vdprintf(int fd, const char* fmt, va_list ap) {
  REAL(vdprintf);
  if (!needs_shim_io(fd)) return real_vdprintf(fd, fmt, ap);
  return dprintf_through_shim(fd, -1, fmt, ap);
}

int dprintf(int fd, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vdprintf(fd, fmt, ap);
  va_end(ap);
  return n;
}

int __vdprintf_chk(int fd, int flag, const char* fmt, va_list ap) {
  if (!needs_shim_io(fd)) {
    static std::atomic<VdprintfChkFn> slot{nullptr};
    VdprintfChkFn real = slot.load(std::memory_order_relaxed);
    if (!real) {
      real = resolve<VdprintfChkFn>("__vdprintf_chk");
      slot.store(real, std::memory_order_relaxed);
    }
    return real(fd, flag, fmt, ap);
  }
  return dprintf_through_shim(fd, flag, fmt, ap);
}

int __dprintf_chk(int fd, int flag, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = __vdprintf_chk(fd, flag, fmt, ap);
  va_end(ap);
  return n;
}

// glibc 2.34+; glibc's closefrom calls its own close_range, past the shim.
int close_range(unsigned int first, unsigned int last, int flags) {
  if (first > last || (flags & ~(CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE)) || (flags & CLOSE_RANGE_CLOEXEC))
    return real_close_range()(first, last, flags);  // errors, or only close-on-exec (the shim's already are)
  return close_fd_range(first, last, flags);
}

void closefrom(int lowfd) { close_fd_range(static_cast<unsigned int>(std::max(lowfd, 0)), ~0U, 0); }

int dup2(int oldfd, int newfd) {
  if (oldfd == newfd) {
    REAL(fcntl);
    return real_fcntl(oldfd, F_GETFD) < 0 ? -1 : newfd;
  }
  return dup3(oldfd, newfd, 0);
}

#pragma GCC visibility pop
}  // extern "C"
