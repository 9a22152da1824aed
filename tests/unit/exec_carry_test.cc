// The record a process gives the program it spawned with a connection
// (core/exec_carry.h): it travels over a stream socket with its descriptors
// and arrives whole, or not at all (nothing leaks).
#include "core/exec_carry.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "core/sys.h"

namespace smcr::exec_carry {
namespace {

ino_t inode(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

int open_descriptors() {
  int n = 0;
  for (int fd = 0; fd < 1024; ++fd)
    if (fcntl(fd, F_GETFD) >= 0) ++n;
  return n;
}

// Reads the kind byte and what came with it, then the record.
bool receive(int sock, Record* r) {
  char kind = 0;
  int fds[sys::kMaxPassedFds];
  size_t count = 0;
  if (sys::recv_with_fds(sock, &kind, 1, fds, sys::kMaxPassedFds, &count, 0) != 1 || kind != kReplyRecord) {
    for (size_t i = 0; i < count; ++i) close(fds[i]);
    return false;
  }
  return receive_record(sock, r, 1000, fds, count);
}

TEST(ExecCarryRecord, TravelsWithItsDescriptorsInTheirFields) {
  int pair[2], a[2], b[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, a), 0);
  ASSERT_EQ(pipe(b), 0);
  Record r;
  r.local_token = 0x11223344;
  r.rmb_size = 65536;
  r.link_fd = a[0];
  r.tcp_fd = a[1];
  r.engine_end = b[0];
  r.peer_bell_fd = -1;  // none: its field stays -1 at the other end
  r.memfd = b[1];
  r.peer_memfd = a[0];  // the same file twice travels twice
  std::memset(r.snapshot, 0xAB, sizeof r.snapshot);
  ASSERT_TRUE(send_record(pair[0], r));
  Record got;
  ASSERT_TRUE(receive(pair[1], &got));
  EXPECT_EQ(got.local_token, 0x11223344u);
  EXPECT_EQ(got.rmb_size, 65536u);
  EXPECT_EQ(got.snapshot[0], 0xAB);
  EXPECT_EQ(got.snapshot[sizeof got.snapshot - 1], 0xAB);
  EXPECT_EQ(got.peer_bell_fd, -1);
  EXPECT_EQ(got.app_end, -1);
  for (auto [mine, theirs] : {std::pair{a[0], got.link_fd}, {a[1], got.tcp_fd}, {b[0], got.engine_end},
                              {b[1], got.memfd}, {a[0], got.peer_memfd}}) {
    ASSERT_GE(theirs, 0);
    EXPECT_NE(theirs, mine) << "a new descriptor";
    EXPECT_EQ(inode(theirs), inode(mine)) << "for the same file";
    EXPECT_NE(fcntl(theirs, F_GETFD) & FD_CLOEXEC, 0) << "close-on-exec";
  }
  for (int32_t* fd : descriptors(&got)) sys::close_reset(fd);
  for (int fd : {pair[0], pair[1], a[0], a[1], b[0], b[1]}) close(fd);
}

TEST(ExecCarryRecord, AShortOrForeignRecordIsRefusedAndItsDescriptorsClosed) {
  int before = open_descriptors();
  int pair[2], p[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  ASSERT_EQ(pipe(p), 0);
  // A sender that stops halfway: the kind byte and descriptors, then less
  // than a record, then its end.
  unsigned char half[1 + sizeof(Record) / 2] = {static_cast<unsigned char>(kReplyRecord)};
  ASSERT_EQ(sys::sendmsg_with_fds(pair[0], half, sizeof half, p, 2, 0), static_cast<ssize_t>(sizeof half));
  shutdown(pair[0], SHUT_WR);
  Record got;
  EXPECT_FALSE(receive(pair[1], &got));
  close(pair[0]);
  close(pair[1]);
  // Another build's record (its magic): refused the same way.
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  Record other;
  other.magic = kMagic + 1;
  other.link_fd = p[0];
  ASSERT_TRUE(send_record(pair[0], other));
  EXPECT_FALSE(receive(pair[1], &got));
  close(pair[0]);
  close(pair[1]);
  close(p[0]);
  close(p[1]);
  EXPECT_EQ(open_descriptors(), before) << "a descriptor that came with a refused record stayed open";
}

}  // namespace
}  // namespace smcr::exec_carry
