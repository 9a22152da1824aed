#include "core/process.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

namespace smcr {

namespace {

std::atomic<uint64_t> g_generation{1};  // never 0: a stored 0 means "not yet"
[[maybe_unused]] const int g_atfork = pthread_atfork(nullptr, nullptr, [] { g_generation.fetch_add(1); });

}  // namespace

uint64_t process_generation() { return g_generation.load(std::memory_order_relaxed); }

int current_pid() {
  // The pair packed in one word: a reader never takes a pid with the wrong
  // generation (a forked child's first call asks again).
  static std::atomic<uint64_t> cached{0};
  uint64_t gen = process_generation();
  uint64_t v = cached.load(std::memory_order_relaxed);
  if (v != 0 && (v >> 32) == (gen & 0xffffffffu)) return static_cast<int>(v & 0xffffffffu);
  int pid = static_cast<int>(getpid());
  cached.store((gen & 0xffffffffu) << 32 | static_cast<uint32_t>(pid), std::memory_order_relaxed);
  return pid;
}

}  // namespace smcr
