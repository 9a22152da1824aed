// Threads for work that may block (a handshake waiting for its peer, the
// relay of a connection that fell back to TCP): a new thread per job cost
// a short-lived connection about seven system calls (clone3, its stack's
// madvise, robust list, rseq, name, signal masks) and a cold start; a
// pooled thread costs a wake-up. Threads take no signals (the
// application's land elsewhere), are named after their job ("smcr-clc"
// unless told) and end after a few seconds without work (never, in an
// ASan build: core/threads.h). The handovers and relays of core/handoff.h
// run here too, so a process that hands many connections over starts few
// threads. A forked child starts with an empty pool: its parent's threads
// are not its own.
#pragma once

#include <functional>

namespace smcr::workers {

// Runs `job` on a pooled thread, a new one if none is idle. False if no
// thread could be had (the caller then does the work itself).
inline constexpr const char* kDefaultName = "smcr-clc";
bool run(std::function<void()> job, const char* name = kDefaultName);

// Threads now in the pool (busy or idle), for tests.
int threads();

}  // namespace smcr::workers
