#include "preload/exec_inherit.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "core/connection.h"
#include "core/engine.h"
#include "core/exec_carry.h"
#include "core/handoff.h"
#include "core/log.h"
#include "core/sys.h"
#include "preload/dup3_retry.h"
#include "preload/epoll.h"
#include "preload/exec_carry.h"
#include "preload/fd_table.h"
#include "preload/unix_peer.h"

namespace smcr::preload::exec_inherit {
namespace {

constexpr char kVariable[] = "SMCR_EXEC_TCP";

// Few descriptors ever come this way (an inetd child's 0 and 1): a small
// table, read without a lock (a lookup runs in getpeername, maybe in a signal
// handler), changed under one.
struct Pair {
  std::atomic<int> fd{-1};
  std::atomic<int> tcp{-1};
};
std::array<Pair, 64> g_pairs;
std::mutex g_mu;

bool socket_option(int fd, int name, int* out) {
  socklen_t len = sizeof *out;
  return sys::getsockopt(fd, SOL_SOCKET, name, out, &len) == 0;
}

// Above what SO_SNDBUF 1 leaves a Unix socket (the kernel's minimum, twice
// an skb's overhead plus 2 KiB, about 4.5 KiB).
constexpr int kReadinessSndbufMax = 8192;

bool is_stream_unix(int fd) {
  int domain = 0, type = 0;
  return socket_option(fd, SO_DOMAIN, &domain) && domain == AF_UNIX && socket_option(fd, SO_TYPE, &type) &&
         type == SOCK_STREAM;
}

bool is_tcp(int fd) {
  int domain = 0, protocol = 0;
  return socket_option(fd, SO_DOMAIN, &domain) && (domain == AF_INET || domain == AF_INET6) &&
         socket_option(fd, SO_PROTOCOL, &protocol) && protocol == IPPROTO_TCP;
}

// g_mu held.
bool add_locked(int fd, int tcp) {
  for (Pair& p : g_pairs)
    if (p.fd.load(std::memory_order_relaxed) < 0) {
      p.tcp.store(tcp, std::memory_order_relaxed);
      p.fd.store(fd, std::memory_order_release);
      fd_table().set_kind(fd, kFdExecInherited);
      return true;
    }
  return false;
}

// g_mu held. Closes `tcp` unless another descriptor still refers to it.
void release_tcp_locked(int tcp) {
  for (Pair& p : g_pairs)
    if (p.fd.load(std::memory_order_relaxed) >= 0 && p.tcp.load(std::memory_order_relaxed) == tcp) return;
  sys::close(tcp);
}

}  // namespace

void adopt_from_environment() {
  const char* v = ::getenv(kVariable);
  if (!v) return;
  std::vector<std::pair<int, int>> items;  // (fd, tcp)
  for (const char* p = v; *p;) {
    int fd = -1, tcp = -1, used = 0;
    if (std::sscanf(p, "%d:%d%n", &fd, &tcp, &used) != 2) break;
    if (fd >= 0 && tcp >= 0 && fd != tcp) items.emplace_back(fd, tcp);
    p += used;
    if (*p == ',') ++p;
  }
  ::unsetenv(kVariable);
  std::lock_guard<std::mutex> lock(g_mu);
  for (size_t i = 0; i < items.size(); ++i) {
    int tcp = items[i].second;
    bool seen = false;
    for (size_t j = 0; j < i; ++j) seen = seen || items[j].second == tcp;
    if (seen) continue;
    if (!is_tcp(tcp)) {
      SMCR_LOG(1, "exec: %s names fd %d, not a TCP socket: ignored", kVariable, tcp);
      continue;
    }
    // Out of the application's range and close-on-exec: only a later exec
    // that passes it on (environment_for_exec) lets it through again.
    int hidden = sys::dup_hidden(tcp);
    sys::close(tcp);
    if (hidden < 0) continue;
    bool used = false;
    for (auto [fd, t] : items)
      if (t == tcp && is_stream_unix(fd) && add_locked(fd, hidden)) {
        used = true;
        SMCR_LOG(1, "exec: fd %d is a handed-over SMC-R connection; its TCP socket answers for it", fd);
      }
    if (!used) sys::close(hidden);
  }
}

bool relay_numbers(Connection* c, const std::vector<int>& fds) {
  // An epoll set of ours that answers for a number, or parks the connection
  // for it, would keep doing so for a stream the kernel now watches.
  for (int fd : fds) epoll_release_number(fd);
  int tcp = c->tcp_fd() >= 0 ? sys::dup_hidden(c->tcp_fd()) : -1;
  if (fds.empty() || !handoff::relay_in_place(c)) {
    if (tcp >= 0) sys::close(tcp);
    c->unref();
    return false;
  }
  // What the socket held before the relay's marker is readiness bytes. A
  // forked holder that claimed it may be draining it itself (Connection::
  // handed_over). Until it is drained the numbers stay in the table, where
  // our application's calls on them wait for it (ConnRef): a call past the
  // table (a read after poll() reported the marker) would take readiness
  // bytes for data.
  std::atomic<uint32_t>* word = c->handoff_word();
  if (!word || handoff::transition(word, handoff::kRelay, handoff::kRelayDraining)) {
    int marker[1] = {-1};
    if (handoff::drain_to_marker(fds[0], marker, 2000, handoff::kRelayMarker) > 0) sys::close(marker[0]);
    handoff::publish(word, handoff::kRelayReady);
  } else {
    handoff::wait_while(word, {handoff::kRelay, handoff::kRelayDraining}, 2000);
  }
  c->relay_stream_ready();
  // The numbers are plain streams now; one table reference stays with the
  // relay, which closes the connection when the last of them is closed.
  for (size_t i = 0; i < fds.size(); ++i) {
    Connection* t = fd_table().take(fds[i]);
    if (t && i > 0) t->unref();
  }
  if (tcp >= 0)
    for (int fd : fds) adopt_pair(fd, tcp);
  c->unref();
  return true;
}

std::vector<std::pair<Connection*, std::vector<int>>> connections_where(
    const std::function<bool(int fd, Connection* c)>& want) {
  std::vector<std::pair<int, Connection*>> numbers;  // referenced
  fd_table().for_each_conn([&](int fd) {
    if (Connection* c = fd_table().get(fd)) numbers.emplace_back(fd, c);
  });
  std::vector<std::pair<Connection*, std::vector<int>>> all;  // each referenced once
  std::vector<bool> wanted;
  for (auto [fd, c] : numbers) {
    size_t i = 0;
    while (i < all.size() && all[i].first != c) ++i;
    if (i == all.size()) {
      all.push_back({c, {}});
      wanted.push_back(false);
    } else {
      c->unref();  // one reference per connection
    }
    all[i].second.push_back(fd);
    if (!wanted[i] && want(fd, c)) wanted[i] = true;
  }
  std::vector<std::pair<Connection*, std::vector<int>>> result;
  for (size_t i = 0; i < all.size(); ++i) {
    if (wanted[i]) result.push_back(std::move(all[i]));
    else all[i].first->unref();
  }
  return result;
}

namespace {
// A connection's owner closes its copy just after starting the program that
// takes it (posix_spawn returns once it exec'd; CPython's Popen too) or
// sending it (Node's cluster): it has, as a rule, before the program asks.
// One that keeps it (a descriptor leaked into a program, or a CGI-style
// server that writes after it) costs the program this much once (for all
// its connections), then relays it.
constexpr int kHeldWaitMs = 50;

// Connections relayed for another process over SCM_RIGHTS or to a spawned
// program: the inode of the stream it holds and a duplicate of their TCP
// socket, for its shim to ask for (Engine::set_tcp_lookup, adopt_received).
// And connections a spawned program or an SCM_RIGHTS receiver will take
// over (pass_or_relay): the inode and the connection (referenced) until it
// is claimed. The most recent ones only: a receiver asks as it receives, a
// program as it starts.
struct Passed {
  uint64_t ino = 0;
  int tcp = -1;
  Connection* conn = nullptr;
};
std::array<Passed, 128> g_passed;
size_t g_passed_next = 0;
std::mutex g_passed_mu;

int tcp_for_passed(uint64_t ino) {
  std::lock_guard<std::mutex> lock(g_passed_mu);
  for (const Passed& p : g_passed)
    if (p.tcp >= 0 && p.ino == ino) return sys::dup_hidden(p.tcp);
  return -1;
}

void take_request(uint64_t ino, int fd, bool relay);

// Takes `tcp` (or -1) and a reference to `conn` (or null).
// From the start: a program a forked child exec'd asks for a connection
// this process never passed (SMCR_EXEC_PENDING).
[[maybe_unused]] const bool g_take_handlers_set =
    (Engine::set_tcp_lookup(&tcp_for_passed), Engine::set_take_handler(&take_request), true);

void remember_passed(uint64_t ino, int tcp, Connection* conn = nullptr) {
  Connection* evicted = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_passed_mu);
    Passed& slot = g_passed[g_passed_next++ % g_passed.size()];
    if (slot.tcp >= 0) sys::close(slot.tcp);
    evicted = slot.conn;
    slot = {ino, tcp, conn};
  }
  if (evicted) evicted->unref();
}

