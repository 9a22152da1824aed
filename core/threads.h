// Every thread the shim starts (the engine, the pooled workers) is started
// here, detached, with every signal blocked (the application's signals land
// on its own threads).
//
// Under AddressSanitizer the shim's threads must also be fork-safe, which
// GCC 12's libasan is not by itself: it takes its thread registry lock when
// a thread starts and when one ends, and installs no fork handler, so a
// child forked by one thread while another of the parent's threads starts
// or ends inherits that lock taken, and deadlocks at its own first
// pthread_create (integration.fork caught an accept-then-fork child stuck
// there, starting its engine to take over its connection, 1 run in ~50).
// So in that build a fork waits until no thread of the shim is starting
// (from the pthread_create call until the new thread runs its own code:
// libasan registers it on both sides), and the pooled threads never end
// (core/worker_pool.h).
// Other builds pay nothing: glibc's fork is safe with threads.
#pragma once

#include <cstddef>

namespace smcr::threads {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kForkSafeStartsOnly = true;
#else
inline constexpr bool kForkSafeStartsOnly = false;
#endif

// Starts fn(arg) on a new detached thread named `name` (stack_bytes 0: the
// default size). False, with errno set, if the system would not give one.
bool start_detached(void* (*fn)(void*), void* arg, const char* name, size_t stack_bytes = 0);

// Installs the fork gate's handler. Called first thing in the shim's
// earliest constructor, so that its fork preparation runs after every
// other handler's (they run in the reverse order of installation): those
// may wait for work that starts a thread. A no-op where the gate is not
// needed, and after the first call.
void install_fork_gate();

}  // namespace smcr::threads
