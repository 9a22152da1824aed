// Which process holds the other end of an AF_UNIX socket, when a connection
// is sent over it (SCM_RIGHTS): the sender hands an SMC-R connection to the
// receiver to take over (core/exec_carry.h, "take") only when the receiver
// will ask for it, i.e. runs the shim; otherwise the connection is relayed,
// since a receiver without the shim would read the readiness socket as data.
// The receiver asks the process it finds the same way.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace smcr::preload::unix_peer {

// The inode of the socket connected to `fd` (sock_diag, UNIX_DIAG_PEER), or 0.
uint64_t peer_inode(int fd);

// The process at the other end of `fd`, an AF_UNIX socket a connection is
// sent over or received on: the one holding the socket connected to it,
// looked for among the process SO_PEERCRED names (the listener of a named
// socket, the maker of a socket pair), this process's parent and its
// children (the workers of Node's cluster and of CPython's multiprocessing),
// never this process itself; 0 when none of them holds it or the one that
// does has not loaded this shim. Unrelated processes reached only through a
// socket pair made by a third are not looked for: a search of every
// process would cost more than the relay it saves.
pid_t shim_process_at_other_end(int fd);

}  // namespace smcr::preload::unix_peer
