// Handing a connection to a forked child (core/handoff.h): the re-homing
// link message, the readiness socket's marker, and the shared state word's
// transitions. Real sockets and a real fork for what crosses processes; the
// end-to-end handovers (ForkingMixIn, inetd exec, a parent killed
// mid-stream) are in tests/integration/fork_test.sh.
#include "core/handoff.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace smcr::handoff {
namespace {

TEST(Rehome, RequestAndReplyRoundTrip) {
  Rehome ask;
  ask.receiver_token = 0x01020304;
  ask.sender_token = 0xA0B0C0D0;
  auto wire = encode_rehome(ask);
  EXPECT_EQ(wire[0], kRehomeMessageType);
  EXPECT_EQ(wire[1], 44);
  // Big-endian tokens at fixed offsets: the peer may be another build.
  EXPECT_EQ(wire[4], 0x01);
  EXPECT_EQ(wire[7], 0x04);
  EXPECT_EQ(wire[8], 0xA0);
  auto back = decode_rehome(wire);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->receiver_token, ask.receiver_token);
  EXPECT_EQ(back->sender_token, ask.sender_token);
  EXPECT_FALSE(back->reply);
  EXPECT_FALSE(back->negative);

  Rehome no = ask;
  no.reply = no.negative = true;
  auto nb = decode_rehome(encode_rehome(no));
  ASSERT_TRUE(nb);
  EXPECT_TRUE(nb->reply);
  EXPECT_TRUE(nb->negative);
}

TEST(Rehome, MalformedMessagesAreNotRequests) {
  Rehome ask;
  auto wire = encode_rehome(ask);
  auto bad = wire;
  bad[1] = 40;  // wrong length byte
  EXPECT_FALSE(decode_rehome(bad));
  bad = wire;
  bad[2] = 0x01;  // reserved flag bits
  EXPECT_FALSE(decode_rehome(bad));
  bad = wire;
  bad[2] = 0x40;  // negative without reply
  EXPECT_FALSE(decode_rehome(bad));
  bad = wire;
  bad[0] = 0xBE;  // the bell message
  EXPECT_FALSE(decode_rehome(bad));
  EXPECT_FALSE(decode_rehome(std::span<const uint8_t>(wire.data(), 43)));
}

// The descriptor a marker carried is the pipe's read end (what goes in
// `pipe_in` comes out of `carried`), and "data" after the marker is left
// for the stream's reader.
void expect_carried_pipe_then_data(int pipe_in, int carried, int app_end) {
  ASSERT_EQ(write(pipe_in, "x", 1), 1);
  char c = 0;
  ASSERT_EQ(read(carried, &c, 1), 1);
  EXPECT_EQ(c, 'x');
  char rest[8] = {};
  ASSERT_EQ(recv(app_end, rest, sizeof rest, MSG_DONTWAIT), 4);
  EXPECT_EQ(std::memcmp(rest, "data", 4), 0);
}

TEST(Marker, AReaderGetsOnlyTheBytesBeforeItAndItsDescriptors) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  int app_end = sv[0], engine_end = sv[1];
  // Readiness bytes, then the marker carrying a descriptor, then data that
  // must stay for the stream's reader.
  ASSERT_EQ(send(engine_end, "rr", 2, 0), 2);
  int carried[2];
  ASSERT_EQ(pipe(carried), 0);
  int one[1] = {carried[0]};
  ASSERT_TRUE(send_marker(engine_end, one, kRehomeMarker));
  ASSERT_EQ(send(engine_end, "data", 4, 0), 4);
  int got[2] = {-1, -1};
  ASSERT_EQ(drain_to_marker(app_end, got, 1000, kRehomeMarker), 1);
  ASSERT_GE(got[0], 0);
  expect_carried_pipe_then_data(carried[1], got[0], app_end);
  for (int fd : {app_end, engine_end, carried[0], carried[1], got[0]}) close(fd);
}

TEST(Marker, NoMarkerMeansNoDescriptors) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_EQ(send(sv[1], "r", 1, 0), 1);
  int got[1] = {-1};
  EXPECT_EQ(drain_to_marker(sv[0], got, 50, kRelayMarker), -1);  // times out
  close(sv[1]);
  EXPECT_EQ(drain_to_marker(sv[0], got, 1000, kRelayMarker), -1);  // end of stream
  close(sv[0]);
}

