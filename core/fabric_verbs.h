// The verbs fabric: SMC-R links over RDMA RC queue pairs (RoCE v2, incl. rxe).
//
// One VerbsLink = one RC QP with its own protection domain (RFC 7609: RMB
// rkeys are per link), a send CQ and a receive CQ. The receive CQ is the only
// one armed on the completion channel, whose fd is notify_fd(): the engine
// wakes for received CDC/LLC messages and for the flush completions that a
// QP entering the error state produces (link failure). Send completions are
// reaped opportunistically (every kSignalEvery-th WR is signaled) by senders
// needing SQ room and by drain_messages.
//
// Application-side polling (app_poll): a thread that would sleep until the
// engine delivers a CDC (a blocking read waiting for data, a blocking write
// waiting for window) polls the receive CQ itself for a bounded spin and
// dispatches the CDCs it finds, as the shm fabric's reader takes its CDCs
// from memory; LLC messages stay for the engine. While a thread polls, or
// has polled within rearm_defer_ns(), the engine drains without re-arming the
// CQ (as NAPI defers re-enabling a device's interrupt while it busy-polls):
// completions then raise no event, and a message costs neither an engine
// wake-up nor the doorbell that would wake the reader. The engine drains an
// unarmed CQ every engine tick and arms it once the polling has stopped; a
// thread that gives up polling to sleep arms it at once.
//
// RMB placement follows Linux SMC-R: our RMBs are registered REMOTE_WRITE;
// application bytes for the peer are copied into a registered staging buffer
// with the peer RMB's size, at the same offset, and RDMA-WRITten from there
// (small writes go inline, straight from the caller's memory).
//
// Environment (read once per process):
//   SMCR_IB_DEVICE  use only this RDMA device (e.g. "rxe0", "mlx5_1")
//   SMCR_GID_INDEX  use this GID index (like NCCL_IB_GID_INDEX) on the port
//                   chosen by address, or on port 1 of SMCR_IB_DEVICE when
//                   no port owns the address
//   SMCR_TCLASS     IPv4 TOS / IPv6 traffic class of RoCE v2 packets, 0..255
//                   (default 106, see kDefaultTrafficClass)
//
// This header needs no rdma-core headers (verbs types are only forward-
// declared), but the definitions exist only when SMCR_HAVE_VERBS is 1.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/clc.h"
#include "core/fabric.h"
#include "core/mutex.h"

struct ibv_context;
struct ibv_pd;
struct ibv_cq;
struct ibv_qp;
struct ibv_mr;
struct ibv_comp_channel;

