// The fabric: what SMC-R needs from the transport underneath it, shaped after
// RDMA verbs so that the shared-memory fabric (this host only, the userspace
// twin of the kernel's SMC-D loopback) and the verbs fabric (RoCE / rxe) are
// interchangeable below the same CLC, LLC and CDC code.
//
//   register a buffer      -> LocalRmb (local memory + the RToken the peer uses)
//   write into the peer    -> Link::write_remote (RDMA WRITE at rkey/vaddr+offset)
//   post a 44-byte message -> Link::post_message (SEND; ordered after earlier writes)
//   completions/receives   -> Link::drain_messages, driven by Link::notify_fd()
#pragma once

#include <cstddef>
#include <cstdint>
#include <array>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace smcr {

inline constexpr size_t kLinkMessageLen = 44;
// Links per link group: a primary and one for failover (RFC 2.3: two is
// enough for redundancy; Linux also announces 2).
inline constexpr int kMaxGroupLinks = 2;

// A registered receive buffer (RMB) owned by this side; one RMBE at index 1.
struct LocalRmb {
  uint8_t* addr = nullptr;
  uint32_t size = 0;
  uint32_t rkey = 0;
  uint64_t vaddr = 0;
  int handle = -1;  // fabric-specific (shm: sealed memfd)
  bool alias = false;  // a registration of memory another link owns (register_alias)
  // shm: the control page after the RMB where the peer writes its CDCs
  // (core/cdc_mem.h); null on fabrics that carry CDCs as messages only.
  uint8_t* control = nullptr;
};

// The peer's RMB as named by its RToken; `addr` is set where the fabric maps
// it into our address space (shm), null where writes go through the NIC.
struct RemoteRmb {
  uint32_t rkey = 0;
  uint64_t vaddr = 0;
  uint32_t size = 0;
  uint8_t* addr = nullptr;
  bool alias = false;  // shares `addr` with the RToken of another link: not unmapped
  uint8_t* control = nullptr;  // shm: the peer's control page, where our CDCs go
};

// An event of the adapter under a link (verbs: its async event queue).
struct DeviceEvent {
  std::string device;
  int port = 0;        // 0: every port of the device
  bool down = false;   // the port (or device) can no longer carry links
  std::string what;    // for the log
};
using DeviceEventReader = std::vector<DeviceEvent> (*)(int fd);

class Link {
 public:
  virtual ~Link() = default;
  // Copies `len` bytes to the peer RMB at `offset`; offset+len <= rmb.size is
  // the caller's invariant (cursor arithmetic), rechecked here.
  virtual bool write_remote(const RemoteRmb& rmb, uint32_t offset, const void* src, size_t len) = 0;
  // Sends one CDC or LLC message; delivered after every earlier write_remote.
  virtual bool post_message(std::span<const uint8_t, kLinkMessageLen> msg) = 0;
  // As post_message, with a handle the peer needs to reach a new RMB (shm: its
  // memfd, passed with the message). Fabrics where the RToken alone suffices
  // (verbs) ignore it.
  virtual bool post_message_with_fd(std::span<const uint8_t, kLinkMessageLen> msg, int) { return post_message(msg); }
  // During drain_messages' callback: the handle that came with the current
  // message, if any (the caller owns it), else -1.
  virtual int take_attached_fd() { return -1; }
  // The process at the other end (the kernel's word for it: SO_PEERCRED),
  // for a link between two processes of this host; -1 otherwise.
  virtual int peer_pid() const { return -1; }
  // Readable when messages may be waiting (epoll on it), or hung up on failure.
  virtual int notify_fd() const = 0;
  // Delivers every waiting message without blocking. Returns false when the
  // link has failed (peer gone): its connections must be aborted.
  virtual bool drain_messages(const std::function<void(std::span<const uint8_t>)>& on_message) = 0;
  // Waits up to timeout_ms for one message (handshake-time LLC); false on timeout/failure.
  virtual bool wait_message(uint8_t (&out)[kLinkMessageLen], int timeout_ms) = 0;
  virtual const char* fabric_name() const = 0;
  // True once the link has failed (peer gone, QP in error).
  virtual bool failed() const = 0;
  // One line of "key=value" pairs for diagnostics (device, QP, counters).
  virtual std::string describe() const = 0;
  // A new RMB of `size` bytes (zeroed) registered with this link, for the
  // peer to write into (core/rmb.h); free_local_rmb releases it.
  virtual bool alloc_rmb(uint32_t size, LocalRmb* out) = 0;
  // Deregisters and frees our RMB / drops access to the peer's.
  virtual void free_local_rmb(LocalRmb* rmb) = 0;
  virtual void release_remote_rmb(RemoteRmb* rmb) = 0;

