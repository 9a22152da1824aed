#include "core/cdc_mem.h"

#include <cstring>


namespace smcr::cdcmem {

namespace {

// Page layout. Line 0 holds the publish count: n after the sender's n-th
// CDC is complete. Lines 1 and 2 are two slots, the n-th CDC going to slot
// n % 2, each under its own sequence lock (odd while written) with the
// urgent record beside the CDC. A sender descheduled halfway through a
// publish (for milliseconds, under load) thus never hides the CDC it
// completed before, the one it may already have rung the receiver for: a
// single slot would leave that receiver woken with nothing to read. Line 3
// is the receiver's (wants), line 4 the sender's ring count: apart, so a
// sender spinning on nothing does not bounce the receiver's line.
constexpr size_t kVersionAt = 0;
constexpr size_t kReadySinceAt = 8;  // beside the version: the line moves with every publish anyway
constexpr size_t kSlotAt[2] = {64, 128};
constexpr size_t kSlotLockAt = 0;  // within a slot
constexpr size_t kUrgentValidAt = 4;
constexpr size_t kCdcAt = 8;  // 6 words hold the 44 bytes
constexpr size_t kCdcWords = 6;
constexpr size_t kUrgentAt = 56;  // seq << 48 | wrap << 32 | offset
constexpr size_t kWantDataAt = 192;
constexpr size_t kWantWindowAt = 200;
constexpr size_t kNoDirectAt = 208;
constexpr size_t kReadySetAt = 216;
constexpr size_t kCloseWelcomeAt = 224;  // (1 << 32) | the receiver's alert token
constexpr size_t kRingingAt = 256;
// Line 5: the receiver's bell record (publish_bell): token last.
constexpr size_t kBellTokenAt = 320, kBellPidAt = 324, kBellFdAt = 328, kBellInoAt = 336, kBellAckAt = 344;
static_assert(kCdcAt + kCdcWords * 8 <= kUrgentAt && kUrgentAt + 8 <= 64);
static_assert(kSlotAt[1] + 64 <= kWantDataAt && kRingingAt + 4 <= kControlBytes);
static_assert(kRingingAt + 64 <= kBellTokenAt && kBellAckAt + 4 <= kControlBytes);
static_assert(kSlotAt[0] == layout::kSlot0 && kSlotAt[1] == layout::kSlot1 && kCdcAt == layout::kCdcInSlot);

// A slot's word: the number of the publish it holds, shifted left by one,
// with kSlotBusy set while the sender writes it. The number lets a receiver
// that knows publish `seen` find publish seen + 1 in its slot, (seen + 1) % 2,
// without loading the version line first: one cache line moves per CDC, not
// two (a cross-core transfer is ~300 ns on some VMs).
constexpr uint32_t kSlotBusy = 1;

// How far after `seen` the complete publish a slot word names lies (31-bit
// numbers); 0 when the slot is busy or holds nothing after `seen`.
uint32_t slot_lead(uint32_t word, uint32_t seen) {
  if (word & kSlotBusy) return 0;
  uint32_t d = ((word >> 1) - seen) & 0x7FFFFFFFu;
  return d < 0x40000000u ? d : 0;
}

// A racing writer may be in the middle of an update; after this many tries
// the reader leaves it for its next look (a live writer finishes in ns).
constexpr int kFetchTries = 64;

std::atomic_ref<uint32_t> u32_at(const uint8_t* page, size_t at) {
  return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(const_cast<uint8_t*>(page) + at));
}
std::atomic_ref<uint64_t> u64_at(const uint8_t* page, size_t at) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(page) + at));
}

}  // namespace

std::atomic_ref<uint32_t> ringing(uint8_t* page) { return u32_at(page, kRingingAt); }

void set_ready_since(uint8_t* page, uint64_t stamp) {
  u64_at(page, kReadySinceAt).store(stamp, std::memory_order_relaxed);  // the version's store publishes it
}

