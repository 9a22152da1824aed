// CDC message codec (digest 9.10, Linux L05-L09), cursor arithmetic (digest
// 9.11 and the Linux base-0 model) and sequence numbers (digest 9.12).
#include "core/cdc.h"

#include <gtest/gtest.h>

#include "tests/unit/hex.h"

#include <cctype>
#include <string_view>
#include <vector>

namespace smcr::cdc {
namespace {

using smcr::test::hex;

std::vector<uint8_t> bytes_of(const std::array<uint8_t, kMessageLen>& a) { return {a.begin(), a.end()}; }

// --- Digest 9.10 -----------------------------------------------------------------

const auto kScenario1Step2 = hex(
    "FE 2C 00 01 00 00 B0 01 00 00 00 00 00 00 03 EC"
    "00 00 00 00 00 00 00 04 00 00 00 00 00 00 00 00"
    "00 00 00 00 00 00 00 00 00 00 00 00");

const auto kScenario4Step3 = hex(
    "FE 2C 00 07 00 00 B0 01 00 00 00 02 00 00 03 EC"
    "00 00 00 00 00 00 00 04 80 00 00 00 00 00 00 00"
    "00 00 00 00 00 00 00 00 00 00 00 00");

Message scenario1_step2() {
  Message m;
  m.seq = 1;
  m.alert_token = 0xB001;
  m.producer = {0, 1004};
  m.consumer = {0, 4};
  return m;
}

TEST(CdcCodec, Digest910Scenario1Step2) {
  EXPECT_EQ(bytes_of(encode(scenario1_step2())), kScenario1Step2);
  auto decoded = decode(kScenario1Step2);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, scenario1_step2());
}

TEST(CdcCodec, Digest910Scenario4Step3) {
  Message m;
  m.seq = 7;
  m.alert_token = 0xB001;
  m.producer = {2, 1004};
  m.consumer = {0, 4};
  m.flags.writer_blocked = true;
  EXPECT_EQ(bytes_of(encode(m)), kScenario4Step3);
  auto decoded = decode(kScenario4Step3);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, m);
}

TEST(CdcCodec, Digest910SingleFlags) {
  struct Case {
    Flags flags;
    size_t byte;
    uint8_t value;
  };
  const Case cases[] = {
      {{.urgent_pending = true, .urgent_present = true}, 24, 0x60},
      {{.request_update = true}, 24, 0x10},
      {{.failover_validation = true}, 24, 0x08},
      {{.peer_done_writing = true}, 25, 0x80},
      {{.peer_conn_closed = true}, 25, 0x40},
      {{.peer_conn_abort = true}, 25, 0x20},
      {{.writer_blocked = true}, 24, 0x80},
  };
  for (const auto& c : cases) {
    Message m = scenario1_step2();
    m.producer = {0, 1500};
    m.flags = c.flags;
    auto bytes = encode(m);
    EXPECT_EQ(bytes[c.byte], c.value);
    EXPECT_EQ(bytes[c.byte == 24 ? 25 : 24], 0);
    EXPECT_EQ(bytes[12], 0x00);
    EXPECT_EQ(bytes[13], 0x00);
    EXPECT_EQ(bytes[14], 0x05);
    EXPECT_EQ(bytes[15], 0xDC);
    auto decoded = decode(bytes);
    ASSERT_TRUE(decoded);
    EXPECT_EQ(decoded->flags, c.flags);
  }
}

TEST(CdcCodec, AllFieldsRoundTrip) {
  Message m;
  m.seq = 0xFFFF;
  m.alert_token = 0xDEADBEEF;
  m.producer = {0xFFFF, 0x7FFFFFFF};
  m.consumer = {0x1234, 0x00080000};
  m.flags = {true, true, true, true, true, true, true, true};
  auto bytes = encode(m);
  EXPECT_EQ(bytes[24], 0xF8);
  EXPECT_EQ(bytes[25], 0xE0);
  auto decoded = decode(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, m);
}

