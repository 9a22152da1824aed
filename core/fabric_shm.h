// The shared-memory fabric: SMC-R between processes on this host, in the
// spirit of the kernel's SMC-D loopback but speaking SMC-R's CLC/LLC/CDC.
//
// - RMB: a sealed memfd (size fixed by F_SEAL_SHRINK|GROW so a peer cannot
//   SIGBUS us), mapped shared; the peer maps it writable after receiving the
//   fd. Nothing is named in a filesystem, so no other user can open it.
// - Link ("QP pair"): a SOCK_SEQPACKET Unix connection between the two
//   processes. It carries 44-byte CDC/LLC messages, orders them after the
//   memcpy "RDMA writes", and hangs up when the peer process dies.
// - Rendezvous: the server's GID encodes an abstract Unix address. The client
//   connects after the Accept and proves it saw that Accept (QPN, RKey and a
//   random 64-bit VA: 120 secret bits) before the server hands over its RMB.
#pragma once

#include <atomic>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "core/clc.h"
#include "core/fabric.h"
#include "core/mutex.h"

namespace smcr {

struct ShmIdentity {
  clc::Gid gid{};      // fd 53 4d 48 | host key (4) | pid (4) | random (4)
  clc::Mac mac{};      // locally administered, derived from the host key
  clc::PeerId peer_id{};
  uint32_t host_key = 0;  // boot id + network namespace: same key = same abstract socket namespace
  bool ok = false;        // false: no randomness for it; nothing above may be used but host_key
};
// This process's identity; recomputed in a forked child (pid differs).
const ShmIdentity& shm_identity();
// True if `gid` names a shared-memory endpoint reachable from this process.
bool shm_gid_is_local(const clc::Gid& gid);

// Shared memory a peer may map: a memfd (hidden, close-on-exec) of `bytes`,
// sealed against shrinking and growing (a peer that mapped it cannot be
// made to SIGBUS), mapped shared. False on failure, nothing left open.
bool shm_make_sealed(const char* name, size_t bytes, int* fd, uint8_t** addr);

// False also when no random RKey and VA can be had (they are the rendezvous
// secret).
bool shm_alloc_rmb(uint32_t size, LocalRmb* out);
void shm_free_rmb(LocalRmb* rmb);
// Maps a peer's RMB memfd after checking its seals and size; takes ownership
// of memfd: closed, or with `keep` moved to *keep (an exec may pass it on,
// core/exec_handover.h).
bool shm_map_remote(int memfd, uint32_t size, RemoteRmb* out, int* keep = nullptr);
void shm_unmap_remote(RemoteRmb* rmb);
// Maps our own RMB again from its memfd (an exec'd program taking over a
// connection, core/exec_carry.h); the memfd stays the caller's.
bool shm_map_own(int memfd, uint32_t size, LocalRmb* out);

class ShmLink final : public Link {
 public:
  explicit ShmLink(int fd) : fd_(fd) {}
  ~ShmLink() override;
  bool write_remote(const RemoteRmb& rmb, uint32_t offset, const void* src, size_t len) override;
  bool post_message(std::span<const uint8_t, kLinkMessageLen> msg) override;
  bool post_message_with_fd(std::span<const uint8_t, kLinkMessageLen> msg, int fd) override;
  int take_attached_fd() override {
    int fd = attached_fd_;
    attached_fd_ = -1;
    return fd;
  }
  int notify_fd() const override { return fd_; }
  int peer_pid() const override;
  bool drain_messages(const std::function<void(std::span<const uint8_t>)>& on_message) override;
  bool wait_message(uint8_t (&out)[kLinkMessageLen], int timeout_ms) override;
  const char* fabric_name() const override { return "shm"; }
  bool failed() const override { return failed_; }
  std::string describe() const override;
  bool alloc_rmb(uint32_t size, LocalRmb* out) override { return shm_alloc_rmb(size, out); }
  void free_local_rmb(LocalRmb* rmb) override { shm_free_rmb(rmb); }
  void release_remote_rmb(RemoteRmb* rmb) override { shm_unmap_remote(rmb); }
  // One mapping serves every link (the handshake never builds a second shm
  // link, one endpoint per process; unit tests do, to exercise failover).
  bool register_alias(const LocalRmb& memory, LocalRmb* out) override;
  void take_down() override;

 private:
  int fd_;
  std::atomic<bool> failed_{false};
  int attached_fd_ = -1;  // came with the message being delivered
  mutable std::atomic<int> peer_pid_{0};  // 0: not asked yet
};

// What a client presents on the rendezvous socket, and the server's answer.
struct ShmHello {
  uint32_t server_qpn = 0;
  uint32_t server_rkey = 0;
  uint64_t server_vaddr = 0;
  uint32_t client_qpn = 0;
  uint32_t client_rkey = 0;
  uint64_t client_vaddr = 0;
  uint32_t client_rmb_size = 0;
};

// Client side: connects to the server named by `server_gid`, sends the hello
// with our RMB fd, and receives the server's RMB fd. Returns the link or null.
std::unique_ptr<ShmLink> shm_connect(const clc::Gid& server_gid, const ShmHello& hello, int client_rmb_fd,
                                     int64_t deadline_ms, int* server_rmb_fd);

// Server side: the rendezvous listener and the table of Accepts awaiting their client.
class ShmRendezvous {
 public:
  struct Pending {
    uint32_t rkey = 0;
    uint64_t vaddr = 0;
    int rmb_fd = -1;  // ours, not owned
    bool arrived = false;
    int link_fd = -1;
    int client_rmb_fd = -1;
    ShmHello hello;
  };
  static ShmRendezvous& instance();
  // Binds the abstract listener (idempotent); returns its fd or -1.
  int listener_fd();
  // Registers an Accept about to be sent; returns the QPN to put into it,
  // or 0 (nothing registered) when no random one can be had.
  uint32_t expect(uint32_t rkey, uint64_t vaddr, int rmb_fd);
  // Waits for the client's hello; on success moves the link fd and the
  // client's RMB fd out. Always removes the entry.
  bool wait_arrival(uint32_t qpn, int64_t deadline_ms, Pending* out);
  // Engine thread: accept pending connections / process a hello.
  void on_listener_readable(const std::function<void(int)>& watch_fd);
  // Returns true when the fd has been consumed (answered or closed).
  bool on_hello_readable(int fd);

 private:
  Mutex mu_;
  std::condition_variable cv_;
  int listen_fd_ SMCR_GUARDED_BY(mu_) = -1;
  uint64_t owner_generation_ SMCR_GUARDED_BY(mu_) = 0;  // process_generation() of the process that bound it (0: none)
  std::map<uint32_t, Pending> pending_ SMCR_GUARDED_BY(mu_);
};

}  // namespace smcr
