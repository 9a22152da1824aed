// Fetching a peer process's readiness socket (core/peer_fd.h) from a real
// forked process with pidfd_getfd: only the socket the record's inode names,
// and nothing from a process that is gone. And the shm link's word for
// the process at its other end (SO_PEERCRED), which a fetch must match.
#include "core/peer_fd.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>

#include "core/fabric_shm.h"

namespace smcr {
namespace {

struct ChildFds {
  int sock = -1, other_end = -1, pipe_read = -1;
  uint64_t sock_ino = 0, pipe_ino = 0;
};

uint64_t ino_of(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

// A child that holds a socketpair and a pipe, tells us their numbers and
// inodes, echoes what arrives on the socketpair's other end back to us on
// `report`, and lives until we close `hold`.
class PeerProcess {
 public:
  PeerProcess() {
    int report[2], hold[2];
    EXPECT_EQ(pipe(report), 0);
    EXPECT_EQ(pipe(hold), 0);
    pid_ = fork();
    if (pid_ == 0) {
      close(report[0]);
      close(hold[1]);
      ChildFds c;
      int sv[2], p[2];
      if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || pipe(p) != 0) _exit(1);
      c.sock = sv[0];
      c.other_end = sv[1];
      c.pipe_read = p[0];
      c.sock_ino = ino_of(sv[0]);
      c.pipe_ino = ino_of(p[0]);
      if (write(report[1], &c, sizeof c) != sizeof c) _exit(1);
      // What the parent rings on the fetched socket arrives here; the end
      // of `hold` ends us.
      for (;;) {
        pollfd w[2] = {{sv[1], POLLIN, 0}, {hold[0], POLLIN, 0}};
        if (poll(w, 2, -1) < 0) _exit(1);
        char b;
        if (w[1].revents) _exit(0);
        if (read(sv[1], &b, 1) == 1 && write(report[1], &b, 1) != 1) _exit(1);
      }
    }
    close(report[1]);
    close(hold[0]);
    report_ = report[0];
    hold_ = hold[1];
    ChildFds got;
    EXPECT_EQ(read(report_, &got, sizeof got), static_cast<ssize_t>(sizeof got));
    fds_ = got;
  }
  ~PeerProcess() { end(); }
  void end() {
    if (pid_ <= 0) return;
    close(hold_);
    close(report_);
    int status;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  int pid() const { return pid_; }
  const ChildFds& fds() const { return fds_; }
  int report() const { return report_; }

 private:
  int pid_ = -1, report_ = -1, hold_ = -1;
  ChildFds fds_;
};

TEST(PeerFd, FetchesThePeersSocketThatTheInodeNames) {
  ASSERT_TRUE(peer_fd::enabled());
  PeerProcess peer;
  ASSERT_GT(peer.pid(), 0);
  int fd = peer_fd::fetch_socket(peer.pid(), peer.fds().sock, peer.fds().sock_ino);
  if (fd < 0 && (errno == EPERM || errno == ENOSYS))
    GTEST_SKIP() << "pidfd_getfd refused here (" << strerror(errno) << "): the fetch cannot be tested";
  ASSERT_GE(fd, 0) << strerror(errno);
  EXPECT_EQ(ino_of(fd), peer.fds().sock_ino);
  EXPECT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  // The very socket: a byte rung on it reaches the peer's other end.
  char b = 'r';
  ASSERT_EQ(write(fd, &b, 1), 1);
  char echoed = 0;
  ASSERT_EQ(read(peer.report(), &echoed, 1), 1);
  EXPECT_EQ(echoed, 'r');
  close(fd);
}

TEST(PeerFd, RefusesAnotherFileThanTheRecordNames) {
  PeerProcess peer;
  ASSERT_GT(peer.pid(), 0);
  // The number now names another socket (the inode differs), a pipe (not a
  // socket, whatever its inode), or nothing.
  EXPECT_LT(peer_fd::fetch_socket(peer.pid(), peer.fds().sock, peer.fds().sock_ino + 1), 0);
  EXPECT_LT(peer_fd::fetch_socket(peer.pid(), peer.fds().other_end, peer.fds().sock_ino), 0);
  EXPECT_LT(peer_fd::fetch_socket(peer.pid(), peer.fds().pipe_read, peer.fds().pipe_ino), 0);
  EXPECT_LT(peer_fd::fetch_socket(peer.pid(), 900, peer.fds().sock_ino), 0);
  EXPECT_LT(peer_fd::fetch_socket(0, peer.fds().sock, peer.fds().sock_ino), 0);
}

TEST(PeerFd, NothingFromAProcessThatIsGone) {
  PeerProcess peer;
  int pid = peer.pid();
  ChildFds fds = peer.fds();
  int first = peer_fd::fetch_socket(pid, fds.sock, fds.sock_ino);  // caches its pidfd
  if (first >= 0) close(first);
  peer.end();
  EXPECT_LT(peer_fd::fetch_socket(pid, fds.sock, fds.sock_ino), 0);
}

TEST(PeerFd, TheShmLinkNamesTheProcessAtItsOtherEnd) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  ShmLink link(sv[0]);  // owns sv[0]
  EXPECT_EQ(link.peer_pid(), getpid());
  EXPECT_EQ(link.peer_pid(), getpid());  // asked once, kept
  close(sv[1]);
}

}  // namespace
}  // namespace smcr
