// RMBE Bsize and QP MTU codes (digest 9.7 and 9.8), and a link group's
// RMBs: the table of the peer's and the pool of ours, over real shm RMBs.
#include "core/rmb.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "core/fabric_shm.h"
#include "core/link_group.h"
#include "tests/lib/shm_connection.h"

namespace smcr::rmb {
namespace {

TEST(RmbSize, Digest97Decode) {
  EXPECT_EQ(decode_size(0), 16384u);
  EXPECT_EQ(decode_size(1), 32768u);
  EXPECT_EQ(decode_size(2), 65536u);
  EXPECT_EQ(decode_size(3), 131072u);
  EXPECT_EQ(decode_size(4), 262144u);
  EXPECT_EQ(decode_size(5), 524288u);
}

TEST(RmbSize, Digest97CodesAboveFiveAreFlagged) {
  for (unsigned code = 6; code < 256; ++code) {
    EXPECT_FALSE(decode_size(static_cast<uint8_t>(code))) << code;
  }
}

TEST(RmbSize, Digest97Encode) {
  EXPECT_EQ(encode_size(16 * 1024), 0);
  EXPECT_EQ(encode_size(64 * 1024), 2);
  EXPECT_EQ(encode_size(512 * 1024), 5);
}

TEST(RmbSize, EncodeRoundsUp) {
  EXPECT_EQ(encode_size(0), 0);
  EXPECT_EQ(encode_size(1), 0);
  EXPECT_EQ(encode_size(16 * 1024 + 1), 1);
  EXPECT_EQ(encode_size(65535), 2);
  EXPECT_EQ(encode_size(65537), 3);
  EXPECT_EQ(encode_size(10000), 0);
}

TEST(RmbSize, Digest97EncodeCapsAtTheRfcMaximum) {
  // 1 MiB would be code 6 by the formula, which no RFC peer accepts.
  EXPECT_EQ(encode_size(1024 * 1024), kMaxCode);
  EXPECT_EQ(encode_size(512 * 1024 + 1), kMaxCode);
  EXPECT_EQ(encode_size(0xFFFFFFFF), kMaxCode);
}

TEST(RmbSize, EncodeDecodeAgree) {
  for (uint8_t code = 0; code <= kMaxCode; ++code) {
    auto size = decode_size(code);
    ASSERT_TRUE(size);
    EXPECT_EQ(encode_size(*size), code);
    EXPECT_GE(*size, kMinSize);
    EXPECT_LE(*size, kMaxSize);
  }
}

TEST(RmbSize, ShrinksUnderTheBudget) {
  constexpr size_t kBudget = size_t{32} << 20;
  EXPECT_EQ(size_under_budget(256 * 1024, 0, kBudget), 256u * 1024) << "the first connection";
  EXPECT_EQ(size_under_budget(256 * 1024, 128, kBudget), 256u * 1024) << "128 x 256 KiB fit";
  EXPECT_EQ(size_under_budget(256 * 1024, 129, kBudget), 128u * 1024);
  EXPECT_EQ(size_under_budget(256 * 1024, 1000, kBudget), 32u * 1024);
  EXPECT_EQ(size_under_budget(256 * 1024, 100000, kBudget), kMinSize) << "never below the RFC's smallest";
  EXPECT_EQ(size_under_budget(256 * 1024, 100000, 0), 256u * 1024) << "no budget";
  EXPECT_EQ(size_under_budget(kMinSize, 100000, kBudget), kMinSize);
  for (size_t live : {1u, 200u, 700u, 5000u}) {
    auto size = size_under_budget(512 * 1024, live, kBudget);
    EXPECT_TRUE(decode_size(encode_size(size)) == size) << "an RFC size: " << size;
  }
}

TEST(RmbMtu, Digest98Codes) {
  EXPECT_EQ(decode_mtu(1), 256u);
  EXPECT_EQ(decode_mtu(2), 512u);
  EXPECT_EQ(decode_mtu(3), 1024u);
  EXPECT_EQ(decode_mtu(4), 2048u);
  EXPECT_EQ(decode_mtu(5), 4096u);
  EXPECT_EQ(encode_mtu(256), 1);
  EXPECT_EQ(encode_mtu(512), 2);
  EXPECT_EQ(encode_mtu(1024), 3);
  EXPECT_EQ(encode_mtu(2048), 4);
  EXPECT_EQ(encode_mtu(4096), 5);
}

TEST(RmbMtu, Digest98ReservedCodes) {
  EXPECT_FALSE(decode_mtu(0));
  for (uint8_t code = 6; code < 16; ++code) EXPECT_FALSE(decode_mtu(code)) << int(code);
}

TEST(RmbMtu, Digest98SmallerOfTheTwo) {
  EXPECT_EQ(encode_mtu(std::min(1024u, 4096u)), 3);
}

TEST(RmbMtu, NonIbSizesRoundDown) {
  EXPECT_FALSE(encode_mtu(0));
  EXPECT_FALSE(encode_mtu(255));
  EXPECT_EQ(encode_mtu(1500), 3);
  EXPECT_EQ(encode_mtu(4095), 4);
  EXPECT_EQ(encode_mtu(9000), 5);
}

// ---------------------------------------------------------------- PeerTable

PeerRmbTokens tokens(uint32_t rkey, uint64_t vaddr) {
  PeerRmbTokens t;
  t.has[0] = true;
  t.rkey[0] = rkey;
  t.vaddr[0] = vaddr;
  return t;
}

TEST(PeerTable, AnnouncedOnceClaimedOnce) {
  PeerTable table;
  int fd = -1;
  ASSERT_TRUE(table.announce(0, tokens(7, 0x1000), &fd, false));
  int again = -1;
  EXPECT_FALSE(table.announce(0, tokens(7, 0x1000), &again, false)) << "a repeated RToken is refused";
  EXPECT_EQ(table.size(), 1u);
  PeerRmbTokens got;
  int memfd = 99;
  EXPECT_FALSE(table.claim(0, 7, 0x2000, &got, &memfd, nullptr)) << "another address is another RMB";
  ASSERT_TRUE(table.claim(0, 7, 0x1000, &got, &memfd, nullptr));
  EXPECT_EQ(memfd, -1);
  EXPECT_TRUE(got.on(0, 7, 0x1000));
  EXPECT_FALSE(table.claim(0, 7, 0x1000, &got, &memfd, nullptr)) << "one connection per announced RMB";
}

TEST(PeerTable, TheAnnouncementsMemfdIsTakenOnlyWhenAdded) {
  PeerTable table;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  int memfd = fds[0];
  ASSERT_TRUE(table.announce(0, tokens(1, 1), &memfd, false));
  EXPECT_EQ(memfd, -1) << "the table owns it";
  int refused = fds[1];
  EXPECT_FALSE(table.announce(0, tokens(1, 1), &refused, false));
  EXPECT_EQ(refused, fds[1]) << "still the caller's";
  close(fds[1]);
  PeerRmbTokens got;
  int claimed = -1;
  ASSERT_TRUE(table.claim(0, 1, 1, &got, &claimed, nullptr));
  EXPECT_EQ(claimed, fds[0]) << "the claim hands it on";
  close(claimed);
}

TEST(PeerTable, LimitedToRfcMaximum) {
  PeerTable table;
  for (uint32_t k = 1; k <= PeerTable::kMax; ++k) {
    int fd = -1;
    ASSERT_TRUE(table.announce(0, tokens(k, k), &fd, false)) << k;
  }
  int fd = -1;
  EXPECT_FALSE(table.announce(0, tokens(1000, 1000), &fd, false)) << "RFC 7609 8.2: 255 per peer per group";
}

// The limit counts the RMBs the peer has: one it deleted while our
// connection still maps it is ours to keep, not one of its 255 (a server
// deletes pooled RMBs to make room for a new one: the CONFIRM RKEY that
// follows its DELETE RKEY must be accepted even if our connection on the
// deleted RMB has not ended yet).
TEST(PeerTable, TheLimitCountsOnlyWhatThePeerHasNotDeleted) {
  PeerTable table;
  for (uint32_t k = 1; k <= PeerTable::kMax; ++k) {
    int fd = -1;
    ASSERT_TRUE(table.announce(0, tokens(k, k), &fd, false)) << k;
  }
  PeerRmbTokens got;
  int fd = -1;
  ASSERT_TRUE(table.claim(0, 7, 7, &got, &fd, nullptr));
  ASSERT_TRUE(table.forget(0, 7, nullptr));
  EXPECT_EQ(table.size(), PeerTable::kMax) << "its connection still writes into it";
  EXPECT_EQ(table.held_by_peer(), PeerTable::kMax - 1);
  EXPECT_TRUE(table.announce(0, tokens(1000, 1000), &fd, false)) << "the peer has 254: room for one";
  EXPECT_FALSE(table.announce(0, tokens(1001, 1001), &fd, false)) << "and no more";
}

TEST(PeerTable, DeletedWhileInUseGoesWithItsLastUser) {
  PeerTable table;
  int fd = -1;
  ASSERT_TRUE(table.announce(0, tokens(5, 0x5000), &fd, false));
  PeerRmbTokens got;
  ASSERT_TRUE(table.claim(0, 5, 0x5000, &got, &fd, nullptr));
  EXPECT_FALSE(table.forget(0, 6, nullptr)) << "an RKey never announced";
  EXPECT_TRUE(table.forget(0, 5, nullptr));
  EXPECT_EQ(table.size(), 1u) << "its connection still writes into it";
  EXPECT_TRUE(table.all_deleted());
  RemoteRmb view;
  view.rkey = 5;
  view.vaddr = 0x5000;
  table.give_back(&view, nullptr, nullptr);  // its connection ended
  EXPECT_EQ(table.size(), 0u);
  EXPECT_FALSE(table.claim(0, 5, 0x5000, &got, &fd, nullptr));
}

TEST(PeerTable, LinuxRenewsARepeatedAnnouncement) {
  PeerTable table;
  int fd = -1;
  ASSERT_TRUE(table.announce(0, tokens(9, 0x9000), &fd, true));
  PeerRmbTokens got;
  ASSERT_TRUE(table.claim(0, 9, 0x9000, &got, &fd, nullptr));
  ASSERT_TRUE(table.forget(0, 9, nullptr));  // deleted, its connection not yet gone
  ASSERT_TRUE(table.announce(0, tokens(9, 0x9000), &fd, true)) << "Linux reuses the RToken";
  EXPECT_FALSE(table.all_deleted());
  EXPECT_EQ(table.size(), 1u);
  EXPECT_TRUE(table.claim(0, 9, 0x9000, &got, &fd, nullptr)) << "claimable again";
}

// verbs: nothing is mapped, so a connection that ends releases its entry
// by RKey. Before, an entry stayed (claimed) for the group's life, and the
// group's 256th RMB was refused (RFC 7609 8.2's maximum): every later
// connection fell back to TCP.
TEST(PeerTable, VerbsEntriesGoWithTheirConnectionAndTheDeletion) {
  PeerTable table;
  for (uint32_t k = 1; k <= 3 * PeerTable::kMax; ++k) {
    int fd = -1;
    ASSERT_TRUE(table.announce(0, tokens(k, 0x1000 * k), &fd, false)) << "RMB " << k << " of the group's life";
    PeerRmbTokens got;
    ASSERT_TRUE(table.claim(0, k, 0x1000 * k, &got, &fd, nullptr)) << k;
    if (k % 2) {  // the peer's DELETE RKEY first, then our connection ends
      ASSERT_TRUE(table.forget(0, k, nullptr));
      EXPECT_EQ(table.size(), 1u);
      ASSERT_TRUE(table.release(0, k, nullptr));
    } else {  // our connection ends first, then the peer deletes
      ASSERT_TRUE(table.release(0, k, nullptr));
      EXPECT_EQ(table.size(), 1u) << "the peer has not deleted it";
      ASSERT_TRUE(table.forget(0, k, nullptr));
    }
    EXPECT_EQ(table.size(), 0u) << k;
  }
  EXPECT_FALSE(table.release(0, 1, nullptr)) << "gone";
}

TEST(PeerTable, VerbsReleasedRmbMayBeNamedAgainWithoutAnAnnouncement) {
  PeerTable table;
  int fd = -1;
  ASSERT_TRUE(table.announce(1, [] {
    PeerRmbTokens t;
    t.has[1] = true;
    t.rkey[1] = 4;
    t.vaddr[1] = 0x4000;
    return t;
  }(), &fd, false));
  PeerRmbTokens got;
  ASSERT_TRUE(table.claim(1, 4, 0x4000, &got, &fd, nullptr));
  EXPECT_FALSE(table.release(0, 4, nullptr)) << "another link's RKey";
  ASSERT_TRUE(table.release(1, 4, nullptr));
  EXPECT_FALSE(table.release(1, 4, nullptr)) << "no connection uses it";
  EXPECT_TRUE(table.claim(1, 4, 0x4000, &got, &fd, nullptr)) << "RFC 3.5.2: the RMB stays registered for reuse";
  EXPECT_FALSE(table.claim(1, 4, 0x4000, &got, &fd, nullptr)) << "by one connection at a time";
}

// shm: the table keeps its mapping of a peer RMB across connections and
// unmaps it once the peer deleted it and no connection uses it.
TEST(PeerTable, ShmMappingKeptForTheNextConnection) {
  int lk[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, lk), 0);
  ShmLink link(lk[0]);
  LocalRmb peers;
  ASSERT_TRUE(shm_alloc_rmb(16384, &peers));
  RemoteRmb mapping;
  mapping.rkey = peers.rkey;
  mapping.vaddr = peers.vaddr;
  ASSERT_TRUE(shm_map_remote(dup(peers.handle), 16384, &mapping));

