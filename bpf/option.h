// Userspace side of the SMC-R TCP option sockops program (bpf/smcr_option.bpf.c):
// opt a socket in, and read back whether its handshake carried the option both
// ways. Safe to call from an LD_PRELOAD interposer: uses only raw syscalls
// (bpf, newfstatat, close of its own map fds), no libc socket calls, no malloc;
// map fds are opened once and cached (thread-safe, re-opened when the pins are
// replaced, i.e. the program was reloaded, or when the fd was closed under us).
//
// Pins: $SMCR_BPF_PIN_DIR (default /sys/fs/bpf/smcr)/{optin,result}, created by
// `smcr_ctl load`. optin is 0666 (any user may opt in its own sockets: the key is
// the caller's own socket fd), result is 0444 and opened with BPF_F_RDONLY.
#pragma once

#include <cstdint>

namespace smcr::bpfopt {

enum class Result {
  kNotLoaded,   // program not loaded (pins absent / not openable)
  kNotOptedIn,  // no record for this socket (not opted in, not covered, or
                // created before its process joined the attached cgroup)
  kSmcBoth,     // both the SYN and the SYN-ACK carried the SMC-R option
  kNotBoth,     // opted in, but not both (or handshake not completed yet)
  kError,       // anything else (errno set), e.g. not a socket
  kUndecided,   // read_accepted_result: opted in, but the record did not
                // complete in time
};

// Marks a TCP socket as wanting SMC-R: call before connect() (client) or
// before listen() (server listener; the listener's TCP_LISTEN_CB is where the
// program enables TCP_SAVE_SYN and registers it, so opting in after listen()
// has no effect on that listener). Returns false if the program is not loaded
// (errno ENOENT) or the write failed (errno from bpf(2), e.g. EACCES).
bool opt_in(int sockfd);

// Where the map descriptors this module opens and keeps go: `place` takes
// a descriptor and returns the one to keep (the shim moves its own out of
// the numbers the application gets, sys::hide_fd), and `forget` is told of
// each one this module closes (sys::forget_own_fd). Default: where opened.
void set_fd_placer(int (*place)(int fd), void (*forget)(int fd) = nullptr);

// After the TCP handshake completed on sockfd (connected or accepted socket):
// whether both the SYN and the SYN-ACK carried the option.
Result read_result(int sockfd);
// The same for a socket just returned by accept() on `listener_fd`: the
// kernel queues the child for accept() before it has processed the
// handshake's last ACK on it (where the program records the result), and
// another CPU may accept it in between. Waits up to `timeout_ms` for the
// child's record to be complete (kUndecided if it is not); when the child has
// no record and the listener is not registered with the program (opted in
// after listen(), or the program was reloaded since), answers kNotOptedIn at
// once: no record will come.
Result read_accepted_result(int listener_fd, int sockfd, int timeout_ms);

// Which accepted children can have offered SMC-R, without a bpf(2) call
// (the program's per-port count of SYN-ACKs that carried the option, mapped
// read-only: SMCR_PIN_OFFERS). offer_slot: after opt_in, a handle for the
// listener's port in the load that registers it (0: none, e.g. a program
// without the map, or port 0). offers_counted: the port's count now (0 for
// handle 0). The port's count may already hold earlier listeners' SYN-ACKs
// (another process, or a server restarted on its port), so a listener takes
// offers_counted as its baseline before its own SYN-ACKs can be counted, and
// adds one per accepted child that had the option. offers_pending(slot,
// matched): false when the count equals that sum, so that the child just
// accepted did not offer SMC-R; true otherwise, and for handle 0. Counts of
// other live listeners on the port only make it true more often. Wait-free;
// no system call.
std::uint32_t offer_slot(std::uint16_t port);
std::uint64_t offers_counted(std::uint32_t slot);
bool offers_pending(std::uint32_t slot, std::uint64_t matched);

// The raw per-socket record (SMCR_R_* bits of bpf/smcr_abi.h, mirrored below).
// Returns false with errno (ENOENT: no record or not loaded).
bool read_flags(int sockfd, std::uint32_t* flags);

// Pins present and openable.
bool loaded();

const char* to_string(Result r);

// Bits of read_flags(); identical to SMCR_R_* in bpf/smcr_abi.h.
inline constexpr std::uint32_t kWeSentSynOpt = 0x01;
inline constexpr std::uint32_t kPeerSynAckHadOpt = 0x02;
inline constexpr std::uint32_t kPeerSynHadOpt = 0x04;
inline constexpr std::uint32_t kWeSentSynAckOpt = 0x08;
inline constexpr std::uint32_t kSmcOk = 0x10;
inline constexpr std::uint32_t kActive = 0x20;
inline constexpr std::uint32_t kPassive = 0x40;
inline constexpr std::uint32_t kDone = 0x80;
inline constexpr std::uint32_t kListener = 0x100;
inline constexpr std::uint32_t kSynAckFailed = 0x200;

}  // namespace smcr::bpfopt
