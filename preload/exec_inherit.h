// Handed-over connections inherited across exec (sshd re-executing itself
// per connection, inetd-style servers): the new program holds the stream
// its parent's relay serves (core/handoff.h), an AF_UNIX socket. Its
// addresses, socket options and SO_DOMAIN/SO_PROTOCOL must still be the TCP
// connection's in every process that holds the descriptor (sshd logs and
// authorizes by getpeername; Python's socket(fileno=) asks SO_DOMAIN). So
// before an exec the TCP socket of each such descriptor that survives it
// survives too, and SMCR_EXEC_TCP=fd:tcp,... names the pairs; the new
// program's shim adopts them when it loads.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <cstddef>
#include <string>
#include <vector>

namespace smcr {
class Connection;
}

namespace smcr::preload::exec_inherit {

// At load, before main(): adopts the pairs SMCR_EXEC_TCP names (each checked:
// an AF_UNIX stream and a TCP socket) and removes the variable, so that a
// later exec without them does not pass stale numbers on.
void adopt_from_environment();

// `fd` is a plain stream standing for the TCP connection of `tcp` (a hidden
// descriptor, owned from now on): answered as the adopted ones are.
void adopt_pair(int fd, int tcp);

// This process's connections with at least one number for which
// want(fd, c) holds, each with all its numbers in the fd table, referenced
// once.
std::vector<std::pair<Connection*, std::vector<int>>> connections_where(
    const std::function<bool(int fd, Connection* c)>& want);

// Relays `c` in place (core/handoff.h relay_in_place): its numbers `fds` in
// this process (the first one drained to the relay's marker) become plain
// streams the relay serves, for this process and any other holding them,
// and are adopted with a duplicate of its TCP socket. Consumes one reference
// to `c`; the fd table's reference of fds[0] goes to the relay. False (and
// nothing changed) when it cannot be relayed.
bool relay_numbers(Connection* c, const std::vector<int>& fds);

// Before a program starts from this process in a way the shim never sees
// fork (posix_spawn, system(), popen(): glibc's own clone and exec): the
// connections of this process it would inherit (a number without
// FD_CLOEXEC; a forked child's copy is claimed from its owner first). If
// the program loads the shim (`program_takes`) each that can be is left
// for it to take over (core/exec_carry.h: it asks for it as it starts, and
// gets it once this process has closed its own numbers), named in
// *take_variable; the others are relayed (relay_numbers), so that it reads
// and writes the peer's bytes, as it would a TCP socket's. Returns how many.
// `dup_sources`: numbers posix_spawn's file actions duplicate into the
// program, close-on-exec or not.
// Connections our parent still holds that the program will take on first
// use (SMCR_EXEC_PENDING) are appended to *pending instead.
int relay_for_spawn(bool program_takes, std::string* take_variable,
                    std::vector<std::pair<pid_t, uint64_t>>* pending, const std::vector<int>& dup_sources);
// Whether `c` (at `fd`) is our parent's connection that it still holds,
// which a program we start takes on its first use: *pending gets (owner,
// inode of the socket).
bool held_by_parent(Connection* c, int fd, std::pair<pid_t, uint64_t>* pending);
// SMCR_EXEC_TAKE=<owner>:<inode>,...
std::string take_variable_for(pid_t owner, const std::vector<uint64_t>& inodes);
// At load, before main(): takes over the connections SMCR_EXEC_TAKE names
// (each inherited descriptor whose socket has one of the inodes), asking
// the process that owns them; removes the variable.
void take_from_environment();

// Before descriptors leave for another process over SCM_RIGHTS (a server
// handing accepted connections to its workers: Node's cluster, CPython's
// multiprocessing) on the socket `via`: if the process at its other end is
// a child of ours with the shim, the connections among `fds` that can be
// are left for it to take over as it receives them (core/exec_carry.h,
// "take"); the others are relayed the same way as a spawned program's, so
// that the receiver reads and writes the peer's bytes. A relay is this
// process's: the receiver's stream ends if this process exits first.
// Returns how many were left to take over.
int relay_passed(const int* fds, size_t n, int via);
// `fd` arrived over SCM_RIGHTS on `via`: if the sending process takes it
// (relay_passed) the connection becomes this process's; if it relays it,
// its engine gives its TCP socket, which answers for it here from then on
// (adopt_pair).
void adopt_received(int via, int fd);

// In a vfork() child about to exec (CPython's subprocess): it shares this
// process's memory but not its descriptors or threads, and the connections
// it keeps (its descriptors without FD_CLOEXEC that are one of theirs, by
// socket inode) are handled by the parent's engine thread as
// relay_for_spawn would (left for the program to take, named in
// *take_variable with the parent as their owner, or relayed). Appends
// (number, TCP socket) for each relayed one to `pairs`: the TCP sockets,
// received from the parent's engine, are the child's, for the new
// program's environment (environment_for_exec).
void relay_for_vfork_exec(std::vector<std::pair<int, int>>* pairs, bool program_takes, std::string* take_variable);

// The numbers SMCR_EXEC_PENDING names (core/exec_carry.h) become
// kFdTakePending, from the library's constructor.
void pending_from_environment();
// The first call that uses a kFdTakePending number: its connection is asked
// for (waiting while its owner still holds it, up to a bound) and taken
// over, or relayed by the owner; else the number reads end-of-file. Every
// number of the same socket settles with it.
void settle_pending(int fd);
// SMCR_EXEC_PENDING=... naming (owner, inode) pairs, or empty.
std::string pending_variable_for(std::vector<std::pair<pid_t, uint64_t>> pending);
// The kFdTakePending numbers that survive an exec, or that posix_spawn's
// file actions duplicate into the program (`dup_sources`): (owner, inode).
void surviving_pending(std::vector<std::pair<pid_t, uint64_t>>* pending, const std::vector<int>& dup_sources = {});

// The TCP socket behind an adopted descriptor, or -1.
int tcp_fd(int fd);
// The number was closed or replaced (close, dup2 over it).
void forget(int fd);
// `to` now refers to what `from` does (dup, dup2, dup3, F_DUPFD).
void duplicated(int from, int to);

// An exec about to happen: `envp` with SMCR_EXEC_TCP naming `pairs` (the
// application's descriptor, its TCP socket), the TCP sockets duplicated so
// that they survive the exec, and storage->carry_variable if set.
// `storage` keeps what the result points to.
struct ExecEnvironment {
  std::vector<char*> envp;
  std::string variable;
  std::vector<int> inheritable;  // closed again if the exec fails
  // Connections carried across the exec (preload/exec_carry.h): held, the
  // engine paused, and the memfd that describes them, named by
  // carry_variable (empty: none).
  std::vector<Connection*> carried;
  bool engine_paused = false;
  int carry_memfd = -1;
  std::string carry_variable;
  // SMCR_EXEC_TAKE=... for the new program (empty: none).
  std::string take_variable;
  // SMCR_EXEC_PENDING=... for the new program (empty: none).
  std::string pending_variable;
};
char* const* environment_for_exec(char* const envp[], const std::vector<std::pair<int, int>>& pairs,
                                  ExecEnvironment* storage);
void exec_failed(ExecEnvironment* storage);
// The adopted descriptors of this process that survive an exec, with their
// TCP sockets (to pass them on again).
void surviving(std::vector<std::pair<int, int>>* pairs);

}  // namespace smcr::preload::exec_inherit
