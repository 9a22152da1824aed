// CDCs through memory (core/cdc_mem.h): the newest-CDC slot under its
// sequence lock, the urgent record, the wait words and their hand-off rules,
// and the bell message. A page of ordinary memory stands in for the control
// page after an RMB; the concurrent test races a real writer thread.
#include "core/cdc_mem.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace smcr::cdcmem {
namespace {

struct Page {
  alignas(64) std::array<uint8_t, kControlBytes> bytes{};
  uint8_t* p() { return bytes.data(); }
};

cdc::Message cdc_with(uint16_t seq, uint32_t producer_offset, uint32_t consumer_offset) {
  cdc::Message m;
  m.seq = seq;
  m.alert_token = 0xA1B2C3D4;
  m.producer = {3, producer_offset};
  m.consumer = {1, consumer_offset};
  return m;
}

TEST(CdcMem, ABellRecordIsReadOnlyUnderItsOwnToken) {
  Page page;
  EXPECT_FALSE(read_bell(page.p(), 0x1234).has_value());  // a fresh page names none
  publish_bell(page.p(), 0x1234, BellRecord{4321, 10003, 987654});
  auto r = read_bell(page.p(), 0x1234);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->pid, 4321u);
  EXPECT_EQ(r->fd, 10003u);
  EXPECT_EQ(r->ino, 987654u);
  // Another connection's token (the RMB reused), or token 0: none.
  EXPECT_FALSE(read_bell(page.p(), 0x1235).has_value());
  EXPECT_FALSE(read_bell(page.p(), 0).has_value());
  // The fetcher's acknowledgement counts only under the same token.
  EXPECT_FALSE(bell_acked(page.p(), 0x1234));
  ack_bell(page.p(), 0x1235);
  EXPECT_FALSE(bell_acked(page.p(), 0x1234));
  ack_bell(page.p(), 0x1234);
  EXPECT_TRUE(bell_acked(page.p(), 0x1234));
  // Reused: the page is cleared for the next connection (its ringing count kept).
  reset_for_reuse(page.p());
  EXPECT_FALSE(read_bell(page.p(), 0x1234).has_value());
  EXPECT_FALSE(bell_acked(page.p(), 0x1234));
}

TEST(CdcMem, ABellRecordWithImpossibleValuesIsNone) {
  // The page is the peer's to write: a pid, descriptor or inode no kernel
  // gives is not a record.
  Page page;
  for (BellRecord bad : {BellRecord{0, 3, 7}, BellRecord{0x40000000, 3, 7}, BellRecord{42, 0x80000000u, 7},
                         BellRecord{42, 3, 0}}) {
    publish_bell(page.p(), 0x77, bad);
    EXPECT_FALSE(read_bell(page.p(), 0x77).has_value()) << bad.pid << " " << bad.fd << " " << bad.ino;
  }
}

TEST(CdcMem, NothingNewOnAFreshPage) {
  Page page;
  uint32_t seen = 0;
  cdc::Message out;
  UrgentRecord urgent;
  EXPECT_EQ(version(page.p()), 0u);
  EXPECT_FALSE(fetch(page.p(), &seen, &out, &urgent));
}

TEST(CdcMem, PublishThenFetchReturnsTheNewestOnce) {
  Page page;
  uint32_t v1 = publish(page.p(), cdc_with(1, 100, 4));
  uint32_t v2 = publish(page.p(), cdc_with(2, 200, 8));
  EXPECT_EQ(v1, 1u);  // the version counts completed publishes
  EXPECT_EQ(v2, 2u);
  uint32_t seen = 0;
  cdc::Message out;
  UrgentRecord urgent;
  ASSERT_TRUE(fetch(page.p(), &seen, &out, &urgent));
  EXPECT_EQ(out, cdc_with(2, 200, 8));  // the newest replaces the older
  EXPECT_EQ(seen, v2);
  EXPECT_FALSE(urgent.valid);
  EXPECT_FALSE(fetch(page.p(), &seen, &out, &urgent));  // nothing newer
}

TEST(CdcMem, UrgentRecordOutlivesTheCdcThatCarriedIt) {
  Page page;
  cdc::Message u = cdc_with(5, 300, 4);
  u.flags.urgent_present = u.flags.urgent_pending = true;
  publish(page.p(), u);
  publish(page.p(), cdc_with(6, 400, 4));  // replaces the U CDC in the slot
  uint32_t seen = 0;
  cdc::Message out;
  UrgentRecord urgent;
  ASSERT_TRUE(fetch(page.p(), &seen, &out, &urgent));
  EXPECT_EQ(out.seq, 6);
  EXPECT_FALSE(out.flags.urgent_present);
  ASSERT_TRUE(urgent.valid);
  EXPECT_EQ(urgent.seq, 5);
  EXPECT_EQ(urgent.producer, (cdc::Cursor{3, 300}));
}