TEST(CdcCodec, LinuxCaptures) {
  // L05: first client CDC, 64 KiB RMBE filled: producer wrap 1 count 0, B set.
  auto l05 = decode(hex("fe2c000100000001000000010000000000000000000000008000000000000000000000000000000000000000"));
  ASSERT_TRUE(l05);
  EXPECT_EQ(l05->seq, 1);
  EXPECT_EQ(l05->alert_token, 1u);
  EXPECT_EQ(l05->producer, (Cursor{1, 0}));
  EXPECT_EQ(l05->consumer, (Cursor{0, 0}));
  EXPECT_TRUE(l05->flags.writer_blocked);
  // L07/L08/L09: close flags D, C, D+C.
  auto l07 = decode(hex("fe2c002100000001000000100000000000000010000000008080000000000000000000000000000000000000"));
  ASSERT_TRUE(l07);
  EXPECT_EQ(l07->seq, 0x21);
  EXPECT_EQ(l07->producer, (Cursor{16, 0}));
  EXPECT_TRUE(l07->flags.peer_done_writing);
  EXPECT_FALSE(l07->flags.peer_conn_closed);
  auto l08 = decode(hex("fe2c002100000001000000100000000000000010000000008040000000000000000000000000000000000000"));
  ASSERT_TRUE(l08);
  EXPECT_TRUE(l08->flags.peer_conn_closed);
  EXPECT_FALSE(l08->flags.peer_done_writing);
  auto l09 = decode(hex("fe2c0022000000010000001000000000000000100000000080c0000000000000000000000000000000000000"));
  ASSERT_TRUE(l09);
  EXPECT_TRUE(l09->flags.peer_conn_closed);
  EXPECT_TRUE(l09->flags.peer_done_writing);
  EXPECT_FALSE(l09->flags.peer_conn_abort);
}

TEST(CdcCodec, RejectsWrongTypeOrLength) {
  auto bytes = kScenario1Step2;
  bytes[0] = 0xFF;
  EXPECT_FALSE(decode(bytes));
  bytes[0] = 0x01;
  EXPECT_FALSE(decode(bytes));
  bytes = kScenario1Step2;
  bytes[1] = 43;
  EXPECT_FALSE(decode(bytes));
  bytes[1] = 88;
  EXPECT_FALSE(decode(bytes));
}

TEST(CdcCodec, EveryTruncationFails) {
  for (size_t n = 0; n < kMessageLen; ++n) {
    EXPECT_FALSE(decode(std::span(kScenario4Step3).first(n))) << n;
  }
}

TEST(CdcCodec, LongerBufferDecodesFirst44Bytes) {
  auto bytes = kScenario1Step2;
  bytes.resize(64, 0xEE);
  auto decoded = decode(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, scenario1_step2());
}

TEST(CdcCodec, ReservedBitsAndBytesIgnored) {
  auto bytes = kScenario1Step2;
  bytes[8] = bytes[9] = 0xFF;    // producer reserved
  bytes[16] = bytes[17] = 0xFF;  // consumer reserved
  bytes[24] |= 0x07;
  bytes[25] |= 0x1F;
  for (size_t i = 26; i < kMessageLen; ++i) bytes[i] = 0xA5;
  auto decoded = decode(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, scenario1_step2());
}

// --- Digest 9.11: cursors, RFC model (L = 10000, data area [4, L)) -------------

const CursorSpace kRfc(10000, 4);

TEST(CdcCursor, Digest911Capacity) {
  EXPECT_EQ(kRfc.capacity(), 9996u);
  EXPECT_EQ(kRfc.initial(), (Cursor{0, 4}));
}

TEST(CdcCursor, Digest911AdvanceNoWrap) {
  EXPECT_EQ(kRfc.advance({0, 4}, 1000), (Cursor{0, 1004}));
}

TEST(CdcCursor, Digest911AdvanceFullWindowWraps) {
  EXPECT_EQ(kRfc.advance({1, 1004}, 9996), (Cursor{2, 1004}));
  // The write is two segments: 1004..9999 then 4..1003.
  EXPECT_EQ(kRfc.contiguous_to_end({1, 1004}), 8996u);
  EXPECT_EQ(kRfc.advance({1, 1004}, 8996), (Cursor{2, 4}));
  EXPECT_EQ(kRfc.advance({2, 4}, 1000), (Cursor{2, 1004}));
}

TEST(CdcCursor, Digest911FullWindow) {
  EXPECT_EQ(kRfc.used({2, 1004}, {1, 1004}), 9996u);
  EXPECT_EQ(kRfc.free_space({2, 1004}, {1, 1004}), 0u);
}

TEST(CdcCursor, Digest911EmptyWindow) {
  EXPECT_EQ(kRfc.used({2, 1004}, {2, 1004}), 0u);
  EXPECT_EQ(kRfc.free_space({2, 1004}, {2, 1004}), 9996u);
}

TEST(CdcCursor, Digest911Scenario3) {
  EXPECT_EQ(kRfc.used({0, 7004}, {0, 4}), 7000u);
  EXPECT_EQ(kRfc.free_space({0, 7004}, {0, 4}), 2996u);
}

TEST(CdcCursor, Digest911WrapDifferenceTwoIsViolation) {
  EXPECT_FALSE(kRfc.used({2, 1004}, {0, 1004}));
  EXPECT_FALSE(kRfc.used({3, 4}, {1, 5000}));
  EXPECT_FALSE(kRfc.free_space({2, 1004}, {0, 1004}));
  // A consumer ahead of the producer (wrap difference 0xFFFF) is as bad.
  EXPECT_FALSE(kRfc.used({0, 1004}, {1, 1004}));
}