// The connection a spawned program will take over by `ino`, referenced
// (forget_passed_connection drops it once it is claimed or gone), or null.
Connection* passed_connection(uint64_t ino) {
  std::lock_guard<std::mutex> lock(g_passed_mu);
  for (Passed& p : g_passed)
    if (p.conn && p.ino == ino) {
      p.conn->ref();
      return p.conn;
    }
  return nullptr;
}
void forget_passed_connection(uint64_t ino) {
  Connection* c = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_passed_mu);
    for (Passed& p : g_passed)
      if (p.conn && p.ino == ino) std::swap(c, p.conn);
  }
  if (c) c->unref();
}

void reply(int fd, char byte, int tcp) {
  sys::sendmsg_with_fd(fd, &byte, 1, tcp, MSG_DONTWAIT);
  if (tcp >= 0) sys::close(tcp);
}

// Relays `conns` (connections_where's) for another process that will hold
// them (`who`, for the log). A forked child's copy is claimed from its
// owner first, which relays it to this process. With `remember_tcp` the
// TCP socket of each connection relayed here is kept for that process to
// ask for (tcp_for_passed). Returns how many.
int relay_for_other_process(std::vector<std::pair<Connection*, std::vector<int>>>& conns, const char* who,
                            bool remember_tcp) {
  int relayed = 0;
  for (auto& [c, fds] : conns) {
    if (c->foreign()) {
      c->claim_for_exec();
      bool mine = c->handed_over(true);
      c->unref();
      if (mine) ++relayed;
      continue;
    }
    struct stat st {};
    if (remember_tcp && c->tcp_fd() >= 0 && sys::fstat(fds[0], &st) == 0)
      if (int tcp = sys::dup_hidden(c->tcp_fd()); tcp >= 0) remember_passed(st.st_ino, tcp);
    uint32_t token = c->local_token();
    if (relay_numbers(c, fds)) {
      ++relayed;
      SMCR_LOG(1, "conn %08x: %s: relayed from here on", token, who);
    } else {
      SMCR_LOG(0, "conn %08x: %s, and it cannot be relayed: that process reads nothing", token, who);
    }
  }
  return relayed;
}
}  // namespace