TEST(CdcMem, GarbageInTheSlotIsNotACdc) {
  Page page;
  publish(page.p(), cdc_with(1, 100, 4));                   // the first publish goes to slot 1
  page.bytes[layout::kSlot1 + layout::kCdcInSlot] = 0x01;  // its type byte: no longer 0xFE
  uint32_t seen = 0;
  cdc::Message out;
  UrgentRecord urgent;
  EXPECT_FALSE(fetch(page.p(), &seen, &out, &urgent));
}

// A sender descheduled halfway through a publish (its slot's lock odd, the
// slot half written) must not hide the CDC it completed before: it may have
// rung the receiver for that one, and a receiver woken with nothing to read
// is what a TCP socket never shows.
TEST(CdcMem, ASenderStoppedMidPublishLeavesItsLastCompleteCdcReadable) {
  Page page;
  publish(page.p(), cdc_with(1, 100, 4));
  publish(page.p(), cdc_with(2, 200, 8));  // slot 0
  // Publish 3 begins in slot 1 and never ends.
  page.bytes[layout::kSlot1] |= 1;
  page.bytes[layout::kSlot1 + layout::kCdcInSlot + 20] ^= 0xFF;
  uint32_t seen = 0;
  cdc::Message out;
  UrgentRecord urgent;
  ASSERT_TRUE(fetch(page.p(), &seen, &out, &urgent));
  EXPECT_EQ(out, cdc_with(2, 200, 8));
  EXPECT_EQ(seen, version(page.p()));
  EXPECT_FALSE(fetch(page.p(), &seen, &out, &urgent));  // nothing newer is complete
}

// The sender completes the slot before it counts the publish: a receiver
// that knows the publish before finds the next one in its slot, with the
// version word (another cache line) not yet moved, and not twice.
TEST(CdcMem, TheNextPublishIsFoundInItsSlotBeforeTheVersionMoves) {
  Page page;
  publish(page.p(), cdc_with(1, 100, 4));
  uint32_t seen = 0;
  cdc::Message out;
  UrgentRecord urgent;
  ASSERT_TRUE(fetch(page.p(), &seen, &out, &urgent));
  ASSERT_EQ(seen, 1u);
  publish(page.p(), cdc_with(2, 200, 8));
  page.bytes[0] = 1;  // the version word (little-endian) as it was before publish 2
  EXPECT_TRUE(news(page.p(), seen));
  ASSERT_TRUE(fetch(page.p(), &seen, &out, &urgent));
  EXPECT_EQ(out, cdc_with(2, 200, 8));
  EXPECT_EQ(seen, 2u);
  page.bytes[0] = 2;  // the sender's count store lands
  EXPECT_FALSE(news(page.p(), seen));
  EXPECT_FALSE(fetch(page.p(), &seen, &out, &urgent));
}

// Publishes far ahead of the reader: both slots hold newer ones, and the
// reader takes the newest, whichever slot it is in.
TEST(CdcMem, AReaderFarBehindTakesTheNewestFromEitherSlot) {
  for (uint16_t last = 3; last <= 4; ++last) {
    Page page;
    for (uint16_t seq = 1; seq <= last; ++seq) publish(page.p(), cdc_with(seq, 100u * seq, 4));
    uint32_t seen = 0;
    cdc::Message out;
    UrgentRecord urgent;
    EXPECT_TRUE(news(page.p(), seen));
    ASSERT_TRUE(fetch(page.p(), &seen, &out, &urgent));
    EXPECT_EQ(out.seq, last);
    EXPECT_EQ(seen, last);
    EXPECT_FALSE(news(page.p(), seen));
  }
}

TEST(CdcMem, TheNewestUrgentRecordWinsAndCarriesOverBothSlots) {
  Page page;
  cdc::Message u1 = cdc_with(5, 300, 4);
  u1.flags.urgent_present = u1.flags.urgent_pending = true;
  cdc::Message u2 = cdc_with(6, 310, 4);
  u2.flags.urgent_present = u2.flags.urgent_pending = true;
  publish(page.p(), u1);
  publish(page.p(), u2);
  for (uint16_t seq = 7; seq < 10; ++seq) publish(page.p(), cdc_with(seq, 400, 4));
  uint32_t seen = 0;
  cdc::Message out;
  UrgentRecord urgent;
  ASSERT_TRUE(fetch(page.p(), &seen, &out, &urgent));
  EXPECT_EQ(out.seq, 9);
  ASSERT_TRUE(urgent.valid);
  EXPECT_EQ(urgent.seq, 6);
  EXPECT_EQ(urgent.producer, (cdc::Cursor{3, 310}));
}

