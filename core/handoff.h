// Handing an SMC-R connection to a forked child (accept-then-fork servers:
// Python's ForkingMixIn, inetd-style exec, sshd, PostgreSQL).
//
// A connection's state and the engine live in the process that made it. When
// that process closes its last descriptor while a child still holds the
// application's socket -- which is when a TCP socket's file would live on in
// the child -- the connection is not closed: it is offered to the holders.
// The first holder's use claims it:
//
// - Re-homing (shared-memory fabric): the child owns it from then on. The
//   owner asks the peer, over their link, to move the connection to a new
//   link (a SEQPACKET pair: one end goes to the peer with the request, the
//   other to the child); once the peer has answered, the owner writes the
//   connection's state into memory shared with the child, sends the child
//   its link end on the readiness socket, and forgets the connection. The
//   child's engine drives it as its own: its I/O goes to the fabric with no
//   process in between, and the parent may exit.
// - Relaying (a child about to exec, whose new program cannot map the RMBs;
//   a verbs link, whose QP a child cannot use; a peer that refuses): the
//   readiness socket the child holds turns into a plain byte stream, and a
//   thread in the parent moves bytes between it and the connection in both
//   directions, with the connection's own flow control, EOF and close rules.
//
// The child's shim sees which in a word of memory shared across fork.
// Decided and documented in docs/ARCHITECTURE.md ("fork").
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include <sys/types.h>

namespace smcr {

class Connection;

namespace handoff {

enum State : uint32_t {
  kNone = 0,
  kOwned = 1,        // the process that made the connection uses it
  kRelay = 2,        // relayed: the child's stream starts after the marker (drain_to_marker)
  kGone = 3,         // the connection ended in its owner without a handover
  kOffered = 4,      // the owner closed its descriptors; a holder's first use claims it
  kClaimDirect = 5,  // a holder claimed it to own it (re-homing)
  kClaimExec = 6,    // a holder about to exec claimed it (relaying)
  kRehomed = 7,      // the peer moved it to the new owner's link; the state is in the snapshot
  kAdopting = 8,     // a holder is taking the re-homed connection
  kAdopted = 9,      // taken: it belongs to that holder
  kRelayDraining = 10,  // a holder is draining the stream up to the marker
  kRelayReady = 11,     // the stream is the peer's bytes only
  kClaimRemote = 12,    // a program spawned from here asked for it (Connection::pass_to_claimant)
};

// A word shared with every child forked from now on, or null when none is
// left (the connection then cannot be handed over). Only the process that
// allocated it frees it.
std::atomic<uint32_t>* alloc_state();
void free_state(std::atomic<uint32_t>* s);
// A word the owner gave up (re-homed): freed once a holder has taken it, or
// never (a holder may still wait on it).
void retire_state(std::atomic<uint32_t>* s);
// Room next to the word for the connection's state (re-homing).
inline constexpr size_t kSnapshotBytes = 500;
void* snapshot_area(std::atomic<uint32_t>* s);
// Stores and wakes every process waiting for the word to change.
void publish(std::atomic<uint32_t>* s, State v);
// Compare-and-swap, waking waiters on success.
bool transition(std::atomic<uint32_t>* s, State from, State to);
// Waits up to timeout_ms while the word holds one of `states`; returns it then.
State wait_while(std::atomic<uint32_t>* s, std::initializer_list<State> states, int timeout_ms);

// The readiness socket's marker: one byte carrying descriptors (SCM_RIGHTS).
// An AF_UNIX stream receive stops after the bytes that carry descriptors,
// so a holder that reads up to the marker has read exactly the readiness
// bytes before it (never data), and gets the descriptors. The byte says
// which: a re-homed connection's link end and the peer's bell come before
// the owner asks the peer to move it (a holder whose owner then dies still
// has them); a relay's stream starts after its own marker, which may come
// after a re-homing marker the peer's refusal made void.
inline constexpr char kRehomeMarker = 'H';
inline constexpr char kRelayMarker = 'R';
bool send_marker(int engine_end, std::span<const int> fds, char kind);
// Reads `app_end` up to and including the marker of `kind` (waiting up to
// timeout_ms), closing the descriptors of other markers on the way; returns
// how many descriptors came with it (at most fds.size(), the rest closed),
// or -1.
int drain_to_marker(int app_end, std::span<int> fds, int timeout_ms, char kind);

// Whether the process that owns the word (allocated it) has ended: killed,
// or a zombie. A holder that claimed the connection stops waiting for it.
bool owner_gone(std::atomic<uint32_t>* s);

// A forked holder whose claim its owner does not answer, because it still
// holds the connection (rsync's client: the parent writes while its forked
// receiver reads), asks the owner's engine to relay it ("relay <inode of
// app_end>", with that socket as proof, as a spawned program asks:
// core/exec_carry.h). The owner does when none of its threads waits inside
// a call on it; the word then moves to kRelay. True when it answered so.
bool ask_owner_to_relay(std::atomic<uint32_t>* s, int app_end);

// The link message asking the peer to move a connection to the link whose
// end comes with it (SCM_RIGHTS), and the peer's answer on the old link:
// LLC's optional type range (RFC 7609 4.3.1), like the bell message.
inline constexpr uint8_t kRehomeMessageType = 0xBF;
struct Rehome {
  uint32_t receiver_token = 0;  // the connection's alert token at the receiver
  uint32_t sender_token = 0;    // and at the sender
  bool reply = false;
  bool negative = false;
};
std::array<uint8_t, 44> encode_rehome(const Rehome& r);
std::optional<Rehome> decode_rehome(std::span<const uint8_t> msg);

// Forks this process has made (counted in the parent): a connection that
// existed across one may have a child holding its descriptor.
uint64_t forks_made();

// Starts the thread that waits for a holder's claim of the offered `c` and
// then re-homes or relays it. It takes over the fd table's reference to
// `c`, and ends with c->app_close() unless the connection was re-homed.
// `held` are the connection's descriptors: they are closed in every child
// forked while the thread runs, which could never use them.
// `app_ino`: the inode of the application's socket the holders have (0:
// unknown), by which a program exec'd by a forked child asks for it
// (offered_connection).
bool start_handover(Connection* c, std::initializer_list<int> held, uint64_t app_ino = 0);
// The connection offered (or being moved) whose holders' application socket
// is inode `ino`, referenced, or null.
Connection* offered_connection(uint64_t ino);
// The pid of the process that allocated the word (the connection's owner),
// or 0.
pid_t owner_pid(std::atomic<uint32_t>* s);
// A connection (Connection::relay_here) relayed from now on by a
// thread of this process, while the application keeps its descriptors:
// they are the relay's stream after the relay marker, which the caller
// drains (drain_to_marker) before anything else reads them.
bool relay_in_place(Connection* c);
// At process exit: offers nobody has claimed yet are re-homed (a relay
// could not outlive the process), waiting up to timeout_ms.
void finish_offers_at_exit(int timeout_ms);
// _exit(): re-homes the offers to forked children as exit() does (at most
// 1 s), and waits (at most finish_offers_at_exit's longer bound) while a
// connection passed to another process (a spawned program, the receiver
// of an SCM_RIGHTS message) has yet to be claimed: either would die with
// us, where a TCP socket in flight lives on. Takes no lock and allocates
// nothing (_exit may be called from a signal handler).
void await_passed_offers_at_exit();

}  // namespace handoff
}  // namespace smcr
