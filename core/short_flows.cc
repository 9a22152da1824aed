#include "core/short_flows.h"

#include <netinet/in.h>

#include <atomic>
#include <cstring>

#include "core/env.h"

namespace smcr::shortflows {
namespace {

// Slot word: key (32 bits) | streak (4 bits) | time of the last end in ms,
// low 28 bits (wraps after 74 hours; a wrapped time only shortens a verdict).
constexpr int kSlots = 1024;
constexpr uint64_t kMsMask = (uint64_t{1} << 28) - 1;
constexpr unsigned kStreakMax = 15;
std::atomic<uint64_t> g_slots[kSlots];

uint64_t short_writes() {
  static const uint64_t n = static_cast<uint64_t>(env_long("SMCR_SHORT_FLOWS", 8, 0, 1 << 20));
  return n;
}

uint32_t key_of(uint64_t w) { return static_cast<uint32_t>(w >> 32); }
unsigned streak_of(uint64_t w) { return static_cast<unsigned>((w >> 28) & 0xf); }
uint64_t word(uint32_t key, unsigned streak, int64_t now_ms) {
  return (uint64_t{key} << 32) | (uint64_t{streak} << 28) | (static_cast<uint64_t>(now_ms) & kMsMask);
}

// FNV-1a over the bytes that name the destination.
uint32_t hash(const uint8_t* p, size_t n, uint32_t h = 2166136261u) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

}  // namespace

uint32_t destination_key(const sockaddr* peer, socklen_t len) {
  if (!peer || len < sizeof(sa_family_t) || short_writes() == 0) return 0;
  uint32_t h;
  if (peer->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    sockaddr_in a;
    memcpy(&a, peer, sizeof a);
    h = hash(reinterpret_cast<const uint8_t*>(&a.sin_addr), sizeof a.sin_addr);
    h = hash(reinterpret_cast<const uint8_t*>(&a.sin_port), sizeof a.sin_port, h);
  } else if (peer->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    sockaddr_in6 a;
    memcpy(&a, peer, sizeof a);
    h = hash(reinterpret_cast<const uint8_t*>(&a.sin6_addr), sizeof a.sin6_addr);
    h = hash(reinterpret_cast<const uint8_t*>(&a.sin6_port), sizeof a.sin6_port, h);
  } else {
    return 0;
  }
  return h ? h : 1;
}

bool is_short(uint64_t writes, uint64_t bytes) { return writes < short_writes() && bytes < kShortMaxBytes; }

bool keep_on_tcp(uint32_t key, int64_t now_ms) {
  if (!key) return false;
  std::atomic<uint64_t>& slot = g_slots[key % kSlots];
  uint64_t w = slot.load(std::memory_order_relaxed);
  if (key_of(w) != key || streak_of(w) < kShortStreak) return false;
  uint64_t age = (static_cast<uint64_t>(now_ms) - (w & kMsMask)) & kMsMask;
  if (age < static_cast<uint64_t>(kVerdictMs)) return true;
  // The verdict is old: this connection probes with SMC-R. Restarting the
  // verdict's clock keeps the others on TCP meanwhile: a short probe renews
  // the verdict when it ends, a long one clears it.
  return !slot.compare_exchange_strong(w, word(key, streak_of(w), now_ms), std::memory_order_relaxed);
}

void ended(uint32_t key, uint64_t writes, uint64_t bytes, int64_t now_ms) {
  if (!key) return;
  std::atomic<uint64_t>& slot = g_slots[key % kSlots];
  uint64_t w = slot.load(std::memory_order_relaxed);
  unsigned streak = 0;
  if (is_short(writes, bytes)) {
    streak = key_of(w) == key ? streak_of(w) : 0;
    if (streak < kStreakMax) ++streak;
  }
  // Lossy on purpose: a racing end may overwrite this one.
  slot.store(word(key, streak, now_ms), std::memory_order_relaxed);
}

void reset_for_test() {
  for (auto& s : g_slots) s.store(0, std::memory_order_relaxed);
}

}  // namespace smcr::shortflows