  PeerTable table;
  PeerRmbTokens t = tokens(peers.rkey, peers.vaddr);
  table.note(t, &mapping);
  RemoteRmb first = mapping;
  EXPECT_TRUE(table.give_back(&first, nullptr, &link)) << "the table's mapping";
  EXPECT_EQ(first.addr, nullptr);

  PeerRmbTokens got;
  int fd = -1;
  RemoteRmb second;
  ASSERT_TRUE(table.claim(0, peers.rkey, peers.vaddr, &got, &fd, &second));
  EXPECT_EQ(second.addr, mapping.addr) << "the same mapping, no new one";
  second.addr[100] = 0x5A;
  EXPECT_EQ(peers.addr[100], 0x5A);

  EXPECT_TRUE(table.forget(0, peers.rkey, &link));
  EXPECT_EQ(table.size(), 1u) << "in use";
  EXPECT_TRUE(table.give_back(&second, nullptr, &link));
  EXPECT_EQ(table.size(), 0u) << "unmapped with its last user";
  shm_free_rmb(&peers);
  close(lk[1]);
}

TEST(PeerTable, MovesWithItsOnlyConnection) {
  LocalRmb peers;
  ASSERT_TRUE(shm_alloc_rmb(16384, &peers));
  RemoteRmb mapping;
  mapping.rkey = peers.rkey;
  mapping.vaddr = peers.vaddr;
  ASSERT_TRUE(shm_map_remote(dup(peers.handle), 16384, &mapping));
  PeerTable from, to;
  from.note(tokens(peers.rkey, peers.vaddr), &mapping);
  PeerRmbTokens got;
  int fd = -1;
  RemoteRmb shared;
  ASSERT_TRUE(from.claim(0, peers.rkey, peers.vaddr, &got, &fd, &shared));  // a second user
  EXPECT_FALSE(from.move_sole_user(mapping, &to)) << "shared with another connection";
  EXPECT_TRUE(from.give_back(&shared, nullptr, nullptr));
  ASSERT_TRUE(from.move_sole_user(mapping, &to));
  EXPECT_EQ(from.size(), 0u);
  EXPECT_EQ(to.size(), 1u);
  int lk[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, lk), 0);
  ShmLink link(lk[0]);
  to.clear(&link);
  EXPECT_EQ(to.size(), 0u);
  shm_free_rmb(&peers);
  close(lk[1]);
}