uint64_t ready_since(const uint8_t* page) { return u64_at(page, kReadySinceAt).load(std::memory_order_acquire); }

void reset_for_reuse(uint8_t* page) {
  std::memset(page, 0, kRingingAt);
  std::memset(page + kRingingAt + 4, 0, kControlBytes - kRingingAt - 4);
}

namespace {
std::atomic_ref<uint64_t> want_word(uint8_t* page, Want which) {
  return u64_at(page, which == Want::kData ? kWantDataAt : kWantWindowAt);
}
uint64_t cursor_bits(const cdc::Cursor& c) { return (uint64_t{c.wrap} << 32 | c.offset) << 1; }
// Bits 1..48: the cursor; 49..62: the arming connection's tag; 63: kForSet.
constexpr uint64_t kCursorMask = ((uint64_t{1} << 49) - 1) & ~kArmed;
constexpr int kTagShift = 49;
constexpr uint32_t kTagMask = 0x3fff;
}  // namespace

uint64_t load_want(uint8_t* page, Want which) { return want_word(page, which).load(std::memory_order_seq_cst); }

void arm(uint8_t* page, Want which, const cdc::Cursor& known, uint32_t tag) {
  want_word(page, which).store(cursor_bits(known) | uint64_t{tag & kTagMask} << kTagShift | kArmed,
                               std::memory_order_seq_cst);
}

void arm_for_set(uint8_t* page, const cdc::Cursor& known, uint32_t tag, ReadySetSlot where) {
  // The slot first: a sender that takes this arming reads it after.
  u64_at(page, kReadySetAt).store(uint64_t{where.set_id} << 32 | where.slot, std::memory_order_seq_cst);
  want_word(page, Want::kData)
      .store(cursor_bits(known) | uint64_t{tag & kTagMask} << kTagShift | kForSet | kArmed, std::memory_order_seq_cst);
}

ReadySetSlot ready_set_slot(uint8_t* page) {
  uint64_t v = u64_at(page, kReadySetAt).load(std::memory_order_seq_cst);
  return ReadySetSlot{static_cast<uint32_t>(v >> 32), static_cast<uint32_t>(v)};
}

bool disarm(uint8_t* page, Want which) {
  return (want_word(page, which).fetch_and(~kArmed, std::memory_order_seq_cst) & kArmed) != 0;
}

bool take_for_end(uint8_t* page, uint64_t seen) {
  if (!(seen & kArmed)) return false;
  return want_word(page, Want::kData).compare_exchange_strong(seen, seen & ~kArmed, std::memory_order_seq_cst);
}

bool take(uint8_t* page, Want which, uint64_t seen, const cdc::Cursor& cursor) {
  if (!(seen & kArmed) || (seen & kCursorMask) == cursor_bits(cursor)) return false;
  return want_word(page, which).compare_exchange_strong(seen, seen & ~kArmed, std::memory_order_seq_cst);
}

void publish_bell(uint8_t* page, uint32_t alert_token, const BellRecord& bell) {
  // Token 0 first: a reader never pairs the old token with new fields.
  u32_at(page, kBellTokenAt).store(0, std::memory_order_relaxed);
  u32_at(page, kBellAckAt).store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  u32_at(page, kBellPidAt).store(bell.pid, std::memory_order_relaxed);
  u32_at(page, kBellFdAt).store(bell.fd, std::memory_order_relaxed);
  u64_at(page, kBellInoAt).store(bell.ino, std::memory_order_relaxed);
  u32_at(page, kBellTokenAt).store(alert_token, std::memory_order_release);
}