TEST(CdcCursor, Digest911WrapIsModulo65536) {
  EXPECT_EQ(kRfc.used({0x0000, 1004}, {0xFFFF, 1004}), 9996u);
  EXPECT_EQ(kRfc.used({0x0000, 100}, {0xFFFF, 9000}), (10000u - 9000) + (100 - 4));
  EXPECT_EQ(kRfc.advance({0xFFFF, 9999}, 1), (Cursor{0x0000, 4}));
}

TEST(CdcCursor, OffsetsContradictingWrapDifference) {
  // Same wrap, producer behind consumer.
  EXPECT_FALSE(kRfc.used({5, 100}, {5, 101}));
  // One wrap ahead, producer past consumer: more than a full window.
  EXPECT_FALSE(kRfc.used({6, 102}, {5, 101}));
  EXPECT_FALSE(kRfc.free_space({6, 102}, {5, 101}));
}

TEST(CdcCursor, OffsetsOutOfRange) {
  EXPECT_FALSE(kRfc.used({0, 3}, {0, 3}));          // inside the eyecatcher
  EXPECT_FALSE(kRfc.used({0, 10000}, {0, 4}));      // == L
  EXPECT_FALSE(kRfc.used({0, 4}, {0, 0xFFFFFFFF}));
  EXPECT_FALSE(kRfc.in_range({0, 3}));
  EXPECT_TRUE(kRfc.in_range({0, 4}));
  EXPECT_TRUE(kRfc.in_range({0, 9999}));
  EXPECT_FALSE(kRfc.in_range({0, 10000}));
}

TEST(CdcCursor, WrapBoundary) {
  EXPECT_EQ(kRfc.advance({0, 9999}, 1), (Cursor{1, 4}));
  EXPECT_EQ(kRfc.advance({0, 9998}, 1), (Cursor{0, 9999}));
  EXPECT_EQ(kRfc.used({1, 4}, {0, 9999}), 1u);
  EXPECT_EQ(kRfc.contiguous_to_end({0, 9999}), 1u);
}

TEST(CdcCursor, UsedMatchesAdvanceEverywhere) {
  // Walk a producer through several wraps and check used() against the
  // running byte count, with the consumer held at the start.
  Cursor consumer{7, 5000};
  for (uint32_t n : {0u, 1u, 4995u, 4996u, 4997u, 9995u, 9996u}) {
    Cursor producer = kRfc.advance(consumer, n);
    EXPECT_EQ(kRfc.used(producer, consumer), n) << n;
    EXPECT_EQ(kRfc.free_space(producer, consumer), 9996u - n) << n;
  }
}

// --- Linux model: base 0, 64 KiB RMBE ------------------------------------------

const CursorSpace kLinux(65536, 0);

TEST(CdcCursorLinux, FullWriteShowsWrapPlusOneCountZero) {
  EXPECT_EQ(kLinux.capacity(), 65536u);
  EXPECT_EQ(kLinux.initial(), (Cursor{0, 0}));
  const Cursor after = kLinux.advance({0, 0}, 65536);
  EXPECT_EQ(after, (Cursor{1, 0}));  // as in capture L05
  EXPECT_EQ(kLinux.used(after, {0, 0}), 65536u);
  EXPECT_EQ(kLinux.free_space(after, {0, 0}), 0u);
  EXPECT_EQ(kLinux.used({16, 0}, {16, 0}), 0u);  // capture L07: all consumed
}

TEST(CdcCursorLinux, PartialWrites) {
  EXPECT_EQ(kLinux.advance({0, 0}, 1000), (Cursor{0, 1000}));
  EXPECT_EQ(kLinux.advance({0, 65000}, 1000), (Cursor{1, 464}));
  EXPECT_EQ(kLinux.used({1, 464}, {0, 65000}), 1000u);
  EXPECT_EQ(kLinux.contiguous_to_end({0, 65000}), 536u);
  EXPECT_FALSE(kLinux.used({0, 65536}, {0, 0}));
  EXPECT_FALSE(kLinux.used({2, 0}, {0, 0}));
}

// --- Digest 9.12: sequence numbers ----------------------------------------------

TEST(CdcSeq, Digest912) {
  uint16_t seq = 0xFFFF;
  seq = static_cast<uint16_t>(seq + 1);
  EXPECT_EQ(seq, 0);
  EXPECT_TRUE(seq_newer(0x0000, 0xFFFF));  // last 0xFFFF, new 0: process
  EXPECT_FALSE(seq_newer(4, 5));           // last 5, new 4: discard
  EXPECT_TRUE(seq_newer(2, 1));
  EXPECT_FALSE(seq_newer(7, 7));           // a replay is not newer
  EXPECT_TRUE(seq_newer(0x7FFF, 0));
  EXPECT_FALSE(seq_newer(0x8000, 0));
}

}  // namespace
}  // namespace smcr::cdc
