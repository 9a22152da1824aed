// Carrying an SMC-R connection across exec (inetd-style servers that dup an
// accepted connection onto 0 and 1 and exec a program, sshd re-executing
// itself per connection): the new program owns the connection, with no
// relay through another process, and the process that accepted it may exit.
//
// A connection can be carried when it is the only one on its link (a forked
// child's re-homed connection, core/handoff.h) on the shared-memory fabric,
// and both RMBs' memfds are still open (kept from the handshake until the
// first data call of a process that has not forked since, core/
// connection.h). Before the exec, with the engine paused and the connection
// held, its protocol state and the numbers of inheritable duplicates of its
// descriptors (link, TCP socket, readiness pair, the peer's bell, the two
// memfds) go into a memfd named by SMCR_EXEC_SMC; the new program's shim
// maps the RMBs again, rebuilds the link group and the connection, and
// installs it at the application's numbers before main() runs. What the
// peer sent meanwhile waits in the link socket and the shared control page.
// Anything else (another fabric, a shared link, no memfds) keeps the
// earlier behaviour: an inherited connection is relayed by its owner.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/clc.h"
#include "core/handoff.h"
#include "core/link_group.h"

namespace smcr::exec_carry {

inline constexpr char kVariable[] = "SMCR_EXEC_SMC";
inline constexpr uint32_t kMagic = 0x534d4358;  // "SMCX"
inline constexpr int kMaxAppFds = 16;

// One connection, as the process before the exec wrote it for the one after
// (the same shim binary: the layout is checked by size and magic).
struct Record {
  uint32_t magic = kMagic;
  uint32_t bytes = sizeof(Record);
  // The link group (one connection, one link).
  uint8_t role = 0;  // Role
  clc::PeerId peer{};
  uint8_t link_num = 0;
  LinkIdentity local, remote;
  // The RMBs: ours (RMBE index 1) and the peer's, with their RTokens.
  uint32_t rmb_size = 0, rmb_rkey = 0;
  uint64_t rmb_vaddr = 0;
  uint32_t peer_size = 0, peer_rkey = 0;
  uint64_t peer_vaddr = 0;
  uint32_t rmbe_base = 4;
  uint32_t local_token = 0, peer_token = 0;
  uint8_t active = 0, linger_abort = 0;
  // Descriptor numbers in the new program (inheritable duplicates).
  int32_t link_fd = -1, tcp_fd = -1, app_end = -1, engine_end = -1, peer_bell_fd = -1, memfd = -1,
          peer_memfd = -1;
  // The application's numbers for it (dup2 onto 0 and 1: two).
  int32_t app_fds[kMaxAppFds];
  uint32_t n_app_fds = 0;
  alignas(8) unsigned char snapshot[handoff::kSnapshotBytes];
};

// The memfd: this header, `count` records, then the counters' text.
struct Header {
  uint32_t magic = kMagic;
  uint32_t record_bytes = sizeof(Record);
  uint32_t count = 0;
  uint32_t counters_bytes = 0;
};

// A program started without a fork the shim sees (posix_spawn, system(),
// popen(), a vfork child's exec) takes a connection over the same way, but
// asks for it itself: SMCR_EXEC_TAKE=<pid>:<inode>,... names the process
// that owns the connections and their application sockets' inodes. The
// new program's shim asks that process's engine (diagnostics socket,
// "take <inode>"); once the owner has closed its own descriptors the
// connection is offered, and the answer is the record and its descriptors
// (kReplyRecord), then, after the peer moved the connection to the new
// link, kVerdictMoved (or kVerdictRelay: the owner relays it instead). An
// owner that still holds it answers kReplyWait; after a while the program
// asks "relay <inode>" and gets kReplyTcp with the TCP socket of the relay
// the owner starts.
inline constexpr char kTakeVariable[] = "SMCR_EXEC_TAKE";
// A program exec'd by a forked child, whose parent still held the
// connection at the exec (git's run-command and CPython's fork path wait
// for the exec before they close their copy; a program that never uses an
// inherited descriptor): SMCR_EXEC_PENDING=<pid>:<inode>,...[;<pid>:...]
// names the owners and the inodes, and the program asks for each ("take",
// as above) on the first call that uses one of its numbers, not before.
inline constexpr char kPendingVariable[] = "SMCR_EXEC_PENDING";
inline constexpr char kReplyRecord = 'c';
inline constexpr char kReplyWait = 'w';
inline constexpr char kReplyTcp = 't';
inline constexpr char kReplyNone = '-';
inline constexpr char kVerdictMoved = 'M';
inline constexpr char kVerdictRelay = 'V';

// The record's descriptors, in the order they travel.
inline std::array<int32_t*, 7> descriptors(Record* r) {
  return {&r->link_fd, &r->tcp_fd, &r->app_end, &r->engine_end, &r->peer_bell_fd, &r->memfd, &r->peer_memfd};
}
// kReplyRecord, the record and its descriptors (those >= 0) on `sock`.
bool send_record(int sock, const Record& r);
// After a kReplyRecord byte was read from `sock` (with the descriptors that
// came with it: `fds`, `count`, owned from now on): the record, its
// descriptors in its fields (-1 where none was sent). False (all closed)
// on a short or malformed record.
bool receive_record(int sock, Record* r, int timeout_ms, const int* fds, size_t count);

}  // namespace smcr::exec_carry