namespace {
uint64_t inode_of(int fd) {
  struct stat st {};
  return sys::fstat(fd, &st) == 0 ? st.st_ino : 0;
}

// On the engine thread: a program spawned from here asks for the connection
// of the stream it inherited (core/exec_carry.h).
void take_request(uint64_t ino, int fd, bool relay) {
  Connection* c = passed_connection(ino);
  if (!c) {  // relayed (its TCP socket), or not ours
    int tcp = tcp_for_passed(ino);
    if (tcp >= 0) {
      reply(fd, smcr::exec_carry::kReplyTcp, tcp);
      return;
    }
    // A program a forked child exec'd while we held the connection, asking
    // on its first use (SMCR_EXEC_PENDING): offered to it once we let go.
    if (Connection* offered = handoff::offered_connection(ino)) {
      offered->mark_passed();
      remember_passed(ino, -1, offered);  // with our reference
      c = passed_connection(ino);
    } else {
      auto held = connections_where([ino](int n, Connection* h) { return !h->foreign() && inode_of(n) == ino; });
      if (!held.empty()) {
        // Still held here. Once the program has waited a while, relayed in
        // place (a CGI server waiting for its script; a parent reading the
        // connection while its child writes). A call of ours inside it or
        // asleep on it goes on on the relay's stream (Connection::
        // resume_on_relay_stream); an epoll set of ours gives its
        // registrations back to the kernel (relay_numbers).
        bool idle = relay;
        for (auto& entry : held) {
          if (!idle) break;
          for (int n : entry.second) epoll_release_number(n);
          idle = entry.first->relayable_in_place();
        }
        if (!idle) {
          for (auto& entry : held) entry.first->unref();
          reply(fd, smcr::exec_carry::kReplyWait, -1);
          return;
        }
        relay_for_other_process(held, "a program a forked child exec'd uses it while this process holds it", true);
        int tcp = tcp_for_passed(ino);
        reply(fd, tcp >= 0 ? smcr::exec_carry::kReplyTcp : smcr::exec_carry::kReplyNone, tcp);
        return;
      }
    }
    if (!c) {
      reply(fd, smcr::exec_carry::kReplyNone, -1);
      return;
    }
  }
  Connection::RemoteClaim claim = c->claim_remote(fd);
  c->unref();
  if (claim == Connection::RemoteClaim::kClaimed) {
    forget_passed_connection(ino);  // the handover thread answers
    return;
  }
  if (claim == Connection::RemoteClaim::kGone) {
    forget_passed_connection(ino);
    reply(fd, smcr::exec_carry::kReplyNone, -1);
    return;
  }
  if (!relay) {
    reply(fd, smcr::exec_carry::kReplyWait, -1);
    return;
  }
  // This process keeps using it: relayed here, as before there was a take.
  auto conns = connections_where([ino](int n, Connection* held) { return !held->foreign() && inode_of(n) == ino; });
  if (conns.empty()) {  // not held here any more (offered, busy a moment): asked again
    reply(fd, smcr::exec_carry::kReplyWait, -1);
    return;
  }
  forget_passed_connection(ino);
  relay_for_other_process(conns, "a program spawned from here uses it while this process does", true);
  int tcp = tcp_for_passed(ino);
  reply(fd, tcp >= 0 ? smcr::exec_carry::kReplyTcp : smcr::exec_carry::kReplyNone, tcp);
}

// Connections among `conns` the new program takes over itself (it loads the
// shim: `takes`) are marked for it and their inodes appended to `take`; the
// rest are relayed.
void pass_or_relay(std::vector<std::pair<Connection*, std::vector<int>>>& conns, bool takes,
                   std::vector<uint64_t>* take, const char* who, bool remember_tcp) {
  std::vector<std::pair<Connection*, std::vector<int>>> relay;
  for (auto& entry : conns) {
    Connection* c = entry.first;
    uint64_t ino = inode_of(entry.second[0]);
    if (takes && ino != 0 && !c->foreign() && smcr::preload::exec_carry::enabled() && c->passable()) {
      c->mark_passed();
      remember_passed(ino, -1, c);  // with our reference
      take->push_back(ino);
      SMCR_LOG(1, "conn %08x: %s: it takes the connection over", c->local_token(), who);
      continue;
    }
    relay.push_back(std::move(entry));
  }
  relay_for_other_process(relay, who, remember_tcp);
}
}  // namespace