namespace smcr {

// DSCP 26 (AF31, 0x68) in the upper six bits, ECT(0) (binary 10) in the ECN
// bits: 26 << 2 | 2 = 106. AF31 is the class RoCE deployments commonly map
// to the lossless/PFC priority (NVIDIA's and Broadcom's RoCE defaults use
// DSCP 26), and ECT(0) marks the packets ECN-capable, so a congested
// ECN-enabled switch marks CE instead of dropping them - the input DCQCN
// needs. Neither costs anything on a network that ignores them; an operator
// can override with SMCR_TCLASS.
inline constexpr uint8_t kDefaultTrafficClass = 106;

// One usable (device, port, GID) triple.
struct VerbsPort {
  ibv_context* context = nullptr;  // process-wide, cached, never closed
  uint8_t port = 0;                // 1-based
  int gid_index = -1;
  clc::Gid gid{};
  clc::Mac mac{};                  // the GID's netdev's MAC (CLC "RoCE MAC")
  uint8_t active_mtu_code = 0;     // RFC/IBTA code: 1=256 .. 5=4096
  std::string device;              // e.g. "rxe0"
  std::string netdev;              // e.g. "dummy0", empty if unknown
  bool gid_index_from_env = false;
};

// Finds the RoCE v2 GID for the TCP connection's local address: the
// IPv4-mapped GID (::ffff:a.b.c.d) for AF_INET (or an AF_INET6 v4-mapped
// address), the address itself for AF_INET6, on an ACTIVE Ethernet port.
// Honours SMCR_IB_DEVICE / SMCR_GID_INDEX. On failure returns nullopt and,
// if `why` is set, a reason such as "no RDMA device" or
// "no RoCE v2 GID for 10.9.0.1 on any device".
std::optional<VerbsPort> verbs_port_for_local_address(const sockaddr* local, std::string* why);

// A port on another device for a second link in the group (RFC 3.5.1.6):
// ACTIVE, Ethernet, with an IPv4-mapped RoCE v2 GID. With `near` (the GID
// the peer offers for the new link), a port whose interface's subnet holds
// it is preferred. Nullopt when there is none, or SMCR_IB_DEVICE pins one
// device.
std::optional<VerbsPort> verbs_alternate_port(const VerbsPort& current, const clc::Gid* near);

// The traffic class links use (SMCR_TCLASS or kDefaultTrafficClass).
uint8_t verbs_traffic_class();

// Port counters for diagnostics, one "name=value" per line: the IBTA PMA
// counters under ports/<p>/counters (port_xmit_data/port_rcv_data count
// 4-octet words) and the driver's hw_counters (per port, else per device).
// Named counters that the device does not have read "not provided".
// rxe has no PMA (no process_mad), so no counters/ directory at all: its
// port_*_data are "not provided"; its hw_counters sent_pkts/rcvd_pkts count
// RoCE packets (data, ACKs, loopback included), e.g. +2354 each for 1 MiB in
// 239 WRITEs + 478 SENDs at path MTU 1024 on one rxe device.
std::string verbs_port_counters(const VerbsPort& port);
// One counter by file name, from counters/ then hw_counters/; nullopt if absent.
std::optional<uint64_t> verbs_port_counter(const VerbsPort& port, const char* name);

// Enhanced Connection Establishment values of a QP (struct ibv_ece without
// comp_mask). vendor_id is an IEEE OUI (0x15b3 = NVIDIA); the top 4 bits of
// options are the ECE version, the low 28 feature bits.
struct VerbsEce {
  uint32_t vendor_id = 0;
  uint32_t options = 0;
};

// ECE agreement as RDMA-CM does it: the same vendor and ECE version, and
// only the feature bits both sides offer. Nullopt when they cannot agree.
inline std::optional<VerbsEce> verbs_ece_agree(const VerbsEce& a, const VerbsEce& b) {
  if (a.vendor_id != b.vendor_id || (a.options >> 28) != (b.options >> 28)) return std::nullopt;
  return VerbsEce{a.vendor_id, (a.options & 0xF0000000u) | (a.options & b.options & 0x0FFFFFFFu)};
}

// The device's ECE values (from the first QP created on it; a short-lived
// probe QP if none yet), nullopt where the device has no ECE (rxe).
std::optional<VerbsEce> verbs_device_ece(const VerbsPort& port);

struct VerbsLinkCounters {
  uint64_t bytes_written = 0;      // RDMA WRITE payload posted
  uint64_t writes_posted = 0;
  uint64_t writes_inline = 0;
  uint64_t posts = 0;              // ibv_post_send calls (a WRITE goes with the SEND after it)
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t send_completions = 0;   // signaled WRs reaped (each covers up to kSignalEvery)
  uint64_t sq_full_waits = 0;      // times a sender had to wait for SQ room
  uint64_t cq_events = 0;          // completion-channel events consumed
  uint64_t app_polled = 0;         // messages application threads took from the receive CQ
};

// What the QP really holds (ibv_query_qp), for diagnostics and tests.
struct VerbsQpInfo {
  const char* state = "?";  // "INIT", "RTR", "RTS", "ERR", ...
  uint8_t path_mtu_code = 0;
  uint8_t traffic_class = 0;
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 0;
  uint32_t dest_qpn = 0;
  uint8_t timeout = 0;
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;
  uint32_t max_inline_data = 0;
};

class VerbsLink final : public Link {
 public:
  static constexpr uint32_t kSendDepth = 256;  // SQ WRs (writes + messages)
  // As deep as the peer's SQ, so a peer with a full SQ of SENDs meets no RNR
  // while our engine is between drains.
  static constexpr uint32_t kRecvDepth = 256;  // posted 64-byte receive slots
  static constexpr uint32_t kSignalEvery = 16;
  static constexpr uint32_t kSlotSize = 64;    // > 44 so an oversized SEND is seen, not a QP error
  // Receive slots of a link in a Linux SMC-Rv2 group: its LLC messages may be
  // up to 8 KiB (ADD LINK v2, REQ ADD LINK), and a SEND longer than the
  // posted receive is a remote-invalid-request NAK that kills both QPs.
  static constexpr uint32_t kV2SlotSize = 8192 + 64;
  static constexpr int kSqWaitMs = 5000;       // then the link is declared failed
  // How long after an application thread last polled the receive CQ the
  // engine still leaves it unarmed (see app_poll above):
  // SMCR_REARM_DEFER_US, default kDefaultRearmDeferUs.
  static constexpr int64_t kDefaultRearmDeferUs = 1000;
  static int64_t rearm_defer_ns();
  static_assert(kRecvDepth >= kSendDepth, "a peer's full send queue of SENDs would meet RNR");
  // Every WR that fills the queue's last kSignalEvery slots is signaled
  // (post_send_locked): a full queue holds a completion to reap.
  static_assert(kSignalEvery > 0 && kSignalEvery <= kSendDepth, "a full send queue could hold no signaled WR");
  static_assert(kSlotSize > kLinkMessageLen, "an oversized SEND must fit a receive slot, to be seen and refused");