// A re-homing marker the peer's refusal made void, then the relay's: the
// relay's reader skips the first (closing what it carried) and stops at its own.
TEST(Marker, AReaderOfOneKindSkipsTheOtherAndClosesItsDescriptors) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  int app_end = sv[0], engine_end = sv[1];
  int voided[2], relay[2];
  ASSERT_EQ(pipe(voided), 0);
  ASSERT_EQ(pipe(relay), 0);
  ASSERT_EQ(send(engine_end, "r", 1, 0), 1);
  int first[1] = {voided[0]};
  ASSERT_TRUE(send_marker(engine_end, first, kRehomeMarker));
  close(voided[0]);
  ASSERT_EQ(send(engine_end, "rr", 2, 0), 2);
  int second[1] = {relay[0]};
  ASSERT_TRUE(send_marker(engine_end, second, kRelayMarker));
  ASSERT_EQ(send(engine_end, "data", 4, 0), 4);
  int got[1] = {-1};
  ASSERT_EQ(drain_to_marker(app_end, got, 1000, kRelayMarker), 1);
  // The void marker's descriptor was closed: its pipe has no reader left.
  signal(SIGPIPE, SIG_IGN);
  EXPECT_EQ(write(voided[1], "x", 1), -1);
  EXPECT_EQ(errno, EPIPE);
  expect_carried_pipe_then_data(relay[1], got[0], app_end);
  for (int fd : {app_end, engine_end, voided[1], relay[0], relay[1], got[0]}) close(fd);
}

// A holder waiting on its claim learns that the owner died, killed or a
// zombie not reaped yet, and not while it lives. The owner is a child of
// this test (so that the test decides when it is reaped); the holder is
// the owner's child, which maps the owner's words.
TEST(StateWord, OwnerGoneOnlyOnceTheOwnerHasDied) {
  int report[2], reaped[2];
  ASSERT_EQ(pipe(report), 0);
  ASSERT_EQ(pipe(reaped), 0);
  pid_t owner = fork();
  ASSERT_GE(owner, 0);
  if (owner == 0) {
    std::atomic<uint32_t>* word = alloc_state();
    int alive[2];
    if (!word || pipe(alive) != 0) _exit(2);
    pid_t holder = fork();
    if (holder == 0) {
      char b;
      char line[3] = {owner_gone(word) ? '1' : '0', 0, 0};
      (void)!write(alive[1], "x", 1);
      for (int i = 0; i < 2000 && !owner_gone(word); ++i) usleep(1000);
      line[1] = owner_gone(word) ? '1' : '0';  // a zombie: the test has not reaped it
      (void)!write(report[1], line, 2);
      (void)!read(reaped[0], &b, 1);
      line[2] = owner_gone(word) ? '1' : '0';
      (void)!write(report[1], line + 2, 1);
      _exit(0);
    }
    char b;
    (void)!read(alive[0], &b, 1);  // the holder has looked while we live
    _exit(0);
  }
  char got[4] = {};
  ASSERT_EQ(read(report[0], got, 2), 2);
  int status;
  ASSERT_EQ(waitpid(owner, &status, 0), owner);
  ASSERT_EQ(write(reaped[1], "x", 1), 1);
  ASSERT_EQ(read(report[0], got + 2, 1), 1);
  EXPECT_EQ(got[0], '0') << "the owner was alive";
  EXPECT_EQ(got[1], '1') << "the owner was a zombie";
  EXPECT_EQ(got[2], '1') << "the owner was reaped";
  EXPECT_FALSE(owner_gone(alloc_state()));  // ours: alive
  for (int fd : {report[0], report[1], reaped[0], reaped[1]}) close(fd);
}

TEST(StateWord, TransitionsAreSeenByAForkedChild) {
  std::atomic<uint32_t>* w = alloc_state();
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->load(), kOwned);
  EXPECT_TRUE(transition(w, kOwned, kOffered));
  EXPECT_FALSE(transition(w, kOwned, kClaimDirect));  // not the current state
  auto* snap = static_cast<unsigned char*>(snapshot_area(w));
  std::memset(snap, 0x5a, kSnapshotBytes);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child claims; the parent waits for it, as an owner's handover
    // thread does, and answers; the child sees the answer.
    bool ok = transition(w, kOffered, kClaimDirect) && snap[kSnapshotBytes - 1] == 0x5a &&
              wait_while(w, {kClaimDirect}, 5000) == kRehomed;
    _exit(ok ? 0 : 1);
  }
  EXPECT_EQ(wait_while(w, {kOffered}, 5000), kClaimDirect);
  publish(w, kRehomed);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  free_state(w);
}

}  // namespace
}  // namespace smcr::handoff
