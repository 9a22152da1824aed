#include "core/process.h"

#include <pthread.h>

#include <atomic>

namespace smcr {

namespace {

std::atomic<uint64_t> g_generation{1};  // never 0: a stored 0 means "not yet"
[[maybe_unused]] const int g_atfork = pthread_atfork(nullptr, nullptr, [] { g_generation.fetch_add(1); });

}  // namespace

uint64_t process_generation() { return g_generation.load(std::memory_order_relaxed); }

}  // namespace smcr
