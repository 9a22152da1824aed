// Which process holds the other end of an AF_UNIX socket, when a connection
// is sent over it (SCM_RIGHTS): the sender hands an SMC-R connection to the
// receiver to take over (core/exec_carry.h, "take") only when the receiver
// will ask for it, i.e. runs the shim; otherwise the connection is relayed,
// since a receiver without the shim would read the readiness socket as data.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace smcr::preload::unix_peer {

// The inode of the socket connected to `fd` (sock_diag, UNIX_DIAG_PEER), or 0.
uint64_t peer_inode(int fd);

// A child of this process (the workers of Node's cluster and of CPython's
// multiprocessing are) that holds the socket with inode `ino` and has this
// shim loaded, or 0 when there is none. Only children are looked at: a
// search of every process would cost more than the relay it saves.
pid_t shim_child_holding(uint64_t ino);

// The process holding the other end of `fd` among this process's children
// with the shim, or 0 (shim_child_holding(peer_inode(fd))).
pid_t shim_child_at_other_end(int fd);

}  // namespace smcr::preload::unix_peer
