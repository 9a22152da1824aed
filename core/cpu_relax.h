// The pause inside a bounded spin (a reader watching for the peer's CDC, the
// CLC waiting for an answer, epoll_wait looking at parked connections): the
// core learns that this is a spin and gives its pipeline to the sibling
// hardware thread, which may be the peer we are waiting for. One header, so
// that the spins build on every architecture.
#pragma once

namespace smcr {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  // No such hint: at least the watched memory is read again each time.
  asm volatile("" ::: "memory");
#endif
}

}  // namespace smcr
