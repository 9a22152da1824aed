// Process-wide facts the engine's parts share, with no dependency on any of
// them (a fabric, the link group and a connection all ask "is this still
// the process that made me?").
#pragma once

#include <cstdint>

namespace smcr {

// Increases in a forked child (pthread_atfork): "is this the process that
// made it?" without a getpid() system call on the data path. Never 0, so a
// stored 0 can mean "not made yet".
uint64_t process_generation();

// This process's id, asked of the kernel once per process generation.
int current_pid();

}  // namespace smcr