bool held_by_parent(Connection* c, int fd, std::pair<pid_t, uint64_t>* pending) {
  std::atomic<uint32_t>* word = c->handoff_word();
  if (!c->foreign() || !word || word->load(std::memory_order_acquire) != handoff::kOwned) return false;
  pid_t owner = handoff::owner_pid(word);
  uint64_t ino = inode_of(fd);
  if (owner <= 0 || ino == 0) return false;
  *pending = {owner, ino};
  return true;
}

int relay_for_spawn(bool program_takes, std::string* take_variable,
                    std::vector<std::pair<pid_t, uint64_t>>* pending, const std::vector<int>& dup_sources) {
  // Connections with a number the new program inherits, and all their numbers.
  auto conns = connections_where([&dup_sources](int fd, Connection*) {
    if (std::find(dup_sources.begin(), dup_sources.end(), fd) != dup_sources.end()) return true;
    int fdflags = sys::fcntl(fd, F_GETFD);
    return fdflags >= 0 && !(fdflags & FD_CLOEXEC);
  });
  std::vector<uint64_t> take;
  size_t n = conns.size();
  // Our parent's, still held by it: the program asks the parent on its
  // first use (SMCR_EXEC_PENDING), as after a fork's exec; nothing waits
  // here for a parent that may be waiting for us.
  if (program_takes && smcr::preload::exec_carry::enabled())
    std::erase_if(conns, [pending](auto& entry) {
      std::pair<pid_t, uint64_t> held;
      if (!held_by_parent(entry.first, entry.second[0], &held)) return false;
      pending->push_back(held);
      entry.first->unref();
      return true;
    });
  pass_or_relay(conns, program_takes, &take, "a program spawned from here inherits it", false);
  if (!take.empty()) *take_variable = take_variable_for(static_cast<pid_t>(smcr::sys::raw_syscall(SYS_getpid)), take);
  return static_cast<int>(n);
}

std::string take_variable_for(pid_t owner, const std::vector<uint64_t>& inodes) {
  std::string v = std::string(smcr::exec_carry::kTakeVariable) + "=" + std::to_string(owner) + ":";
  for (size_t i = 0; i < inodes.size(); ++i) v += (i ? "," : "") + std::to_string(inodes[i]);
  return v;
}


int relay_passed(const int* fds, size_t n, int via) {
  auto conns = connections_where([fds, n](int fd, Connection*) { return std::find(fds, fds + n, fd) != fds + n; });
  if (conns.empty()) return 0;
  // A process with the shim at the other end (a child, the parent, the
  // listener of a named socket) asks for them as it receives them
  // (adopt_received): they are left for it to take over.
  bool receiver_takes = smcr::preload::exec_carry::enabled() && unix_peer::shim_process_at_other_end(via) > 0;
  std::vector<uint64_t> taken;
  pass_or_relay(conns, receiver_takes, &taken, "sent to another process (SCM_RIGHTS)", true);
  return static_cast<int>(taken.size());
}

namespace {
// Asks process `pid`'s engine for the TCP socket behind the stream with
// inode `ino` that it relays (tcp_for_passed there): the socket (close-on-
// exec, in this process's table), or -1.
int ask_tcp_socket(pid_t pid, uint64_t ino) {
  char req[40];
  int rl = snprintf(req, sizeof req, "tcp %llu\n", static_cast<unsigned long long>(ino));
  // A process that does not answer costs at most 500 ms.
  int s = Engine::ask_process(pid, std::string_view(req, static_cast<size_t>(rl)), -1, 500);
  if (s < 0) return -1;
  int tcp = -1;
  char byte = 0;
  if (sys::recv_with_fd(s, &byte, 1, &tcp, 0) != 1 || byte != 't') sys::close_reset(&tcp);  // no answer
  sys::close(s);
  if (tcp >= 0 && !is_tcp(tcp)) sys::close_reset(&tcp);
  return tcp;
}
}  // namespace

namespace {
void take_one(pid_t owner, uint64_t ino, const std::vector<int>& numbers, int64_t relay_after, bool named,
              int64_t give_up_at = INT64_MAX);
constexpr int kOwnerClosingMs = 200;
}  // namespace

