#include "core/ready_set.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "core/fabric_shm.h"
#include "core/sys.h"

namespace smcr::readyset {

namespace {

// Line 0: the reader's sleeping flag; line 1: the summary (bit w: word w of
// the map may have bits); from line 2: the map, a bit per slot.
constexpr size_t kSleepingAt = 0;
constexpr size_t kSummaryAt = 64;
constexpr size_t kMapAt = 128;
constexpr uint32_t kWords = kSlots / 64;
static_assert(kWords <= 64, "one summary word");
static_assert(kMapAt + kWords * 8 <= kPageBytes);

std::atomic_ref<uint32_t> u32_at(const uint8_t* page, size_t at) {
  return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(const_cast<uint8_t*>(page) + at));
}
std::atomic_ref<uint64_t> u64_at(const uint8_t* page, size_t at) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(page) + at));
}

}  // namespace

bool mark(uint8_t* page, uint32_t slot) {
  if (slot >= kSlots) return false;
  const uint32_t w = slot / 64;
  u64_at(page, kMapAt + 8 * w).fetch_or(uint64_t{1} << (slot % 64), std::memory_order_seq_cst);
  // The summary after the bit: a reader that takes the summary first and
  // misses the bit finds the summary set again on its next look.
  auto summary = u64_at(page, kSummaryAt);
  const uint64_t sbit = uint64_t{1} << w;
  if (!(summary.load(std::memory_order_relaxed) & sbit)) summary.fetch_or(sbit, std::memory_order_seq_cst);
  else std::atomic_thread_fence(std::memory_order_seq_cst);
  auto sleeping = u32_at(page, kSleepingAt);
  return sleeping.load(std::memory_order_seq_cst) != 0 && sleeping.exchange(0, std::memory_order_seq_cst) != 0;
}

bool pending(const uint8_t* page) { return u64_at(page, kSummaryAt).load(std::memory_order_seq_cst) != 0; }

void set_sleeping(uint8_t* page, bool asleep) {
  u32_at(page, kSleepingAt).store(asleep ? 1 : 0, std::memory_order_seq_cst);
}

namespace detail {
uint64_t take_summary(uint8_t* page) {
  auto summary = u64_at(page, kSummaryAt);
  if (summary.load(std::memory_order_relaxed) == 0) return 0;
  // Only the words that exist: a hostile peer's other bits mean nothing.
  return summary.exchange(0, std::memory_order_seq_cst) & ((kWords == 64) ? ~uint64_t{0} : ((uint64_t{1} << kWords) - 1));
}
uint64_t take_word(uint8_t* page, uint32_t word) {
  return u64_at(page, kMapAt + 8 * word).exchange(0, std::memory_order_seq_cst);
}
}  // namespace detail

bool create(int* fd_out, uint8_t** page_out) { return shm_make_sealed("smcr-ready", kPageBytes, fd_out, page_out); }

uint8_t* map_remote(int memfd) {
  struct stat st;
  int seals = sys::fcntl(memfd, F_GET_SEALS);
  // Sealed against shrinking: a peer that truncated it would SIGBUS us.
  if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(memfd, &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size < static_cast<off_t>(kPageBytes))
    return nullptr;
  void* p = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}

std::array<uint8_t, cdc::kMessageLen> encode(const Announcement& a) {
  std::array<uint8_t, cdc::kMessageLen> m{};
  m[0] = kMessageType;
  m[1] = static_cast<uint8_t>(cdc::kMessageLen);
  m[2] = static_cast<uint8_t>(a.part);
  for (int i = 0; i < 4; ++i) m[4 + i] = static_cast<uint8_t>(a.id >> (24 - 8 * i));
  return m;
}

std::optional<Announcement> decode(std::span<const uint8_t> msg) {
  if (msg.size() != cdc::kMessageLen || msg[0] != kMessageType || msg[1] != cdc::kMessageLen) return std::nullopt;
  if (msg[2] != static_cast<uint8_t>(Part::kBell) && msg[2] != static_cast<uint8_t>(Part::kPage)) return std::nullopt;
  Announcement a;
  a.part = static_cast<Part>(msg[2]);
  for (int i = 0; i < 4; ++i) a.id = a.id << 8 | msg[4 + i];
  if (a.id >= kMaxPerGroup) return std::nullopt;
  return a;
}

}  // namespace smcr::readyset