std::optional<BellRecord> read_bell(const uint8_t* page, uint32_t alert_token) {
  if (alert_token == 0 || u32_at(page, kBellTokenAt).load(std::memory_order_acquire) != alert_token)
    return std::nullopt;
  BellRecord r;
  r.pid = u32_at(page, kBellPidAt).load(std::memory_order_relaxed);
  r.fd = u32_at(page, kBellFdAt).load(std::memory_order_relaxed);
  r.ino = u64_at(page, kBellInoAt).load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  // Rewritten meanwhile (the RMB reused): not this connection's.
  if (u32_at(page, kBellTokenAt).load(std::memory_order_relaxed) != alert_token) return std::nullopt;
  if (r.pid == 0 || r.pid > 0x3fffffff || r.fd > 0x7fffffff || r.ino == 0) return std::nullopt;
  return r;
}

void ack_bell(uint8_t* page, uint32_t alert_token) { u32_at(page, kBellAckAt).store(alert_token, std::memory_order_release); }

bool bell_acked(const uint8_t* page, uint32_t alert_token) {
  return alert_token != 0 && u32_at(page, kBellAckAt).load(std::memory_order_acquire) == alert_token;
}

void welcome_close_in_memory(uint8_t* page, uint32_t alert_token) {
  u64_at(page, kCloseWelcomeAt).store(uint64_t{1} << 32 | alert_token, std::memory_order_seq_cst);
}
bool close_in_memory_welcome(uint8_t* page, uint32_t alert_token) {
  return u64_at(page, kCloseWelcomeAt).load(std::memory_order_seq_cst) == (uint64_t{1} << 32 | alert_token);
}

void forbid_direct(uint8_t* page) { u32_at(page, kNoDirectAt).store(1, std::memory_order_seq_cst); }
bool direct_forbidden(uint8_t* page) { return u32_at(page, kNoDirectAt).load(std::memory_order_seq_cst) != 0; }

uint32_t version(const uint8_t* page) { return u32_at(page, kVersionAt).load(std::memory_order_acquire); }