  // Creates PD, completion channel, CQs and an RC QP in INIT, posts the
  // receive ring (slots of `recv_slot_size` bytes) and picks a random 24-bit
  // PSN. Returns null with `why` set.
  static std::unique_ptr<VerbsLink> create(const VerbsPort& port, std::string* why,
                                           uint32_t recv_slot_size = kSlotSize);
  ~VerbsLink() override;
  VerbsLink(const VerbsLink&) = delete;
  VerbsLink& operator=(const VerbsLink&) = delete;

  uint32_t qpn() const;
  uint32_t psn() const { return psn_; }
  const clc::Gid& gid() const { return port_.gid; }
  const clc::Mac& mac() const { return port_.mac; }
  uint8_t mtu_code() const { return port_.active_mtu_code; }
  const VerbsPort& port() const { return port_; }
  uint8_t traffic_class() const { return tclass_; }

  // ECE as queried after QP creation. Unsupported (rxe: EOPNOTSUPP) leaves
  // ece_supported() false and ece_status() "ECE not supported by <dev>".
  bool ece_supported() const { return ece_supported_; }
  const VerbsEce& ece() const { return ece_; }
  const std::string& ece_status() const { return ece_status_; }
  // Applies the negotiated options before connect() (ibv_set_ece).
  bool set_ece(const VerbsEce& ece, std::string* why);

  // INIT -> RTR -> RTS with the peer's Accept/Confirm values; mtu_code is the
  // smaller of both sides' codes (1..5). Going to RTS at once is harmless on
  // the client: it sends nothing before the server's CONFIRM LINK arrives.
  bool connect(const clc::Gid& remote_gid, uint32_t remote_qpn, uint32_t remote_psn, uint8_t mtu_code,
               std::string* why);

  // Page-aligned zeroed memory registered LOCAL_WRITE|REMOTE_WRITE in this
  // link's PD. The memory belongs to the link: the destructor frees what is
  // still registered.
  bool alloc_rmb(uint32_t size, LocalRmb* out) override;

  bool write_remote(const RemoteRmb& rmb, uint32_t offset, const void* src, size_t len) override;
  bool post_message(std::span<const uint8_t, kLinkMessageLen> msg) override;
  int notify_fd() const override;
  bool drain_messages(const std::function<void(std::span<const uint8_t>)>& on_message) override;
  bool wait_message(uint8_t (&out)[kLinkMessageLen], int timeout_ms) override;
  const char* fabric_name() const override { return "verbs"; }
  void free_local_rmb(LocalRmb* rmb) override;
  void release_remote_rmb(RemoteRmb* rmb) override;
  bool register_alias(const LocalRmb& memory, LocalRmb* out) override;
  // The staging buffer: every write (inline ones too) is copied there first.
  const uint8_t* written_mirror(const RemoteRmb& rmb) override;
  bool post_message_tracked(std::span<const uint8_t, kLinkMessageLen> msg, uint64_t* post_id) override;
  uint64_t completed_id() const override { return completed_id_.load(std::memory_order_acquire); }
  void take_down() override { fail("taken down"); }
  int device_event_fd() const override;
  DeviceEventReader device_event_reader() const override;
  bool uses_port(const std::string& device, int port) const override {
    return device == port_.device && (port == 0 || port == port_.port);
  }
  bool app_pollable() const override { return true; }
  void app_poll_begin() override { app_pollers_.fetch_add(1, std::memory_order_seq_cst); }
  bool app_poll(const std::function<bool(std::span<const uint8_t>)>& take, bool* engine_owed) override;
  bool app_poll_end(bool will_sleep, const std::function<bool(std::span<const uint8_t>)>& take,
                    bool* engine_owed) override;
  bool rearm_deferred() const override { return rearm_deferred_.load(std::memory_order_acquire); }
  bool app_polling_recently() const override;

  bool failed() const override { return failed_.load(std::memory_order_acquire); }
  // Why the link failed (first error completion or post failure), or "".
  std::string failure_reason() const;
  std::string describe() const override;
  VerbsLinkCounters counters() const;
  std::optional<VerbsQpInfo> query_qp() const;
  // Test hook: moves the QP to the error state, as a dying peer/port would.
  bool force_error_for_test();

 private:
  struct Staging {
    uint8_t* addr = nullptr;
    size_t len = 0;
    ibv_mr* mr = nullptr;
  };
  struct LocalMr {
    uint8_t* addr = nullptr;
    size_t len = 0;
    ibv_mr* mr = nullptr;
    bool owns_memory = true;  // false: an alias of another link's RMB
  };

