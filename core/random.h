// Kernel randomness for the values an SMC-R peer or another local process
// must not guess: the shm rendezvous secret (RKey, VA, QPN), alert tokens,
// PSNs. There is no fallback: a value derived from the clock or the pid is
// one an attacker on this host can compute, so a caller that gets false
// refuses whatever needed the value (the handshake declines to TCP).
#pragma once

#include <cstddef>
#include <cstdint>

namespace smcr {

// Fills buf[0..len) from getrandom(2) (blocking until the pool is
// initialised, as at boot), through EINTR and short reads. False, with
// nothing usable in buf, when the kernel will not give them (ENOSYS under
// a seccomp policy, an old kernel); the first failure in the process is
// logged whatever the log level. No allocation, no lock.
bool random_bytes(void* buf, size_t len);

}  // namespace smcr
