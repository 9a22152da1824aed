// How a link group answers LLC messages, byte by byte, with a Linux SMC-Rv2
// peer (version-2 framing, ../shared/spec/SMC-Rv2-LINUX.md section 6) and,
// where the two differ, with an RFC 7609 peer (version 1). The group's link
// is one end of a SEQPACKET socketpair; the test dispatches messages into
// the group directly (no engine) and reads what the group posts from the
// other end, one datagram per message.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "core/link_group.h"
#include "core/llc.h"
#include "core/log.h"
#include "tests/lib/shm_connection.h"

namespace smcr {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr int kReplyWaitMs = 3000;
constexpr int kQuietMs = 200;

// A 44-byte message with its header: byte 0 type, bytes 1-2 `length`
// (little-endian; for version 1 byte 1 is the length and byte 2 zero),
// byte 3 flags.
Bytes header(uint8_t type, uint16_t length, uint8_t flags, size_t size = llc::kMessageLen) {
  Bytes m(size, 0);
  m[0] = type;
  m[1] = static_cast<uint8_t>(length & 0xFF);
  m[2] = static_cast<uint8_t>(length >> 8);
  m[3] = flags;
  return m;
}

void put_be32(Bytes& m, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) m[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (24 - 8 * i));
}

void put_be64(Bytes& m, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) m[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (56 - 8 * i));
}

bool all_zero(const Bytes& m, size_t from, size_t to) {
  return std::all_of(m.begin() + static_cast<ptrdiff_t>(from), m.begin() + static_cast<ptrdiff_t>(to),
                     [](uint8_t b) { return b == 0; });
}

Bytes slice(const Bytes& m, size_t from, size_t to) {
  return Bytes(m.begin() + static_cast<ptrdiff_t>(from), m.begin() + static_cast<ptrdiff_t>(to));
}

struct Rig {
  int peer = -1;  // the other end of the group's link
  LinkGroup* g = nullptr;

  Rig(Role role, bool linux_v2, const clc::PeerId& peer_id = {}, const LinkIdentity& remote = {}) {
    int ours = -1;
    EXPECT_TRUE(testlib::open_link(&ours, &peer)) << strerror(errno);
    g = testlib::new_group(role, ours, peer_id, remote);
    if (linux_v2) g->set_linux_v2();
  }
  // A group that was never registered nor handed to the engine (its links
  // are closed with it). Tests whose group failed hand it to the engine
  // instead and clear `g`.
  ~Rig() {
    delete g;
    if (peer >= 0) close(peer);
  }

  void feed(const Bytes& m) { g->dispatch(0, std::span<const uint8_t>(m.data(), m.size())); }

