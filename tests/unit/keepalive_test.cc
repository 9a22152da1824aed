// RFC 4.5.3 keepalive on a real link: an idle link gets TEST LINK; a peer
// that answers keeps it, a wrong echo takes it down and resets its
// connections. On the shared-memory fabric the peer is a process on this
// host: a silent one is stopped or busy (a loopback TCP connection outlives
// that), so the link stays, and its death (the link hung up) takes it down.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/cdc.h"
#include "core/connection.h"
#include "core/engine.h"
#include "core/fabric_shm.h"
#include "core/link_group.h"
#include "core/llc.h"

namespace smcr {
namespace {

// Before the engine reads it (first use is inside the tests).
const int kKeepaliveSet = setenv("SMCR_KEEPALIVE_MS", "300", 1);

struct Rig {
  int peer_link = -1;
  int app_fd = -1;
  Connection* conn = nullptr;
  Rig() {
    int lk[2];
    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, lk);
    peer_link = lk[1];
    LocalRmb ours, peers;
    shm_alloc_rmb(16384, &ours);
    shm_alloc_rmb(16384, &peers);
    RemoteRmb view;
    shm_map_remote(dup(peers.handle), 16384, &view);
    auto* g = new LinkGroup(Role::kClient, {}, std::make_unique<ShmLink>(lk[0]), 1);
    ConnectionSetup s;
    s.group = g;
    s.rmbs[0] = ours;
    s.peer_rmbs[0] = view;
    s.local_token = 1;
    s.peer_token = 2;
    conn = Connection::create(s);
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
    app_fd = sv[0];
    conn->attach_fds(sv[0], sv[1], true);
    Engine::get().add_group(g);
  }
  // The next LLC TEST LINK request our side sent, within timeout_ms.
  bool next_test_link(llc::TestLink* out, int timeout_ms) {
    for (;;) {
      pollfd p{peer_link, POLLIN, 0};
      if (poll(&p, 1, timeout_ms) <= 0) return false;
      uint8_t b[64];
      if (recv(peer_link, b, sizeof b, 0) != 44) return false;
      auto m = llc::decode(std::span<const uint8_t>(b, 44));
      if (auto* t = m ? std::get_if<llc::TestLink>(&*m) : nullptr; t && !t->reply) {
        *out = *t;
        return true;
      }
    }
  }
  bool reset_within(int timeout_ms) {
    pollfd p{app_fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1 || !(p.revents & POLLHUP)) return false;
    char c;
    iovec iov{&c, 1};
    return conn->recvv(&iov, 1, 0) == -1 && errno == ECONNRESET;
  }
};

TEST(Keepalive, AnsweredTestLinkKeepsTheLink) {
  ASSERT_EQ(kKeepaliveSet, 0);
  Rig r;
  for (int i = 0; i < 3; ++i) {
    llc::TestLink t;
    ASSERT_TRUE(r.next_test_link(&t, 3000)) << "an idle link must be probed";
    llc::TestLink reply = t;
    reply.reply = true;
    auto b = llc::encode(reply);
    ASSERT_EQ(send(r.peer_link, b.data(), b.size(), 0), 44);
  }
  EXPECT_EQ(r.conn->state(), CloseState::kActive);
}

TEST(Keepalive, SilentShmPeerKeepsTheLinkUntilItHangsUp) {
  Rig r;
  llc::TestLink t;
  ASSERT_TRUE(r.next_test_link(&t, 3000));
  // Past the 2 s reply deadline: probed again, not taken down.
  ASSERT_TRUE(r.next_test_link(&t, 5000)) << "a silent shm peer is probed again";
  EXPECT_EQ(r.conn->state(), CloseState::kActive);
  pollfd p{r.app_fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0) << "no reset while the peer process lives";
  close(r.peer_link);
  EXPECT_TRUE(r.reset_within(5000)) << "the peer's end of the link closed must reset the connection";
}

TEST(Keepalive, WrongEchoTakesTheLinkDown) {
  Rig r;
  llc::TestLink t;
  ASSERT_TRUE(r.next_test_link(&t, 3000));
  llc::TestLink reply = t;
  reply.reply = true;
  reply.user_data[0] ^= 1;
  auto b = llc::encode(reply);
  ASSERT_EQ(send(r.peer_link, b.data(), b.size(), 0), 44);
  EXPECT_TRUE(r.reset_within(3000));
}

}  // namespace
}  // namespace smcr
