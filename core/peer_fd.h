// A descriptor of a peer process on this host, fetched with pidfd_getfd
// (Linux 5.6): the shm fabric's way to learn a connection's readiness socket
// (its "bell") without a link message that both processes' engine threads
// must wake up for (core/cdc_mem.h, BellRecord).
//
// The kernel allows it where ptrace would be (PTRACE_MODE_ATTACH_REALCREDS:
// the same user and a dumpable target, or CAP_SYS_PTRACE; Yama's
// ptrace_scope and seccomp policies may refuse it). A refusal is not an
// error: the caller goes on as without it (the bell rides a link CDC).
#pragma once

#include <cstdint>

namespace smcr::peer_fd {

// Whether fetching is on (SMCR_FETCH_BELL, default 1) and has not been
// found unsupported (ENOSYS) in this process.
bool enabled();

// A close-on-exec duplicate of descriptor `fd` of process `pid`, in the
// hidden range (sys::hide_fd), if it is a socket whose inode is `ino`; -1
// otherwise (the process gone or not ours to look into, the number closed
// or reused since). `dev`, if given, gets the socket's device number.
int fetch_socket(int pid, int fd, uint64_t ino, uint64_t* dev = nullptr);

}  // namespace smcr::peer_fd