  // The next message the group posted, within timeout_ms.
  std::optional<Bytes> next(int timeout_ms = kReplyWaitMs) {
    pollfd p{peer, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return std::nullopt;
    Bytes b(llc::v2::kMaxMessageLen + 1);
    ssize_t n = recv(peer, b.data(), b.size(), MSG_DONTWAIT);
    if (n < 0) return std::nullopt;
    b.resize(static_cast<size_t>(n));
    return b;
  }
  // Nothing posted for `ms`.
  bool quiet(int ms = kQuietMs) {
    pollfd p{peer, POLLIN, 0};
    return poll(&p, 1, ms) == 0;
  }
  // Sends `m` and returns the one 44-byte reply (failing the test if there is
  // none, or more than one).
  Bytes exchange(const Bytes& m) {
    feed(m);
    auto r = next();
    EXPECT_TRUE(r.has_value()) << "no reply";
    if (!r) return Bytes(llc::kMessageLen, 0xEE);
    EXPECT_EQ(r->size(), llc::kMessageLen);
    r->resize(llc::kMessageLen, 0xEE);
    EXPECT_TRUE(quiet()) << "more than one reply";
    return *r;
  }
};

std::array<uint8_t, 16> user_data() {
  std::array<uint8_t, 16> d;
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(0xA0 + 3 * i);
  return d;
}

Bytes test_link_request(uint8_t type_byte) {
  Bytes m = header(type_byte, 44, 0x00);
  auto d = user_data();
  std::copy(d.begin(), d.end(), m.begin() + 4);
  return m;
}

Bytes delete_rkey_request(uint8_t type_byte, std::initializer_list<uint32_t> rkeys) {
  Bytes m = header(type_byte, 44, 0x00);
  m[4] = static_cast<uint8_t>(rkeys.size());
  size_t at = 8;
  for (uint32_t k : rkeys) {
    put_be32(m, at, k);
    at += 4;
  }
  return m;
}

Bytes confirm_rkey_request(uint8_t type_byte, uint32_t rkey, uint64_t vaddr) {
  Bytes m = header(type_byte, 44, 0x00);
  m[4] = 0;  // no other links' tokens
  put_be32(m, 5, rkey);
  put_be64(m, 9, vaddr);
  return m;
}

// --- 1. TEST LINK ------------------------------------------------------------

TEST(LinkGroupV2, TestLinkIsEchoedInVersion2) {
  Rig r(Role::kClient, true);
  Bytes req = test_link_request(0x27);
  Bytes rep = r.exchange(req);
  EXPECT_EQ(rep[0], 0x27);
  EXPECT_EQ(rep[1], 44);
  EXPECT_EQ(rep[2], 0);
  EXPECT_EQ(rep[3], 0x80);
  EXPECT_EQ(slice(rep, 4, 20), slice(req, 4, 20)) << "user data must be echoed";
  EXPECT_TRUE(all_zero(rep, 20, 44));
}

// --- 2. DELETE RKEY for RKeys the group does not know ------------------------

TEST(LinkGroupV2, DeleteRkeyUnknownKeysV2ReplyCountsThemAndZeroesTheList) {
  Rig r(Role::kClient, true);
  Bytes rep = r.exchange(delete_rkey_request(0x29, {0x11223344, 0x55667788}));
  EXPECT_EQ(rep[0], 0x29);
  EXPECT_EQ(rep[1], 44);
  EXPECT_EQ(rep[2], 0);
  EXPECT_EQ(rep[3], 0x80 | 0x20) << "reply, negative";
  EXPECT_EQ(rep[4], 2) << "count echoed";
  EXPECT_EQ(rep[5], 2) << "version 2: the number of unknown RKeys, not a mask";
  EXPECT_TRUE(all_zero(rep, 6, 44)) << "version 2: the RKey list is zeroed";
}

TEST(LinkGroupV2, DeleteRkeyUnknownKeysV1ReplyHasBitMaskAndEchoesTheList) {
  Rig r(Role::kClient, false);
  Bytes req = delete_rkey_request(0x09, {0x11223344, 0x55667788});
  Bytes rep = r.exchange(req);
  EXPECT_EQ(rep[0], 0x09);
  EXPECT_EQ(rep[1], 44);
  EXPECT_EQ(rep[2], 0);
  EXPECT_EQ(rep[3], 0xA0) << "reply, negative";
  EXPECT_EQ(rep[4], 2);
  EXPECT_EQ(rep[5], 0xC0) << "version 1: a bit per unknown RKey, MSB = first";
  EXPECT_EQ(slice(rep, 8, 16), slice(req, 8, 16)) << "the RKeys echoed, big-endian";
  EXPECT_TRUE(all_zero(rep, 16, 44));
}

TEST(LinkGroupV2, DeleteRkeyV1MaskMarksOnlyTheUnknownKey) {
  // One known (announced by CONFIRM RKEY), one not: only the second bit.
  Rig r(Role::kClient, false);
  Bytes ok = r.exchange(confirm_rkey_request(0x06, 0x0000AAAA, 0x1000));
  ASSERT_EQ(ok[3], 0x80);
  Bytes rep = r.exchange(delete_rkey_request(0x09, {0x0000AAAA, 0x0000BBBB}));
  EXPECT_EQ(rep[3], 0xA0);
  EXPECT_EQ(rep[5], 0x40);
}

// --- 3. REQ ADD LINK ---------------------------------------------------------

Bytes req_add_link(uint8_t flags) {
  Bytes m = header(0x25, 28 + 16, flags);
  m[24] = 1;  // gid_cnt
  for (size_t i = 0; i < 16; ++i) m[28 + i] = static_cast<uint8_t>(0xFE - i);
  return m;
}

TEST(LinkGroupV2, ReqAddLinkGetsABareReply) {
  Rig r(Role::kServer, true);
  Bytes rep = r.exchange(req_add_link(0x00));
  EXPECT_EQ(rep[0], 0x25);
  EXPECT_EQ(rep[1], 44);
  EXPECT_EQ(rep[2], 0);
  EXPECT_EQ(rep[3], 0x80);
  EXPECT_TRUE(all_zero(rep, 4, 44)) << "bytes 4-43 zeroed (smc_llc_send_req_add_link_response)";
}

TEST(LinkGroupV2, ReqAddLinkReplyIsNotAnswered) {
  Rig r(Role::kServer, true);
  r.feed(req_add_link(0x80));
  EXPECT_TRUE(r.quiet());
  EXPECT_TRUE(r.g->link_up(0));
  EXPECT_FALSE(r.g->failed());
}

// --- 4. ADD LINK with RTokens, to a client -----------------------------------

TEST(LinkGroupV2, AddLinkWithRtokensIsRejectedWithTheRequestEchoed) {
  Rig r(Role::kClient, true);
  llc::AddLink a;
  for (size_t i = 0; i < a.sender_mac.size(); ++i) a.sender_mac[i] = static_cast<uint8_t>(0x02 + i);
  for (size_t i = 0; i < a.sender_gid.size(); ++i) a.sender_gid[i] = static_cast<uint8_t>(0x30 + i);
  a.sender_qpn = 0x00ABCDEF;
  a.link_num = 2;
  a.mtu_code = 3;
  a.initial_psn = 0x123456;
  llc::AddLinkV2Ext ext;
  ext.client_target_gid = a.sender_gid;
  ext.rtokens.push_back(llc::RtokenPair{0x01020304, 0x05060708, 0x1122334455667788ull});
  a.v2_ext = ext;
  Bytes req = llc::v2::encode(llc::Message{a});
  ASSERT_EQ(req.size(), 88u);
  ASSERT_EQ(req[0], 0x22);
  ASSERT_EQ(req[1], 88);
  ASSERT_EQ(req[2], 0);
  ASSERT_EQ(req[3], 0x00);

  const uint64_t rejected_before = counters().add_link_rejected.load();
  Bytes rep = r.exchange(req);
  EXPECT_EQ(rep[0], 0x22);
  EXPECT_EQ(rep[1], 0x2c);
  EXPECT_EQ(rep[2], 0x00) << "length_v2 high byte: no reject reason in version 2";
  EXPECT_EQ(rep[3], 0xC0) << "reply + reject";
  // The 44-byte request echoed: sender MAC (4-9), pad, GID (12-27), QPN
  // (28-30), link number (31), MTU (32), PSN (33-35), reserved.
  EXPECT_EQ(slice(rep, 4, 44), slice(req, 4, 44));
  EXPECT_EQ(rep[31], 2);
  EXPECT_EQ(counters().add_link_rejected.load(), rejected_before + 1);
  EXPECT_TRUE(r.g->link_up(0));
  EXPECT_FALSE(r.g->failed());
}

// --- 5. CONFIRM RKEY repeats, and DELETE RKEY of a known RKey ---------------

constexpr uint32_t kRkey = 0x0A0B0C0D;
constexpr uint64_t kVaddr = 0x00007F0011223340ull;

void expect_confirm_rkey_reply(const Bytes& rep, uint8_t type_byte, uint8_t flags, const Bytes& req) {
  EXPECT_EQ(rep[0], type_byte);
  EXPECT_EQ(rep[1], 44);
  EXPECT_EQ(rep[2], 0);
  EXPECT_EQ(rep[3], flags);
  EXPECT_EQ(slice(rep, 4, 17), slice(req, 4, 17)) << "count, RKey and vaddr echoed";
}

TEST(LinkGroupV2, RepeatedConfirmRkeyIsPositiveInVersion2) {
  Rig r(Role::kServer, true);
  Bytes req = confirm_rkey_request(0x26, kRkey, kVaddr);
  expect_confirm_rkey_reply(r.exchange(req), 0x26, 0x80, req);
  expect_confirm_rkey_reply(r.exchange(req), 0x26, 0x80, req);  // Linux reannounces a reused RMB

  // The peer deletes it: known, so a positive reply with nothing unknown.
  Bytes del = r.exchange(delete_rkey_request(0x29, {kRkey}));
  EXPECT_EQ(del[0], 0x29);
  EXPECT_EQ(del[1], 44);
  EXPECT_EQ(del[2], 0);
  EXPECT_EQ(del[3], 0x80);
  EXPECT_EQ(del[4], 1);
  EXPECT_EQ(del[5], 0);
  EXPECT_TRUE(all_zero(del, 6, 44));

  // ... and announces it again: positive.
  expect_confirm_rkey_reply(r.exchange(req), 0x26, 0x80, req);
}

// One LLC exchange at a time (RFC 3.5.5.3), and the wait for the turn
// counts against the caller's time: a handshake queued behind others ends
// (it Declines) while its peer still waits, instead of after (a reset).
TEST(LinkGroupExchange, QueuedExchangeGivesUpWithinItsOwnTime) {
  Rig r(Role::kClient, false);
  Bytes b = confirm_rkey_request(0x06, kRkey, kVaddr);
  std::array<uint8_t, llc::kMessageLen> req{};
  std::copy(b.begin(), b.end(), req.begin());
  std::atomic<int> first{-1};
  std::thread a([&] { first = r.g->llc_exchange(req, -1, 10000) ? 1 : 0; });
  std::optional<Bytes> posted = r.next();
  ASSERT_TRUE(posted.has_value()) << "the first exchange posted nothing";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(r.g->llc_exchange(req, -1, 300)) << "two exchanges at once";
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  // It gave up before the first ended (the first's reply comes below).
  EXPECT_EQ(first.load(), -1);
  EXPECT_GE(waited.count(), 250);
  EXPECT_TRUE(r.quiet()) << "the exchange that never had its turn posted a request";
  // The reply ends the first, and the next one has its turn at once.
  Bytes reply = *posted;
  reply.resize(llc::kMessageLen);
  reply[3] |= 0x80;
  r.feed(reply);
  a.join();
  EXPECT_EQ(first.load(), 1);
  std::atomic<int> next{-1};
  std::thread c([&] { next = r.g->llc_exchange(req, -1, 10000) ? 1 : 0; });
  std::optional<Bytes> again = r.next();
  ASSERT_TRUE(again.has_value()) << "the turn was not freed";
  r.feed(reply);
  c.join();
  EXPECT_EQ(next.load(), 1);
}

TEST(LinkGroupV2, RepeatedConfirmRkeyIsNegativeInVersion1) {
  Rig r(Role::kServer, false);
  Bytes req = confirm_rkey_request(0x06, kRkey, kVaddr);
  expect_confirm_rkey_reply(r.exchange(req), 0x06, 0x80, req);
  expect_confirm_rkey_reply(r.exchange(req), 0x06, 0x80 | 0x20, req);
}

TEST(LinkGroupV2, DeletedRkeyIsUnknownAfterwards) {
  Rig r(Role::kServer, true);
  Bytes req = confirm_rkey_request(0x26, kRkey, kVaddr);
  ASSERT_EQ(r.exchange(req)[3], 0x80);
  ASSERT_EQ(r.exchange(delete_rkey_request(0x29, {kRkey}))[3], 0x80);
  Bytes again = r.exchange(delete_rkey_request(0x29, {kRkey}));
  EXPECT_EQ(again[3], 0x80 | 0x20);
  EXPECT_EQ(again[5], 1);
}

// --- 6. Unknown version-2 type -----------------------------------------------

TEST(LinkGroupV2, UnknownV2TypeIsDroppedAndTheLinkStaysUp) {
  Rig r(Role::kClient, true);
  ASSERT_TRUE(r.g->link_up(0));
  Bytes m = header(0x2A, 44, 0x00);
  for (size_t i = 4; i < 44; ++i) m[i] = static_cast<uint8_t>(i);
  r.feed(m);
  EXPECT_TRUE(r.quiet()) << "Linux drops unknown types silently; so must we";
  EXPECT_TRUE(r.g->link_up(0));
  EXPECT_FALSE(r.g->failed());
  // Still answering.
  Bytes rep = r.exchange(test_link_request(0x27));
  EXPECT_EQ(rep[0], 0x27);
  EXPECT_EQ(rep[3], 0x80);
}

// --- 7. Version-1 message on a version-2 group ------------------------------

TEST(LinkGroupV2, Version1TestLinkIsAnsweredInVersion2Framing) {
  Rig r(Role::kServer, true);
  Bytes req = test_link_request(0x07);
  Bytes rep = r.exchange(req);
  EXPECT_EQ(rep[0], 0x27);
  EXPECT_EQ(rep[1], 44);
  EXPECT_EQ(rep[2], 0);
  EXPECT_EQ(rep[3], 0x80);
  EXPECT_EQ(slice(rep, 4, 20), slice(req, 4, 20));
  EXPECT_TRUE(all_zero(rep, 20, 44));
}

TEST(LinkGroupV2, Version1GroupAnswersInVersion1) {
  Rig r(Role::kServer, false);
  Bytes req = test_link_request(0x07);
  Bytes rep = r.exchange(req);
  EXPECT_EQ(rep[0], 0x07);
  EXPECT_EQ(rep[1], 44);
  EXPECT_EQ(rep[2], 0);
  EXPECT_EQ(rep[3], 0x80);
  EXPECT_EQ(slice(rep, 4, 20), slice(req, 4, 20));
}

// --- 8. Version-2 framing on a version-1 group -------------------------------

TEST(LinkGroupV2, Version2MessageOnVersion1GroupTakesTheLinkDown) {
  // A unique identity, so that this test can hold the group (a failed group
  // with no users is otherwise handed to the engine, which deletes it).
  const clc::PeerId peer_id{'l', 'g', 'v', '2', 't', 'e', 's', 't'};
  LinkIdentity remote;
  for (size_t i = 0; i < remote.gid.size(); ++i) remote.gid[i] = static_cast<uint8_t>(0xC0 + i);
  remote.mac = {0x02, 0, 0, 0, 0, 0x42};
  remote.qpn = 0x00C0FFEE;
  Rig r(Role::kClient, false, peer_id, remote);
  LinkGroup::register_group(r.g);
  LinkGroup* held = LinkGroup::acquire_for_client(peer_id, remote.gid, remote.mac, remote.qpn);
  ASSERT_EQ(held, r.g);
  ASSERT_TRUE(r.g->link_up(0));

  Bytes m = header(0x22, 88, 0x00, 88);
  r.feed(m);
  EXPECT_TRUE(r.g->failed()) << "a message that is not 44 bytes takes the only link, and so the group, down";
  EXPECT_FALSE(r.g->link_up(0));
  // The link was shut down: the peer reads end of stream, and no reply.
  pollfd p{r.peer, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, kReplyWaitMs), 1);
  uint8_t b[128];
  EXPECT_EQ(recv(r.peer, b, sizeof b, MSG_DONTWAIT), 0);

  // Our hold was the last use: the group retires, and the engine ends it.
  LinkGroup* g = r.g;
  r.g = nullptr;
  g->release_hold();
}

}  // namespace
}  // namespace smcr