  VerbsLink(const VerbsPort& port, uint32_t recv_slot_size);
  uint8_t* recv_slot(uint32_t slot) const { return ring_ + static_cast<size_t>(slot) * recv_slot_size_; }
  bool init(std::string* why);
  // Posts the held RDMA WRITEs (chain_) and then `wr` (null: only them) in
  // one ibv_post_send under sq_mu_ (held by the caller), waiting for room.
  bool post_send_locked(void* wr) SMCR_REQUIRES(sq_mu_);
  // Waits (bounded, reaping send completions) until `n` more WRs fit.
  bool wait_room_locked(uint64_t n) SMCR_REQUIRES(sq_mu_);
  bool drain_locked(const std::function<void(std::span<const uint8_t>)>& on_message) SMCR_REQUIRES(drain_mu_);
  bool reap_send_locked(bool* progressed) SMCR_REQUIRES(sq_mu_);
  bool post_recv(uint32_t slot);
  // Polls the receive CQ; delivers into on_message. False on link failure.
  bool poll_recv(const std::function<void(std::span<const uint8_t>)>& on_message, bool* got_any);
  // app_poll's part under drain_mu_: the CQ's messages to `take` until it
  // refuses one; that one and the rest to pending_ (for the engine).
  bool app_take_locked(const std::function<bool(std::span<const uint8_t>)>& take, bool* engine_owed)
      SMCR_REQUIRES(drain_mu_);
  void fail(const std::string& reason);
  Staging* staging_for(const RemoteRmb& rmb);

  VerbsPort port_;
  uint8_t tclass_ = kDefaultTrafficClass;
  uint32_t psn_ = 0;
  uint32_t max_inline_ = 0;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_qp* qp_ = nullptr;

  // Receive ring: kRecvDepth slots of recv_slot_size_; send slots (used only
  // when the device cannot inline 44 bytes): kSendDepth slots of kSlotSize.
  uint32_t recv_slot_size_ = kSlotSize;
  uint8_t* ring_ = nullptr;
  size_t ring_len_ = 0;
  ibv_mr* ring_mr_ = nullptr;

  bool ece_supported_ = false;
  bool ece_applied_ = false;  // set_ece succeeded: ece_ holds the agreed values
  VerbsEce ece_;
  std::string ece_status_;

  Mutex sq_mu_;           // SQ posting and send-CQ reaping
  uint64_t send_seq_ SMCR_GUARDED_BY(sq_mu_) = 0;       // WRs posted (the last one's sequence number)
  uint64_t completed_seq_ SMCR_GUARDED_BY(sq_mu_) = 0;  // every WR up to this one is complete
  std::atomic<uint64_t> completed_id_{0};  // completed_seq_, readable without sq_mu_
  uint64_t last_signaled_seq_ SMCR_GUARDED_BY(sq_mu_) = 0;
  // RDMA WRITEs not posted yet: they go with the next SEND (the CDC that
  // announces them, or any message) as one chain, one ibv_post_send: one
  // doorbell instead of two (on rxe one system call). Each still goes first:
  // RC executes a chain in order.
  struct SendChain;  // fabric_verbs.cc (the ibv_send_wr type lives there)
  std::unique_ptr<SendChain> chain_ SMCR_GUARDED_BY(sq_mu_);
  // Released staging buffers, freed once completed_seq_ passes the number.
  std::deque<std::pair<uint64_t, std::unique_ptr<Staging>>> retired_ SMCR_GUARDED_BY(sq_mu_);

  Mutex drain_mu_;        // receive CQ, channel events, pending_
  std::deque<std::vector<uint8_t>> pending_ SMCR_GUARDED_BY(drain_mu_);  // drained by wait_message for later
  bool armed_ SMCR_GUARDED_BY(drain_mu_) = false;
  std::atomic<int> app_pollers_{0};             // threads between app_poll_begin and _end
  std::atomic<int64_t> app_polled_ns_{0};       // when the last of them ended (sys::now_ns)
  std::atomic<bool> rearm_deferred_{false};     // the engine left the CQ unarmed for them

  Mutex mr_mu_;           // local RMBs and remote staging buffers
  std::vector<LocalMr> local_mrs_ SMCR_GUARDED_BY(mr_mu_);
  std::map<std::pair<uint32_t, uint64_t>, std::unique_ptr<Staging>> staging_ SMCR_GUARDED_BY(mr_mu_);  // (rkey, vaddr)

  std::atomic<bool> failed_{false};
  mutable Mutex fail_mu_;
  std::string failure_reason_ SMCR_GUARDED_BY(fail_mu_);

  std::atomic<uint64_t> c_bytes_written_{0}, c_writes_{0}, c_writes_inline_{0}, c_posts_{0}, c_msgs_sent_{0},
      c_msgs_recv_{0}, c_send_comps_{0}, c_sq_waits_{0}, c_cq_events_{0}, c_app_polled_{0};
};

}  // namespace smcr