  // --- for link groups with more than one link (RFC 2.3 failover) ---
  // Registers memory another link of the group allocated (`memory`) with
  // this link, giving it this link's RKey (RMB RKeys are per link). `out`
  // shares the memory; free_local_rmb(out) drops only the registration.
  virtual bool register_alias(const LocalRmb& memory, LocalRmb* out) {
    (void)memory;
    (void)out;
    return false;
  }
  // Our copy of everything written to `rmb` through this link (same offsets),
  // so a connection moving to another link can write it again; null if none.
  virtual const uint8_t* written_mirror(const RemoteRmb& rmb) { return rmb.addr; }
  // As post_message; *post_id (if set) names the send for completed_id().
  virtual bool post_message_tracked(std::span<const uint8_t, kLinkMessageLen> msg, uint64_t* post_id) {
    if (post_id) *post_id = 0;
    return post_message(msg);
  }
  // Every send with post_id <= this has been acknowledged by the peer's
  // adapter. Fabrics that deliver synchronously report everything.
  virtual uint64_t completed_id() const { return UINT64_MAX; }
  // Takes the link down at once (QP to error, socket shut): no further
  // writes or messages leave through it.
  virtual void take_down() {}
  // The adapter's event fd (shared by every link on the adapter), the
  // function that reads its events without blocking, and whether this link
  // runs over a given port; -1 / null / false where the fabric has none.
  virtual int device_event_fd() const { return -1; }
  virtual DeviceEventReader device_event_reader() const { return nullptr; }
  virtual bool uses_port(const std::string& device, int port) const {
    (void)device;
    (void)port;
    return false;
  }

  // --- application-side polling (verbs: a completion queue the application
  // thread can read itself, as the shm fabric's CDCs through memory) ---
  // Whether an application thread waiting on this link may take its messages
  // itself (app_poll) instead of sleeping until the engine delivers them.
  virtual bool app_pollable() const { return false; }
  // A thread starts polling; every app_poll_begin is followed by one app_poll_end.
  virtual void app_poll_begin() {}
  // Hands what waits in the receive queue to `take`, in order, on the
  // calling thread. A message `take` refuses (one that is not the caller's
  // to handle: an LLC) and every message after it stays queued for the
  // engine, which is then woken (*engine_owed), as it is when the link
  // failed. False when nothing was handed over (nothing came, or another
  // thread was draining).
  virtual bool app_poll(const std::function<bool(std::span<const uint8_t>)>& take, bool* engine_owed) {
    (void)take;
    (void)engine_owed;
    return false;
  }
  // The thread stops polling. `will_sleep`: it waits next for a wake-up the
  // engine delivers, so the link's notifications are armed first (what came
  // before the arming goes to `take` as above; true when some did).
  virtual bool app_poll_end(bool will_sleep, const std::function<bool(std::span<const uint8_t>)>& take,
                            bool* engine_owed) {
    (void)will_sleep;
    (void)take;
    (void)engine_owed;
    return false;
  }
  // The engine left notifications unarmed because an application thread
  // polls the link (core/fabric_verbs.h: deferred re-arm): the engine
  // drains it again within a tick, and arms once the polling stops.
  virtual bool rearm_deferred() const { return false; }
  // A thread is between app_poll_begin and app_poll_end now, or left it
  // within SMCR_REARM_DEFER_US, still polling (it comes back for more).
  virtual bool app_polling_recently() const { return false; }
};

}  // namespace smcr