uint32_t publish(uint8_t* page, const cdc::Message& m) {
  std::array<uint8_t, cdc::kMessageLen> wire = cdc::encode(m);
  uint64_t words[kCdcWords] = {};
  std::memcpy(words, wire.data(), wire.size());
  auto count = u32_at(page, kVersionAt);
  uint32_t n = count.load(std::memory_order_relaxed) + 1;  // we are its only writer
  const size_t slot = kSlotAt[n & 1], previous = kSlotAt[(n & 1) ^ 1];
  // The urgent record carries over from the previous publish (our own
  // writes, stable while we write this slot) unless this CDC brings one.
  uint64_t urgent = u64_at(page, previous + kUrgentAt).load(std::memory_order_relaxed);
  uint32_t urgent_valid = u32_at(page, previous + kUrgentValidAt).load(std::memory_order_relaxed);
  if (m.flags.urgent_present) {
    urgent = uint64_t{m.seq} << 48 | uint64_t{m.producer.wrap} << 32 | m.producer.offset;
    urgent_valid = 1;
  }
  auto lock = u32_at(page, slot + kSlotLockAt);
  lock.store(n << 1 | kSlotBusy, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  u64_at(page, slot + kUrgentAt).store(urgent, std::memory_order_relaxed);
  u32_at(page, slot + kUrgentValidAt).store(urgent_valid, std::memory_order_relaxed);
  for (size_t i = 0; i < kCdcWords; ++i) u64_at(page, slot + kCdcAt + 8 * i).store(words[i], std::memory_order_relaxed);
  lock.store(n << 1, std::memory_order_release);
  // Sequentially consistent: the receiver's wait bits are read after this
  // (see the header), and the RMB bytes written before it are visible first.
  count.store(n, std::memory_order_seq_cst);
  return n;
}

bool news(const uint8_t* page, uint32_t seen) {
  uint32_t word = u32_at(page, kSlotAt[(seen + 1) & 1] + kSlotLockAt).load(std::memory_order_acquire);
  // Complete: it holds publish seen + 1 or later, or (publishes complete in
  // order) nothing after `seen` is complete anywhere. The version line, which
  // every publish moves, stays where it is.
  if (!(word & kSlotBusy)) return slot_lead(word, seen) != 0;
  // Being rewritten with seen + 3 or later: the other slot holds seen + 2.
  // The version says (behind `seen` while the count of a publish read from
  // its slot has not landed yet).
  return static_cast<int32_t>(version(page) - seen) > 0;
}

bool fetch(const uint8_t* page, uint32_t* seen, cdc::Message* out, UrgentRecord* urgent) {
  auto count = u32_at(page, kVersionAt);
  for (int i = 0; i < kFetchTries; ++i) {
    // The slot of publish seen + 1 holds it or a later one of its parity,
    // and the other slot a later one still if the sender has moved on (a
    // line this reader holds already when it has not: no transfer).
    size_t slot = kSlotAt[(*seen + 1) & 1];
    uint32_t before = u32_at(page, slot + kSlotLockAt).load(std::memory_order_acquire);
    uint32_t n;
    if (uint32_t lead = slot_lead(before, *seen)) {
      n = *seen + lead;
      const size_t other = kSlotAt[(n & 1) ^ 1];
      uint32_t later = u32_at(page, other + kSlotLockAt).load(std::memory_order_acquire);
      if (uint32_t more = slot_lead(later, n)) {
        slot = other;
        before = later;
        n += more;
      }
    } else {
      n = count.load(std::memory_order_acquire);
      // Behind *seen too: the slot read before showed a publish whose count
      // store has not landed yet.
      if (static_cast<int32_t>(n - *seen) <= 0) return false;
      // Slot n % 2 holds publish n, or a later one if the sender has moved on
      // twice meanwhile (then the count has too, and a retry reads that).
      slot = kSlotAt[n & 1];
      before = u32_at(page, slot + kSlotLockAt).load(std::memory_order_acquire);
      if (before & kSlotBusy) continue;
      // The slot names the publish it holds: *seen must be that one, not
      // n, or a later look would take the slot of n + 1 for news and move
      // the cursors back.
      if (uint32_t lead = slot_lead(before, *seen)) n = *seen + lead;
    }
    uint64_t words[kCdcWords];
    for (size_t k = 0; k < kCdcWords; ++k) words[k] = u64_at(page, slot + kCdcAt + 8 * k).load(std::memory_order_relaxed);
    uint64_t u = u64_at(page, slot + kUrgentAt).load(std::memory_order_relaxed);
    uint32_t uvalid = u32_at(page, slot + kUrgentValidAt).load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (u32_at(page, slot + kSlotLockAt).load(std::memory_order_relaxed) != before) continue;
    *seen = n;
    uint8_t wire[kCdcWords * 8];
    std::memcpy(wire, words, sizeof wire);
    auto m = cdc::decode(std::span<const uint8_t>(wire, cdc::kMessageLen));
    if (!m) return false;
    *out = *m;
    urgent->valid = uvalid != 0;
    urgent->seq = static_cast<uint16_t>(u >> 48);
    urgent->producer.wrap = static_cast<uint16_t>(u >> 32);
    urgent->producer.offset = static_cast<uint32_t>(u);
    return true;
  }
  return false;
}

}  // namespace smcr::cdcmem

namespace smcr::cdcmem {

std::array<uint8_t, cdc::kMessageLen> encode_bell(uint32_t alert_token) {
  std::array<uint8_t, cdc::kMessageLen> m{};
  m[0] = kBellMessageType;
  m[1] = static_cast<uint8_t>(cdc::kMessageLen);
  for (int i = 0; i < 4; ++i) m[4 + i] = static_cast<uint8_t>(alert_token >> (24 - 8 * i));
  return m;
}

std::optional<uint32_t> decode_bell(std::span<const uint8_t> msg) {
  if (msg.size() != cdc::kMessageLen || msg[0] != kBellMessageType || msg[1] != cdc::kMessageLen) return std::nullopt;
  uint32_t token = 0;
  for (int i = 0; i < 4; ++i) token = token << 8 | msg[4 + i];
  return token;
}

}  // namespace smcr::cdcmem
