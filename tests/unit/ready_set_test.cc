// Ready sets (core/ready_set.h): the shared page through which a writer
// tells an epoll set that a parked connection has data, and wakes its
// sleeping thread only when it sleeps. Real memfds, real threads.
#include "core/ready_set.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/cdc_mem.h"

namespace smcr {
namespace {

struct Page {
  int fd = -1;
  uint8_t* page = nullptr;
  Page() { EXPECT_TRUE(readyset::create(&fd, &page)); }
  ~Page() {
    if (page) munmap(page, readyset::kPageBytes);
    if (fd >= 0) close(fd);
  }
};

std::vector<uint32_t> drained(uint8_t* page) {
  std::vector<uint32_t> out;
  readyset::drain(page, [&](uint32_t s) { out.push_back(s); });
  return out;
}

TEST(ReadySet, MarkedSlotsAreDrainedOnceEach) {
  Page p;
  EXPECT_FALSE(readyset::pending(p.page));
  EXPECT_TRUE(drained(p.page).empty());
  for (uint32_t s : {0u, 63u, 64u, 1000u, readyset::kSlots - 1}) EXPECT_FALSE(readyset::mark(p.page, s));
  EXPECT_FALSE(readyset::mark(p.page, 64));  // twice: one report
  EXPECT_TRUE(readyset::pending(p.page));
  EXPECT_EQ(drained(p.page), (std::vector<uint32_t>{0, 63, 64, 1000, readyset::kSlots - 1}));
  EXPECT_FALSE(readyset::pending(p.page));
  EXPECT_TRUE(drained(p.page).empty());
}

TEST(ReadySet, ASlotOutOfRangeIsIgnored) {
  Page p;
  EXPECT_FALSE(readyset::mark(p.page, readyset::kSlots));
  EXPECT_FALSE(readyset::mark(p.page, 0xffffffffu));
  EXPECT_FALSE(readyset::pending(p.page));
}

TEST(ReadySet, OnlyTheFirstMarkAfterTheReaderSleepsWakesIt) {
  Page p;
  EXPECT_FALSE(readyset::mark(p.page, 1));  // awake: nobody to wake
  readyset::set_sleeping(p.page, true);
  EXPECT_TRUE(readyset::mark(p.page, 2));   // this writer rings
  EXPECT_FALSE(readyset::mark(p.page, 3));  // the flag is taken: no second ring
  readyset::set_sleeping(p.page, false);
  EXPECT_FALSE(readyset::mark(p.page, 4));
  EXPECT_EQ(drained(p.page), (std::vector<uint32_t>{1, 2, 3, 4}));
}

TEST(ReadySet, AHostilePeersSummaryBitsBeyondTheMapMeanNothing) {
  Page p;
  // What a peer could write into the page: every bit of the summary and
  // every word set. Draining reports only real slots, each once.
  std::memset(p.page, 0xff, readyset::kPageBytes);
  auto slots = drained(p.page);
  EXPECT_EQ(slots.size(), readyset::kSlots);
  EXPECT_TRUE(std::all_of(slots.begin(), slots.end(), [](uint32_t s) { return s < readyset::kSlots; }));
  EXPECT_EQ(std::set<uint32_t>(slots.begin(), slots.end()).size(), readyset::kSlots);
}

// The reader's protocol (set sleeping, then look) against writers' (mark,
// then look at sleeping): every mark is either seen by the reader's look
// or rings it. Counted over many rounds with real threads.
TEST(ReadySet, NoMarkIsLostWhileTheReaderGoesToSleep) {
  Page p;
  constexpr int kRounds = 20000;
  std::atomic<int> round{0};
  std::atomic<int> rung{0};
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    int last = 0;  // round 0 is not one
    while (!stop.load()) {
      int r = round.load();
      if (r == last) continue;
      last = r;
      if (readyset::mark(p.page, static_cast<uint32_t>(r % readyset::kSlots))) rung.fetch_add(1);
    }
  });
  int lost = 0;
  for (int r = 1; r <= kRounds; ++r) {
    int rings_before = rung.load();
    round.store(r);  // the writer marks slot r
    readyset::set_sleeping(p.page, true);
    bool seen = readyset::pending(p.page);
    if (!seen) {
      // "Asleep": the writer must ring (or has, if it came after the look).
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (rung.load() == rings_before && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      if (rung.load() == rings_before) {
        ++lost;  // one is enough to fail: stop here
        break;
      }
    }
    readyset::set_sleeping(p.page, false);
    // The mark itself is never lost either.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    std::vector<uint32_t> got;
    while (got.empty() && std::chrono::steady_clock::now() < deadline) got = drained(p.page);
    ASSERT_EQ(got, std::vector<uint32_t>{static_cast<uint32_t>(r % readyset::kSlots)}) << "round " << r;
  }
  stop.store(true);
  writer.join();
  EXPECT_EQ(lost, 0);
}

TEST(ReadySet, APageIsMappedOnlyWhenSealedAndBigEnough) {
  Page p;
  uint8_t* mine = readyset::map_remote(p.fd);
  ASSERT_NE(mine, nullptr);
  EXPECT_FALSE(readyset::mark(mine, 7));  // the writer's mapping is the reader's page
  EXPECT_EQ(drained(p.page), std::vector<uint32_t>{7});
  munmap(mine, readyset::kPageBytes);

  // Unsealed: a peer could shrink it under us (SIGBUS).
  int loose = static_cast<int>(syscall(SYS_memfd_create, "loose", MFD_CLOEXEC));
  ASSERT_GE(loose, 0);
  ASSERT_EQ(ftruncate(loose, readyset::kPageBytes), 0);
  EXPECT_EQ(readyset::map_remote(loose), nullptr);
  close(loose);
  // Sealed but too small.
  int small = static_cast<int>(syscall(SYS_memfd_create, "small", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_GE(small, 0);
  ASSERT_EQ(ftruncate(small, 64), 0);
  ASSERT_EQ(fcntl(small, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  EXPECT_EQ(readyset::map_remote(small), nullptr);
  close(small);
}

TEST(ReadySet, AnnouncementsRoundTripAndRejectWhatTheyAreNot) {
  for (auto part : {readyset::Part::kBell, readyset::Part::kPage}) {
    auto m = readyset::encode({part, 5});
    auto a = readyset::decode(m);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->part, part);
    EXPECT_EQ(a->id, 5u);
  }
  auto m = readyset::encode({readyset::Part::kPage, readyset::kMaxPerGroup});
  EXPECT_FALSE(readyset::decode(m));  // an id no group hands out
  m = readyset::encode({readyset::Part::kPage, 1});
  m[2] = 9;
  EXPECT_FALSE(readyset::decode(m));  // no such part
  m[2] = 2;
  m[1] = 40;
  EXPECT_FALSE(readyset::decode(m));  // wrong length
  EXPECT_FALSE(readyset::decode(std::span<const uint8_t>(m.data(), 10)));
  m = cdcmem::encode_bell(1);
  EXPECT_FALSE(readyset::decode(m));  // a bell is not a ready set
}

// The arming that names a ready set: the sender that takes it learns the
// slot, and tells it from a readiness-socket arming.
TEST(ReadySet, AnArmingForASetCarriesItsSlot) {
  std::vector<uint8_t> page(cdcmem::kControlBytes, 0);
  cdc::Cursor known{3, 100};
  cdcmem::arm_for_set(page.data(), known, 0x1234, cdcmem::ReadySetSlot{7, 1999});
  uint64_t seen = cdcmem::load_want(page.data(), cdcmem::Want::kData);
  EXPECT_TRUE(seen & cdcmem::kArmed);
  EXPECT_TRUE(seen & cdcmem::kForSet);
  EXPECT_FALSE(cdcmem::take(page.data(), cdcmem::Want::kData, seen, known));  // nothing new
  EXPECT_TRUE(cdcmem::take(page.data(), cdcmem::Want::kData, seen, cdc::Cursor{3, 200}));
  auto where = cdcmem::ready_set_slot(page.data());
  EXPECT_EQ(where.set_id, 7u);
  EXPECT_EQ(where.slot, 1999u);
  cdcmem::arm(page.data(), cdcmem::Want::kData, known, 0x3fff);
  EXPECT_FALSE(cdcmem::load_want(page.data(), cdcmem::Want::kData) & cdcmem::kForSet);
}

}  // namespace
}  // namespace smcr
