// The engine thread's services to other code of the process: tasks run on
// it (for a vfork() child, which cannot start a thread of its own), woken
// even when the caller has no copy of the engine's wake-up descriptor, and
// the diagnostics socket's requests (a report; the TCP socket behind a
// stream this process relays for another one).
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/engine.h"
#include "core/sys.h"

namespace {

using smcr::Engine;

pid_t tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

TEST(Engine, RunsATaskOnItsThreadAndWaitsForIt) {
  Engine::get();
  std::atomic<pid_t> ran_on{0};
  ASSERT_TRUE(Engine::run_on_engine_thread([&] { ran_on = tid(); }, 2000));
  EXPECT_NE(ran_on.load(), 0);
  EXPECT_NE(ran_on.load(), tid());
}

// A vfork() child that closed every descriptor but 0-2 (CPython's
// close_fds) asks the engine of the process whose memory it shares.
TEST(Engine, AVforkChildWithoutTheWakeDescriptorIsServed) {
  Engine::get();
  static std::atomic<int> ran{0};
  ran = 0;
  pid_t pid = vfork();
  if (pid == 0) {
    ::syscall(SYS_close_range, 3, ~0U, 0);
    bool ok = Engine::run_on_engine_thread([] { ran = 1; }, 3000);
    _exit(ok ? 0 : 1);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_EQ(ran.load(), 1);
}

int connect_diag() {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len;
  sockaddr_un a = Engine::diagnostics_address(getpid(), &len);
  timeval tv{5, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    close(s);
    return -1;
  }
  return s;
}

int g_answer = -1;  // what the lookup hands out (a duplicate, for the engine to close)
uint64_t g_answer_ino = 0;
int lookup(uint64_t ino) { return ino == g_answer_ino ? dup(g_answer) : -1; }

TEST(Engine, DiagnosticsSocketAnswersReportsAndTcpRequests) {
  Engine::get();
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  struct stat st {};
  ASSERT_EQ(fstat(pair[0], &st), 0);
  g_answer = pair[0];
  g_answer_ino = st.st_ino;
  Engine::set_tcp_lookup(&lookup);

  // A report, asked for as smcr_stat asks.
  int s = connect_diag();
  ASSERT_GE(s, 0) << strerror(errno);
  ASSERT_EQ(write(s, "report\n", 7), 7);
  std::string report;
  char buf[4096];
  for (ssize_t k; (k = read(s, buf, sizeof buf)) > 0;) report.append(buf, static_cast<size_t>(k));
  close(s);
  EXPECT_EQ(report.rfind("process pid=" + std::to_string(getpid()), 0), 0u) << report;

  // The socket behind an inode it knows: sent over SCM_RIGHTS.
  s = connect_diag();
  ASSERT_GE(s, 0);
  std::string req = "tcp " + std::to_string(g_answer_ino) + "\n";
  ASSERT_EQ(write(s, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  char byte = 0;
  int got = -1;
  ASSERT_EQ(smcr::sys::recv_with_fd(s, &byte, 1, &got, 0), 1);
  close(s);
  EXPECT_EQ(byte, 't');
  ASSERT_GE(got, 0) << "no descriptor came with the answer";
  struct stat gst {};
  ASSERT_EQ(fstat(got, &gst), 0);
  EXPECT_EQ(gst.st_ino, st.st_ino) << "the same socket";
  // Received at the lowest free number by the kernel, moved up at once: an
  // application thread opening a file meanwhile gets TCP's number.
  if (smcr::sys::hidden_fd_base() > 0) {
    EXPECT_GE(got, smcr::sys::hidden_fd_base()) << "left in the application's numbers";
  }
  close(got);

  // One it does not know: a byte alone.
  s = connect_diag();
  ASSERT_GE(s, 0);
  ASSERT_EQ(write(s, "tcp 1\n", 6), 6);
  ASSERT_EQ(smcr::sys::recv_with_fd(s, &byte, 1, &got, 0), 1);
  close(s);
  EXPECT_EQ(byte, '-');
  EXPECT_EQ(got, -1) << "a descriptor came with the refusal";
  Engine::set_tcp_lookup(nullptr);
  close(pair[0]);
  close(pair[1]);
}

// "take"/"relay" requests (a spawned program asking for its connection,
// core/exec_carry.h) reach the take handler with the inode and the kind,
// and it answers on the request's own socket.
uint64_t g_take_ino = 0;
bool g_take_relay = false;
void take_handler(uint64_t ino, int fd, bool relay) {
  g_take_ino = ino;
  g_take_relay = relay;
  char b = relay ? 't' : 'w';
  smcr::sys::send(fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

char ask(const std::string& req) {
  int s = connect_diag();
  if (s < 0) return 0;
  char byte = 0;
  if (write(s, req.data(), req.size()) != static_cast<ssize_t>(req.size()) || read(s, &byte, 1) != 1) byte = 0;
  close(s);
  return byte;
}

TEST(Engine, TakeAndRelayRequestsReachTheTakeHandler) {
  Engine::get();
  // No handler yet (no connection was ever handed to a program): refused.
  Engine::set_take_handler(nullptr);
  EXPECT_EQ(ask("take 77\n"), '-');
  Engine::set_take_handler(&take_handler);
  EXPECT_EQ(ask("take 12345\n"), 'w');
  EXPECT_EQ(g_take_ino, 12345u);
  EXPECT_FALSE(g_take_relay);
  EXPECT_EQ(ask("relay 678\n"), 't');
  EXPECT_EQ(g_take_ino, 678u);
  EXPECT_TRUE(g_take_relay);
  Engine::set_take_handler(nullptr);
}

}  // namespace