// A connection's move to a group of its own is refused when the peer's RMB
// it writes into is not its alone (here: not known at all): the new group
// is deleted, and its destructor releases its RMBs under its own lock, so
// it must not run while rehome_connection still holds that lock (it did,
// once the release took the lock: a self-deadlock when both ends of a
// connection forked and asked to move it at once).
TEST(LinkGroupRmbs, ARefusedMoveDeletesTheNewGroupUnlocked) {
  int ours = -1, peer = -1;
  ASSERT_TRUE(testlib::open_link(&ours, &peer));
  LinkGroup* g = testlib::new_group(Role::kServer, ours);
  int fresh_ours = -1, fresh_peer = -1;
  ASSERT_TRUE(testlib::open_link(&fresh_ours, &fresh_peer));
  RemoteRmb unknown;
  unknown.rkey = 1;
  unknown.vaddr = 2;
  unknown.addr = reinterpret_cast<uint8_t*>(&unknown);
  EXPECT_EQ(g->rehome_connection(0x1234, std::make_unique<ShmLink>(fresh_ours), unknown), nullptr);
  char b;
  EXPECT_EQ(recv(fresh_peer, &b, 1, MSG_DONTWAIT), 0) << "the refused group's link is closed";
  delete g;
  close(peer);
  close(fresh_peer);
}

// ---------------------------------------------------------------- LocalPool

TEST(LocalPool, KeepsRmbsBySize) {
  LocalPool pool;
  EXPECT_EQ(LocalPool::max(), 64u) << "SMCR_RMB_POOL's default";
  LocalRmbs small{}, large{};
  ASSERT_TRUE(shm_alloc_rmb(16384, &small[0]));
  ASSERT_TRUE(shm_alloc_rmb(65536, &large[0]));
  uint8_t* small_addr = small[0].addr;
  ASSERT_TRUE(pool.has_room());
  pool.put(&small);
  pool.put(&large);
  EXPECT_EQ(small[0].addr, nullptr) << "the pool's now";
  EXPECT_EQ(pool.size(), 2u);
  LocalRmbs got{};
  EXPECT_FALSE(pool.take(32768, &got));
  ASSERT_TRUE(pool.take(16384, &got));
  EXPECT_EQ(got[0].addr, small_addr);
  EXPECT_EQ(pool.size(), 1u);
  shm_free_rmb(&got[0]);
  for (auto& r : pool.drain()) shm_free_rmb(&r[0]);
  EXPECT_EQ(pool.size(), 0u);
}

}  // namespace
}  // namespace smcr::rmb