TEST(CdcMem, ConcurrentReaderNeverSeesATornCdc) {
  Page page;
  std::atomic<bool> stop{false}, reader_started{false};
  std::atomic<size_t> reads{0};
  // A publish takes tens of nanoseconds: the writer goes on until the reader
  // (maybe scheduled late on a loaded machine) has really raced it, for at
  // most a few seconds.
  std::thread writer([&] {
    while (!reader_started.load()) std::this_thread::yield();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (uint32_t i = 1;; ++i) {
      publish(page.p(), cdc_with(static_cast<uint16_t>(i), i * 7 + 4, i * 3 + 4));
      if (i >= 200000 && (i & 1023) == 0 && (reads.load() >= 1000 || std::chrono::steady_clock::now() > deadline))
        break;
    }
    stop = true;
  });
  uint32_t seen = 0, last = 0;
  reader_started = true;
  while (!stop.load()) {
    cdc::Message out;
    UrgentRecord urgent;
    if (!fetch(page.p(), &seen, &out, &urgent)) continue;
    reads.fetch_add(1);
    // Every field of one publish belongs together.
    uint32_t i = (out.producer.offset - 4) / 7;
    ASSERT_EQ(out.producer.offset, i * 7 + 4);
    ASSERT_EQ(out.consumer.offset, i * 3 + 4);
    ASSERT_EQ(out.seq, static_cast<uint16_t>(i));
    // Never an older one after a newer one (the cursors would move back),
    // and *seen names the publish that was read.
    ASSERT_EQ(seen, i);
    ASSERT_GT(i, last);
    last = i;
  }
  writer.join();
  EXPECT_GT(reads.load(), 0u);
}

TEST(CdcMem, TheSenderTakesAnArmingOnlyForDataTheReceiverHasNotRead) {
  Page page;
  const cdc::Cursor read_up_to{3, 100};
  // The receiver took everything up to 3/100, then armed: a wake-up for a
  // CDC whose producer is 3/100 would be spurious.
  arm(page.p(), Want::kData, read_up_to);
  uint64_t w = load_want(page.p(), Want::kData);
  ASSERT_TRUE(w & kArmed);
  EXPECT_FALSE(take(page.p(), Want::kData, w, read_up_to));
  // New data is the receiver's to be woken for, exactly once.
  const cdc::Cursor newer{3, 200};
  EXPECT_TRUE(take(page.p(), Want::kData, w, newer));
  EXPECT_FALSE(take(page.p(), Want::kData, w, newer));
  EXPECT_FALSE(load_want(page.p(), Want::kData) & kArmed);
  EXPECT_FALSE(disarm(page.p(), Want::kData));  // the receiver learns it was taken
}

TEST(CdcMem, ARearmedWaitIsNotTakenWithAnOldLook) {
  Page page;
  arm(page.p(), Want::kData, {3, 100});
  uint64_t looked = load_want(page.p(), Want::kData);  // the sender looks (it published 3/200)...
  ASSERT_TRUE(disarm(page.p(), Want::kData));            // ...the receiver reads to 3/200 itself
  arm(page.p(), Want::kData, {3, 200});                  // and arms again
  EXPECT_FALSE(take(page.p(), Want::kData, looked, {3, 200}));
  EXPECT_TRUE(load_want(page.p(), Want::kData) & kArmed);
  // The same cursor in the new arming: still nothing new for the receiver.
  EXPECT_FALSE(take(page.p(), Want::kData, load_want(page.p(), Want::kData), {3, 200}));
}

TEST(CdcMem, DataAndWindowAreArmedApart) {
  Page page;
  arm(page.p(), Want::kWindow, {1, 4});
  EXPECT_FALSE(load_want(page.p(), Want::kData) & kArmed);
  uint64_t w = load_want(page.p(), Want::kWindow);
  EXPECT_TRUE(take(page.p(), Want::kWindow, w, {1, 64}));
  EXPECT_FALSE(direct_forbidden(page.p()));
  forbid_direct(page.p());
  EXPECT_TRUE(direct_forbidden(page.p()));
}

TEST(CdcMem, BellMessage) {
  auto m = encode_bell(0x0102A0B0);
  EXPECT_EQ(m[0], kBellMessageType);
  EXPECT_EQ(m[1], cdc::kMessageLen);
  EXPECT_EQ(decode_bell(m), 0x0102A0B0u);
  m[0] = cdc::kType;
  EXPECT_FALSE(decode_bell(m));
  EXPECT_FALSE(decode_bell(std::span<const uint8_t>(m.data(), 20)));
}

}  // namespace
}  // namespace smcr::cdcmem
