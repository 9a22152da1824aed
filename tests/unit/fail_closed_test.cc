// What the shim does when the kernel refuses it something it cannot do
// without: randomness (getrandom) and threads (clone). Each case runs in a
// forked child under a seccomp filter that makes those system calls fail,
// as a sandboxing policy or an exhausted thread limit would. The refusal
// must be closed: no predictable secret, no SMC-R connection that nothing
// serves, and the TCP connection under the handshake still carries the
// application's bytes.
#include <arpa/inet.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "core/engine.h"
#include "core/fabric_shm.h"
#include "core/handshake.h"
#include "core/random.h"

namespace smcr {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "add this architecture's AUDIT_ARCH_ value"
#endif

// Fails the child with the line and what was checked.
#define CHILD_CHECK(cond)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "child check failed at line %d: %s\n", __LINE__, #cond); \
      _exit(1);                                                                \
    }                                                                          \
  } while (0)

struct Refuse {
  bool getrandom = false;  // getrandom: ENOSYS
  bool threads = false;    // clone3: ENOSYS (glibc then tries clone), clone with CLONE_THREAD: EAGAIN
};

// For this thread and those it starts from now on, for good.
bool install_filter(const Refuse& r) {
  std::vector<sock_filter> f;
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  if (r.getrandom) {
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getrandom, 0, 1));
    f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
  }
  if (r.threads) {
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1));
    f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3));
    // The flags, clone's first argument on both architectures (low word).
    f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1));
    f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAGAIN));
  }
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0;
}

// Runs `body` in a forked child and expects it to pass; a child still
// running after `limit_s` is killed: a handshake that waits for what never
// comes is a failure too.
template <typename Body>
void in_child(int limit_s, Body body) {
  fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(static_cast<unsigned>(limit_s));
    body();
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status))
    FAIL() << "child killed by signal " << WTERMSIG(status)
           << (WTERMSIG(status) == SIGALRM ? " (it hung: the alarm went off)" : "");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed (its stderr says where)";
}

// A connected loopback TCP pair: *client, *server.
bool tcp_pair(int* client, int* server) {
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, 1) != 0 ||
      getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return false;
  *client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(*client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return false;
  *server = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  close(l);
  return *server >= 0;
}

// After both handshakes fell back: the TCP connection carries the
// application's bytes, both ways, nothing of the CLC left in them.
bool tcp_carries_bytes(int a, int b) {
  const char ping[] = "ping through TCP", pong[] = "pong through TCP";
  char buf[64] = {};
  if (send(a, ping, sizeof ping, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof ping)) return false;
  if (recv(b, buf, sizeof ping, MSG_WAITALL) != static_cast<ssize_t>(sizeof ping) || memcmp(buf, ping, sizeof ping))
    return false;
  if (send(b, pong, sizeof pong, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof pong)) return false;
  if (recv(a, buf, sizeof pong, MSG_WAITALL) != static_cast<ssize_t>(sizeof pong) || memcmp(buf, pong, sizeof pong))
    return false;
  return true;
}

bool fell_back(const HandshakeOutcome& o, Fallback why) {
  if (o.kind == HandshakeOutcome::Kind::kFallback && o.reason == why) return true;
  fprintf(stderr, "outcome kind %d reason %s (want fallback, %s)\n", static_cast<int>(o.kind), fallback_name(o.reason),
          fallback_name(why));
  return false;
}

// One handshake over a fresh TCP pair, the server's half on a thread: true
// when each side fell back for the reason given and TCP still carries bytes.
bool handshake_falls_back(Fallback client_why, Fallback server_why) {
  int c = -1, s = -1;
  if (!tcp_pair(&c, &s)) return false;
  HandshakeOutcome server;
  std::thread t([&] { server = clc_server(s); });
  HandshakeOutcome client = clc_client(c);
  t.join();
  return fell_back(client, client_why) && fell_back(server, server_why) && tcp_carries_bytes(c, s);
}

TEST(FailClosed, NoRandomnessNoSecretAndNoSmcr) {
  in_child(20, [] {
    CHILD_CHECK(install_filter({.getrandom = true}));
    uint8_t buf[16];
    errno = 0;
    CHILD_CHECK(!random_bytes(buf, sizeof buf));
    CHILD_CHECK(errno == ENOSYS);
    // The rendezvous secret (RKey, VA, QPN) and the address it listens on.
    LocalRmb rmb;
    CHILD_CHECK(!shm_alloc_rmb(65536, &rmb));
    CHILD_CHECK(ShmRendezvous::instance().expect(0x1234, 0x5678, -1) == 0);
    CHILD_CHECK(ShmRendezvous::instance().listener_fd() < 0);
    // The handshake (tokens, PSNs, link user ids, the identity): the
    // client declines in place of its Proposal.
    CHILD_CHECK(handshake_falls_back(Fallback::kInternal, Fallback::kPeerDeclined));
  });
}

// The identity was made before randomness went away: the client proposes,
// and the server, with no alert token or PSN to be had, declines.
TEST(FailClosed, NoRandomnessForTheServersTokensDeclines) {
  in_child(20, [] {
    CHILD_CHECK(shm_identity().gid[0] != 0);
    CHILD_CHECK(install_filter({.getrandom = true}));
    CHILD_CHECK(handshake_falls_back(Fallback::kPeerDeclined, Fallback::kInternal));
  });
}

// No thread for the engine: the client declines at once, in place of its
// Proposal, instead of making a connection nothing would serve.
TEST(FailClosed, NoEngineThreadClientDeclines) {
  in_child(20, [] {
    CHILD_CHECK(install_filter({.threads = true}));
    CHILD_CHECK(!Engine::get().thread_running());
    int c = -1, s = -1;
    CHILD_CHECK(tcp_pair(&c, &s));
    HandshakeOutcome client = clc_client(c);  // nothing to wait for: it must not ask the server
    CHILD_CHECK(fell_back(client, Fallback::kResources));
    HandshakeOutcome server = clc_server(s);
    CHILD_CHECK(fell_back(server, Fallback::kPeerDeclined));
    CHILD_CHECK(tcp_carries_bytes(c, s));
    // Still none on a second try, and nothing was left half started.
    CHILD_CHECK(!Engine::get().thread_running());
  });
}

// The server without an engine thread declines the Proposal of a client
// that has one (this process, unfiltered).
TEST(FailClosed, NoEngineThreadServerDeclines) {
  int c = -1, s = -1;
  ASSERT_TRUE(tcp_pair(&c, &s));
  fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);
    close(c);
    CHILD_CHECK(install_filter({.threads = true}));
    HandshakeOutcome server = clc_server(s);
    CHILD_CHECK(fell_back(server, Fallback::kResources));
    char buf[32] = {};
    CHILD_CHECK(recv(s, buf, 5, MSG_WAITALL) == 5 && memcmp(buf, "hello", 5) == 0);
    CHILD_CHECK(send(s, "world", 5, MSG_NOSIGNAL) == 5);
    _exit(0);
  }
  close(s);
  HandshakeOutcome client = clc_client(c);
  EXPECT_EQ(client.kind, HandshakeOutcome::Kind::kFallback);
  EXPECT_EQ(client.reason, Fallback::kPeerDeclined);
  ASSERT_EQ(send(c, "hello", 5, MSG_NOSIGNAL), 5);
  char buf[8] = {};
  EXPECT_EQ(recv(c, buf, 5, MSG_WAITALL), 5);
  EXPECT_EQ(std::string(buf, 5), "world");
  close(c);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

}  // namespace
}  // namespace smcr
