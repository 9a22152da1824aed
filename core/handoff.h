// Handing an SMC-R connection to a forked child (accept-then-fork servers:
// Python's ForkingMixIn, inetd-style exec, sshd, PostgreSQL).
//
// A connection's state and the engine live in the process that made it, and
// a child cannot drive its link (a verbs QP is not usable after fork). So
// when that process closes its last descriptor while a child still holds the
// application's socket -- which is when a TCP socket's file would live on in
// the child -- the connection is not closed: it becomes a relayed one. The
// readiness socket the child holds turns into a plain byte stream, and a
// relay thread in the parent moves bytes between it and the connection in
// both directions, with the connection's own flow control, EOF and close
// rules. The child's shim sees that in a word of memory shared across fork
// and from then on treats the descriptor as an ordinary socket.
//
// Decided and documented in docs/ARCHITECTURE.md ("fork").
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>

namespace smcr {

class Connection;

namespace handoff {

enum State : uint32_t {
  kNone = 0,
  kOwned = 1,   // the process that made the connection uses it
  kRelay = 2,   // handed over: the descriptor is a byte stream to its relay
  kGone = 3,    // the connection ended in its owner without a handover
};

// A word shared with every child forked from now on, or null when none is
// left (the connection then cannot be handed over). Only the process that
// allocated it frees it.
std::atomic<uint32_t>* alloc_state();
void free_state(std::atomic<uint32_t>* s);
// Stores and wakes every process waiting for the word to change.
void publish(std::atomic<uint32_t>* s, State v);
// In a child: waits up to timeout_ms while the owner still holds the
// connection; returns the state then.
State wait_while_owned(std::atomic<uint32_t>* s, int timeout_ms);

// Forks this process has made (counted in the parent): a connection that
// existed across one may have a child holding its descriptor.
uint64_t forks_made();

// Starts the relay thread between `child_fd` (our end of the stream the child
// holds) and `c`, whose readiness socket (app end) `own_fd` the thread waits
// on. It takes over one reference to `c`, and ends with c->app_close().
// `also_held` are the connection's other descriptors (-1: none): with
// child_fd and own_fd they are closed in every child forked while the relay
// runs, which could never use them.
bool start_relay(Connection* c, int child_fd, int own_fd, std::initializer_list<int> also_held);

}  // namespace handoff
}  // namespace smcr
