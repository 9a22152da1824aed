// Copying into memory that another core reads next (the peer's RMB on the
// shared-memory fabric).
#pragma once

#include <cstddef>
#include <cstdint>

namespace smcr {

// From this size on, a copy into the peer's RMB bypasses this core's cache
// (non-temporal stores). An ordinary store first takes each line from the
// reader's cache, where the reader's last pass left it, and leaves it
// modified here for the reader to take back: two cross-core transfers per
// line, whose cost on a VM varies from run to run by up to ten times
// (sockperf 64000 B streams between two vCPUs of an AMD EPYC VM: 1.5 to 20
// GB/s in the same hour; a bare two-process ring shows the same). Streamed
// stores go to the memory side once and the reader's sequential loads are
// prefetched from there: 8.5-12.7 GB/s, every run; 8 KiB streams 5-10
// instead of 1.4-8 GB/s. Request/response latency did not suffer (sockperf
// ping-pong p50 8 KiB 1.7 us either way, 16 KiB 2.4-2.9 vs 2.7-3.3 us,
// 60000 B 6.7-7.6 vs 9.6-33 us). Below 8 KiB stores stay cached: the
// reader of a small message takes it from this cache faster.
inline constexpr size_t kStreamingCopyMin = 8 * 1024;

// memcpy, with non-temporal stores for len >= kStreamingCopyMin; the
// stores are fenced (visible, in order, before any later store: the
// cursor's publication).
void copy_for_peer(void* dst, const void* src, size_t len);

}  // namespace smcr
