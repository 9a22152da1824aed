// When a bounded spin (watching for the peer before sleeping) is worth
// trying. A peer slow to answer costs a sleep anyway, so after three spins
// in a row that saw nothing the next 2^misses waits (up to 64) sleep at
// once. Shared by a blocking read (core/connection.cc) and epoll_wait
// (preload/epoll.cc); relaxed atomics, since an epoll set's waiters may be
// several threads and the counts are only a hint.
#pragma once

#include <atomic>
#include <cstdint>

namespace smcr {

class SpinBackoff {
 public:
  bool worth_trying() {
    uint32_t skip = skip_.load(std::memory_order_relaxed);
    if (skip == 0) return true;
    skip_.store(skip - 1, std::memory_order_relaxed);
    return false;
  }
  void hit() { misses_.store(0, std::memory_order_relaxed); }
  void missed() {
    uint32_t m = misses_.load(std::memory_order_relaxed);
    if (m < 6) misses_.store(++m, std::memory_order_relaxed);
    if (m >= 3) skip_.store(1u << m, std::memory_order_relaxed);
  }
  void reset() {
    misses_.store(0, std::memory_order_relaxed);
    skip_.store(0, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint32_t> misses_{0};  // spins in a row that saw nothing
  std::atomic<uint32_t> skip_{0};    // waits left that sleep without spinning
};

}  // namespace smcr
