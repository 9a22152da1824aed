// Ready sets: one shared page per (epoll set, link group) through which the
// peer's writers say "this connection has data" without a system call, as
// the kernel's ep_poll_callback puts a socket on its epoll's ready list.
//
// Why: a connection parked by an epoll set (preload/epoll.cc) used to be
// either unarmed, and then looked at by every epoll_wait (so at most 64 of
// them, O(parked) per wait), or armed, and then every message cost the
// writer a send on the reader's readiness socket and the reader a recv to
// empty it: at a thousand connections, as many system calls as TCP's own
// reads and writes. With a ready set a parked connection stays armed, but
// its arming names a slot of the set's page instead of the readiness
// socket; the writer that takes the arming sets the slot's bit, and makes a
// system call (one send on the set's bell socket) only if the set's thread is asleep in the
// kernel. epoll_wait then costs O(ready connections), not O(registered).
//
// One page per (set, peer link group), never shared between peers: a peer
// can only set (or clear) bits of its own connections' page, so a hostile
// one delays nobody else. Every bit is a hint the reader checks against the
// connection itself; a spurious bit costs a look, a missing one cannot
// happen with an honest peer (the arming protocol of core/cdc_mem.h).
//
// Sleeping: the reader sets `sleeping`, then looks at the summary; the
// writer sets its bits, then looks at `sleeping` (both sequentially
// consistent): one of them sees the other, so no wake-up is lost.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "core/cdc.h"

namespace smcr::readyset {

inline constexpr size_t kPageBytes = 4096;
// Slots per page: connections of one link group parked in one epoll set.
inline constexpr uint32_t kSlots = 2048;
// Pages a link group accepts from its peer over its lifetime (the id
// names one; ids are never reused, so a stale arming cannot reach a new
// page). Beyond it the peer's sets park that group's connections the old
// way.
inline constexpr uint32_t kMaxPerGroup = 64;

// Writer: marks `slot` (from the arming, untrusted: an out-of-range slot
// is ignored). True if the reader was asleep and this call took the duty
// to wake it (send a byte on the set's bell).
bool mark(uint8_t* page, uint32_t slot);

// Reader: every marked slot, each at most once per call, cleared.
template <typename F>
void drain(uint8_t* page, F&& on_slot);
// Reader: whether any slot is marked (a load of the summary).
bool pending(const uint8_t* page);
// Reader: about to sleep (true) or awake (false).
void set_sleeping(uint8_t* page, bool asleep);

// A new page: a sealed memfd (hidden, close-on-exec) mapped shared. False
// on failure. `*fd` and `*page` are the caller's (munmap kPageBytes).
bool create(int* fd, uint8_t** page);
// The peer's page from its memfd: sealed against shrinking and big
// enough, or null. The memfd stays the caller's.
uint8_t* map_remote(int memfd);

// The link messages that hand a page (kPage, with its memfd) and the set's
// bell socket (kBell) to the peer (SCM_RIGHTS): LLC's optional type range, so
// a peer that does not know them discards them (and closes the descriptor).
inline constexpr uint8_t kMessageType = 0xBF;
enum class Part : uint8_t { kBell = 1, kPage = 2 };
struct Announcement {
  Part part = Part::kBell;
  uint32_t id = 0;
};
std::array<uint8_t, cdc::kMessageLen> encode(const Announcement& a);
std::optional<Announcement> decode(std::span<const uint8_t> msg);

// Implementation of the template above.
namespace detail {
uint64_t take_summary(uint8_t* page);
uint64_t take_word(uint8_t* page, uint32_t word);
}  // namespace detail

template <typename F>
void drain(uint8_t* page, F&& on_slot) {
  uint64_t summary = detail::take_summary(page);
  while (summary) {
    uint32_t w = static_cast<uint32_t>(__builtin_ctzll(summary));
    summary &= summary - 1;
    uint64_t bits = detail::take_word(page, w);
    while (bits) {
      uint32_t b = static_cast<uint32_t>(__builtin_ctzll(bits));
      bits &= bits - 1;
      on_slot(w * 64 + b);
    }
  }
}

}  // namespace smcr::readyset