void adopt_received(int via, int fd) {
  // Not a readiness socket (Connection::make_readiness_pair gives its
  // application end the smallest send buffer): not ours to ask about, and
  // no search of other processes for the many a program may pass.
  int sndbuf = 0;
  if (!is_stream_unix(fd) || !socket_option(fd, SO_SNDBUF, &sndbuf) || sndbuf > kReadinessSndbufMax) return;
  struct stat st {};
  if (sys::fstat(fd, &st) != 0) return;
  // The sender: the process holding the other end of `via`, found as the
  // sender found us (relay_passed); it takes or relays it.
  if (pid_t sender = unix_peer::shim_process_at_other_end(via); sender > 0) {
    take_one(sender, st.st_ino, {fd}, sys::now_ms() + kHeldWaitMs, false);
    return;
  }
  ucred cred{};
  socklen_t len = sizeof cred;
  if (sys::getsockopt(via, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid <= 0) return;
  if (cred.pid == static_cast<pid_t>(smcr::sys::raw_syscall(SYS_getpid))) {
    int tcp = tcp_for_passed(st.st_ino);
    if (tcp < 0) return;
    adopt_pair(fd, tcp);
    SMCR_LOG(1, "fd %d: a relayed SMC-R connection received from this process; its TCP socket answers for it", fd);
    return;
  }
  // The maker of the socket pair (Node's and CPython's servers make the
  // pair their workers receive on), when the holder could not be told.
  take_one(cred.pid, st.st_ino, {fd}, sys::now_ms() + kHeldWaitMs, false);
}

namespace {
// An inherited readiness socket whose connection cannot be had: its bytes
// are not the peer's, so the program's numbers read end-of-file instead
// (as an exec's descriptors that were not handed over). Only for sockets
// the owner named as its connections' (`named`); another stream received
// over SCM_RIGHTS may be any socket, and stays as it is.
void end_of_file_at(const std::vector<int>& numbers, bool named) {
  if (!named) return;
  int sv[2];
  if (sys::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
  for (int n : numbers) {
    int flags = sys::fcntl(n, F_GETFD);
    // Not replaced (EINTR and EBUSY are retried): the number keeps the
    // inherited socket, which only its owner can put right; said, not
    // closed (a closed number would be the next open()'s).
    if (dup3_retrying(sv[0], n, flags >= 0 && (flags & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
      int err = errno;
      SMCR_LOG(0, "fd %d: cannot put end-of-file in place of an inherited SMC-R socket (dup3: %s)", n, strerror(err));
    }
  }
  sys::close(sv[0]);
  sys::close(sv[1]);
}

// Asks `owner` for the connection of the inherited stream `ino`, held here
// at `numbers` (core/exec_carry.h), until it is ours, relayed, or not to be
// had. An owner that still holds it is asked again until `relay_after`,
// then told to relay it, or until `give_up_at`, then the numbers read
// end-of-file. `named`: the owner said the socket is one of its
// connections' (SMCR_EXEC_TAKE); else it is any stream received over
// SCM_RIGHTS, left as it is unless the owner knows it.
void take_one(pid_t owner, uint64_t ino, const std::vector<int>& numbers, int64_t relay_after, bool named,
              int64_t give_up_at) {
  namespace ec = smcr::exec_carry;
  // An owner in the middle of closing its copy has the connection in
  // neither its table nor its offers for a moment: "none" is believed
  // after this long.
  const int64_t none_believed_after = sys::now_ms() + kOwnerClosingMs;
  for (int round = 0;; ++round) {
    bool relay = sys::now_ms() > relay_after;
    char req[48];
    int rl = snprintf(req, sizeof req, "%s %llu\n", relay ? "relay" : "take", static_cast<unsigned long long>(ino));
    char kind = 0;
    int fds[sys::kMaxPassedFds];
    size_t count = 0;
    auto close_fds = [&] {
      for (size_t i = 0; i < count; ++i) sys::close(fds[i]);
      count = 0;
    };
    const char* step = "connect";
    // With the socket itself: the owner may run as another user (a CGI program runs as nobody).
    int s = Engine::ask_process(owner, std::string_view(req, static_cast<size_t>(rl)), numbers[0], 3000, &step);
    pollfd p{s, POLLIN, 0};
    bool answered = s >= 0 && (step = "wait", sys::poll(&p, 1, 3000) > 0) &&
                    (step = "receive", sys::recv_with_fds(s, &kind, 1, fds, sys::kMaxPassedFds, &count, MSG_DONTWAIT) == 1);
    if (!answered) {
      int err = errno;
      if (named)
        SMCR_LOG(0, "exec: the process that started this program (pid %d) did not answer for an inherited SMC-R "
                 "connection (%s: %s): it reads end-of-file here", static_cast<int>(owner), step, strerror(err));
      if (s >= 0) sys::close(s);
      close_fds();
      end_of_file_at(numbers, named);
      return;
    }
    if (kind == ec::kReplyNone && count == 0 && named && sys::now_ms() < none_believed_after) kind = ec::kReplyWait;
    if (kind == ec::kReplyWait) {
      sys::close(s);
      close_fds();
      if (sys::now_ms() > give_up_at) {
        SMCR_LOG(0, "exec: pid %d still uses an inherited SMC-R connection this program uses too: it reads "
                 "end-of-file here", static_cast<int>(owner));
        end_of_file_at(numbers, named);
        return;
      }
      timespec ts{0, std::min(1 + round, 10) * 1000000L};
      nanosleep(&ts, nullptr);
      continue;
    }
    int tcp = -1;
    if (kind == ec::kReplyRecord) {
      ec::Record r;
      // The record's descriptors came with its first byte.
      bool whole = ec::receive_record(s, &r, 3000, fds, count);
      count = 0;
      if (!whole) {
        SMCR_LOG(0, "exec: an inherited SMC-R connection's record did not arrive whole: it reads end-of-file here");
        sys::close(s);
        end_of_file_at(numbers, named);
        return;
      }
      char verdict = 0;
      pollfd v{s, POLLIN, 0};
      // The owner asks the peer to move it (up to 10 s), then answers; its
      // end (it died) means the same as moved: whatever the peer did, the
      // new link tells.
      ssize_t got = sys::poll(&v, 1, 15000) > 0 ? sys::recv(s, &verdict, 1, MSG_DONTWAIT) : -1;
      if (got == 0 || verdict == ec::kVerdictMoved) {
        sys::close(s);
        r.app_end = sys::fcntl(numbers[0], F_DUPFD_CLOEXEC, 0);
        r.n_app_fds = 0;
        for (int n : numbers)
          if (r.n_app_fds < ec::kMaxAppFds) r.app_fds[r.n_app_fds++] = n;
        if (smcr::preload::exec_carry::adopt_taken(r))
          SMCR_LOG(1, "exec: an SMC-R connection taken over from pid %d (its own link, no relay)",
                   static_cast<int>(owner));
        return;
      }
      tcp = r.tcp_fd;
      r.tcp_fd = -1;
      for (int32_t* d : ec::descriptors(&r)) sys::close_reset(d);
      if (verdict != ec::kVerdictRelay) sys::close_reset(&tcp);
      kind = verdict;
    } else {
      if (count > 0) tcp = fds[0];
      for (size_t i = 1; i < count; ++i) sys::close(fds[i]);
      count = 0;
    }
    sys::close(s);
    if ((kind != ec::kReplyTcp && kind != ec::kVerdictRelay) || tcp < 0 || !is_tcp(tcp)) {
      // Not a connection the owner knows (any more: another program took it).
      if (named)
        SMCR_LOG(1, "exec: pid %d has no connection for an inherited socket: it reads end-of-file here",
                 static_cast<int>(owner));
      sys::close_reset(&tcp);
      end_of_file_at(numbers, named);
      return;
    }
    // A relay the handover started after our claim: its stream follows its
    // marker (what comes before it is readiness bytes).
    if (kind == ec::kVerdictRelay && handoff::drain_to_marker(numbers[0], {}, 3000, handoff::kRelayMarker) < 0) {
      SMCR_LOG(0, "exec: an inherited SMC-R connection's relay did not start: it reads end-of-file here");
      sys::close(tcp);
      end_of_file_at(numbers, named);
      return;
    }
    int hidden = sys::dup_hidden(tcp);
    sys::close(tcp);
    if (hidden < 0) return;
    for (int n : numbers) adopt_pair(n, hidden);
    SMCR_LOG(1, "exec: an inherited SMC-R connection is relayed by pid %d", static_cast<int>(owner));
    return;
  }
}
}  // namespace

namespace {
// Numbers inherited across a forked child's exec, taken on first use
// (SMCR_EXEC_PENDING). Few; read without the lock only through the fd
// table's kind.
struct PendingTake {
  int fd;
  pid_t owner;
  uint64_t ino;
};
std::vector<PendingTake>& pending_takes() {
  static auto* v = new std::vector<PendingTake>;
  return *v;
}
// Held across a take: one at a time, and a second caller on the same
// socket finds it settled.
std::mutex g_pending_mu;
// How long a program's first use waits for the owner to let go of the
// connection (an owner that waits for the exec closes its copy right after).
constexpr int kPendingTakeWaitMs = 2000;
// A spawned program's bound on an owner that keeps answering "wait".
constexpr int kTakeGiveUpMs = 10000;
// After this long the program asks the owner to relay it instead, which
// it does while none of its own threads waits inside a call on it.
constexpr int kPendingRelayAfterMs = 250;
}  // namespace

void pending_from_environment() {
  const char* v = ::getenv(smcr::exec_carry::kPendingVariable);
  if (!v) return;
  std::string value = v;
  ::unsetenv(smcr::exec_carry::kPendingVariable);
  std::vector<std::pair<pid_t, uint64_t>> named;  // (owner, inode)
  for (const char* p = value.c_str(); *p;) {
    char* end = nullptr;
    long owner = std::strtol(p, &end, 10);
    if (owner <= 0 || !end || *end != ':') break;
    p = end + 1;
    while (*p && *p != ';') {
      uint64_t ino = std::strtoull(p, &end, 10);
      if (end == p) break;
      named.emplace_back(static_cast<pid_t>(owner), ino);
      p = *end == ',' ? end + 1 : end;
    }
    if (*p != ';') break;
    ++p;
  }
  if (named.empty()) return;
  std::lock_guard<std::mutex> lock(g_pending_mu);
  sys::for_each_open_fd([&](int fd) {
    struct stat st {};
    if (fd_table().kind(fd) != kFdUnknown || sys::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return;
    for (auto [owner, ino] : named)
      if (ino == st.st_ino) {
        const uint64_t inode = ino;  // a structured binding: not capturable before C++20's P1091 (clang 15)
        bool first = std::none_of(pending_takes().begin(), pending_takes().end(),
                                  [inode](const PendingTake& p) { return p.ino == inode; });
        if (first) counters().exec_pending.fetch_add(1, std::memory_order_relaxed);
        pending_takes().push_back({fd, owner, ino});
        fd_table().set_kind(fd, kFdTakePending);
        SMCR_LOG(1, "exec: fd %d is an SMC-R connection pid %d still held at the exec (socket %llu): taken on first use", fd,
                 static_cast<int>(owner), static_cast<unsigned long long>(ino));
        return;
      }
  });
}

void settle_pending(int fd) {
  std::lock_guard<std::mutex> lock(g_pending_mu);
  if (fd_table().kind(fd) != kFdTakePending) return;  // settled meanwhile
  auto& all = pending_takes();
  auto it = std::find_if(all.begin(), all.end(), [fd](const PendingTake& p) { return p.fd == fd; });
  if (it == all.end()) {
    fd_table().set_kind(fd, kFdUnknown);
    return;
  }
  pid_t owner = it->owner;
  uint64_t ino = it->ino;
  std::vector<int> numbers;
  for (const PendingTake& p : all)
    if (p.ino == ino) {
      numbers.push_back(p.fd);
      fd_table().set_kind(p.fd, kFdUnknown);
    }
  std::erase_if(all, [ino](const PendingTake& p) { return p.ino == ino; });
  int64_t now = sys::now_ms();
  take_one(owner, ino, numbers, now + kPendingRelayAfterMs, true, now + kPendingTakeWaitMs);
}

std::string pending_variable_for(std::vector<std::pair<pid_t, uint64_t>> pending) {
  if (pending.empty()) return {};
  std::sort(pending.begin(), pending.end());
  pending.erase(std::unique(pending.begin(), pending.end()), pending.end());
  std::string v = std::string(smcr::exec_carry::kPendingVariable) + "=";
  for (size_t i = 0; i < pending.size(); ++i) {
    bool same_owner = i > 0 && pending[i].first == pending[i - 1].first;
    if (!same_owner) v += std::to_string(pending[i].first) + ":";
    v += std::to_string(pending[i].second);
    v += i + 1 < pending.size() ? (pending[i + 1].first == pending[i].first ? "," : ";") : ";";
  }
  return v;
}

void surviving_pending(std::vector<std::pair<pid_t, uint64_t>>* pending, const std::vector<int>& dup_sources) {
  std::lock_guard<std::mutex> lock(g_pending_mu);
  for (const PendingTake& p : pending_takes()) {
    int flags = sys::fcntl(p.fd, F_GETFD);
    if ((flags >= 0 && !(flags & FD_CLOEXEC)) || std::find(dup_sources.begin(), dup_sources.end(), p.fd) != dup_sources.end())
      pending->emplace_back(p.owner, p.ino);
  }
}

void take_from_environment() {
  const char* v = ::getenv(smcr::exec_carry::kTakeVariable);
  if (!v) return;
  std::string value = v;
  ::unsetenv(smcr::exec_carry::kTakeVariable);
  char* end = nullptr;
  long owner = std::strtol(value.c_str(), &end, 10);
  if (owner <= 0 || !end || *end != ':') return;
  std::vector<uint64_t> inodes;
  for (const char* p = end + 1; *p;) {
    uint64_t ino = std::strtoull(p, &end, 10);
    if (end == p) break;
    inodes.push_back(ino);
    p = *end == ',' ? end + 1 : end;
  }
  // The numbers they have here (the spawn may have moved them: dup2 onto 0).
  std::vector<std::vector<int>> numbers(inodes.size());
  sys::for_each_open_fd([&](int fd) {
    struct stat st {};
    if (sys::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return;
    if (fd_table().kind(fd) == kFdExecInherited) return;  // adopted (SMCR_EXEC_TCP)
    for (size_t i = 0; i < inodes.size(); ++i)
      if (inodes[i] == st.st_ino) numbers[i].push_back(fd);
  });
  int64_t relay_after = sys::now_ms() + kHeldWaitMs;
  for (size_t i = 0; i < inodes.size(); ++i)
    if (!numbers[i].empty())
      take_one(static_cast<pid_t>(owner), inodes[i], numbers[i], relay_after, true, relay_after + kTakeGiveUpMs);
}

namespace {
// On the parent's engine thread: the connections whose application socket
// has one of `inodes`, with all their numbers, are marked for the new
// program to take (their inodes into *taken) or relayed.
void relay_sockets(const std::vector<uint64_t>& inodes, bool program_takes, std::vector<uint64_t>* taken) {
  // Not a forked child's copy: claiming it would hold the engine thread.
  auto conns = connections_where([&inodes](int fd, Connection* c) {
    return !c->foreign() && std::find(inodes.begin(), inodes.end(), inode_of(fd)) != inodes.end();
  });
  // The child asks for the relayed ones' TCP sockets next (relay_for_vfork_exec).
  pass_or_relay(conns, program_takes, taken, "a program exec'd by a vfork child inherits it", true);
}
}  // namespace

void relay_for_vfork_exec(std::vector<std::pair<int, int>>* pairs, bool program_takes, std::string* take_variable) {
  bool any = false;
  fd_table().for_each_conn([&](int) { any = true; });
  if (!any) return;
  // The child's descriptors, from /proc/self/fd (no allocation on the way).
  std::vector<uint64_t> inodes;
  std::vector<int> numbers;  // the child's, beside inodes
  sys::for_each_open_fd([&](int fd) {
    int fdflags = sys::fcntl(fd, F_GETFD);
    struct stat st {};
    if (fdflags < 0 || (fdflags & FD_CLOEXEC) || sys::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return;
    inodes.push_back(st.st_ino);
    numbers.push_back(fd);
  });
  if (inodes.empty()) return;
  auto taken = std::make_shared<std::vector<uint64_t>>();
  if (!Engine::run_on_engine_thread([inodes, program_takes, taken] { relay_sockets(inodes, program_takes, taken.get()); },
                                    3000)) {
    SMCR_LOG(0, "exec in a vfork child: the parent's engine did not relay its connections in time");
    return;
  }
  pid_t parent = static_cast<pid_t>(smcr::sys::raw_syscall(SYS_getppid));
  if (!taken->empty()) *take_variable = take_variable_for(parent, *taken);
  // The relayed ones' TCP sockets, from the parent's engine, for the new
  // program to answer getpeername with (named in its environment, as an
  // exec's are).
  for (size_t i = 0; i < inodes.size(); ++i)
    if (std::find(taken->begin(), taken->end(), inodes[i]) != taken->end()) continue;
    else if (int tcp = ask_tcp_socket(parent, inodes[i]); tcp >= 0) pairs->emplace_back(numbers[i], tcp);
}

void adopt_pair(int fd, int tcp) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!add_locked(fd, tcp)) release_tcp_locked(tcp);
}

int tcp_fd(int fd) {
  for (Pair& p : g_pairs)
    if (p.fd.load(std::memory_order_acquire) == fd) return p.tcp.load(std::memory_order_relaxed);
  return -1;
}

void forget(int fd) {
  if (fd_table().kind(fd) == kFdTakePending) {
    std::lock_guard<std::mutex> lock(g_pending_mu);
    std::erase_if(pending_takes(), [fd](const PendingTake& p) { return p.fd == fd; });
    fd_table().set_kind(fd, kFdUnknown);
    return;
  }
  if (fd_table().kind(fd) != kFdExecInherited) return;
  std::lock_guard<std::mutex> lock(g_mu);
  for (Pair& p : g_pairs)
    if (p.fd.load(std::memory_order_relaxed) == fd) {
      int tcp = p.tcp.load(std::memory_order_relaxed);
      p.fd.store(-1, std::memory_order_release);
      release_tcp_locked(tcp);
    }
  fd_table().set_kind(fd, kFdUnknown);
}

void duplicated(int from, int to) {
  if (from != to && fd_table().kind(from) == kFdTakePending) {
    forget(to);
    std::lock_guard<std::mutex> lock(g_pending_mu);
    for (const PendingTake& p : pending_takes())
      if (p.fd == from) {
        pending_takes().push_back({to, p.owner, p.ino});
        fd_table().set_kind(to, kFdTakePending);
        break;
      }
    return;
  }
  if (from == to || fd_table().kind(from) != kFdExecInherited) return;
  forget(to);
  std::lock_guard<std::mutex> lock(g_mu);
  int tcp = -1;
  for (Pair& p : g_pairs)
    if (p.fd.load(std::memory_order_relaxed) == from) tcp = p.tcp.load(std::memory_order_relaxed);
  if (tcp >= 0) add_locked(to, tcp);
}

void surviving(std::vector<std::pair<int, int>>* pairs) {
  for (Pair& p : g_pairs) {
    int fd = p.fd.load(std::memory_order_acquire);
    if (fd < 0) continue;
    int flags = sys::fcntl(fd, F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC)) pairs->emplace_back(fd, p.tcp.load(std::memory_order_relaxed));
  }
}

char* const* environment_for_exec(char* const envp[], const std::vector<std::pair<int, int>>& pairs,
                                  ExecEnvironment* storage) {
  if (!pairs.empty()) {
    storage->variable = std::string(kVariable) + "=";
    std::vector<std::pair<int, int>> passed;  // TCP socket -> its inheritable duplicate
    bool named_any = false;
    for (auto [fd, tcp] : pairs) {
      int dup = -1;
      for (auto [from, to] : passed)
        if (from == tcp) dup = to;
      if (dup < 0) {
        int base = sys::hidden_fd_base();
        dup = sys::fcntl(tcp, F_DUPFD, base > 0 ? base : 3);  // without FD_CLOEXEC
        if (dup < 0) continue;
        passed.emplace_back(tcp, dup);
        storage->inheritable.push_back(dup);
      }
      if (storage->variable.back() != '=') storage->variable += ',';
      storage->variable += std::to_string(fd) + ":" + std::to_string(dup);
      named_any = true;
    }
    if (!named_any) storage->variable.clear();
  }
  if (storage->variable.empty() && storage->carry_variable.empty() && storage->take_variable.empty() &&
      storage->pending_variable.empty())
    return envp;
  auto named = [](const char* e, const char* name) {
    size_t len = std::strlen(name);
    return std::strncmp(e, name, len) == 0 && e[len] == '=';
  };
  for (char* const* e = envp; e && *e; ++e)
    if (!named(*e, kVariable) && !named(*e, smcr::exec_carry::kVariable) && !named(*e, smcr::exec_carry::kTakeVariable) &&
        !named(*e, smcr::exec_carry::kPendingVariable))
      storage->envp.push_back(*e);
  if (!storage->variable.empty()) storage->envp.push_back(storage->variable.data());
  if (!storage->carry_variable.empty()) storage->envp.push_back(storage->carry_variable.data());
  if (!storage->take_variable.empty()) storage->envp.push_back(storage->take_variable.data());
  if (!storage->pending_variable.empty()) storage->envp.push_back(storage->pending_variable.data());
  storage->envp.push_back(nullptr);
  return storage->envp.data();
}

void exec_failed(ExecEnvironment* storage) {
  int saved = errno;  // the failed exec's
  for (int fd : storage->inheritable) sys::close(fd);
  errno = saved;
  storage->inheritable.clear();
}

}  // namespace smcr::preload::exec_inherit
