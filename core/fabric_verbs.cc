#include "core/fabric_verbs.h"
#include "core/verbs_device.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "core/env.h"
#include "core/llc.h"
#include "core/log.h"
#include "core/random.h"
#include "core/sys.h"

namespace smcr {

using verbs_internal::errstr;
using verbs_internal::gid_to_string;
using verbs_internal::set_why;

namespace {

// A SEND longer than the posted receive is a remote-invalid-request NAK
// that kills both QPs: Linux's longest version-2 LLC message must fit.
static_assert(VerbsLink::kV2SlotSize > llc::v2::kMaxMessageLen, "a Linux v2 LLC message would not fit a receive slot");

size_t page_round(size_t n) {
  long ps = sysconf(_SC_PAGESIZE);
  size_t p = ps > 0 ? static_cast<size_t>(ps) : 4096;
  return (n + p - 1) / p * p;
}

// Anonymous mappings are page-aligned and zeroed, which RMBs need (RFC 4.2:
// the RMBE starts zeroed), and unmapping returns them to the kernel at once.
uint8_t* map_zeroed(size_t len) {
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}

constexpr uint64_t kUnsignaledWrId = 0;  // signaled WRs carry their sequence number (>= 1)

}  // namespace

// ==================================================================== VerbsLink

struct VerbsLink::SendChain {
  static constexpr int kMax = 8;  // WRITEs held; one more flushes them alone
  std::array<ibv_send_wr, kMax> wr{};
  std::array<ibv_sge, kMax> sge{};
  int len = 0;
  static_assert(kMax + 1 <= kSendDepth, "a chain and its SEND must fit the send queue");
};

VerbsLink::VerbsLink(const VerbsPort& port, uint32_t recv_slot_size)
    : port_(port), tclass_(verbs_traffic_class()), recv_slot_size_(recv_slot_size),
      chain_(std::make_unique<SendChain>()) {}

std::unique_ptr<VerbsLink> VerbsLink::create(const VerbsPort& port, std::string* why, uint32_t recv_slot_size) {
  if (!port.context || port.port == 0 || port.gid_index < 0) {
    set_why(why, "invalid VerbsPort");
    return nullptr;
  }
  if (recv_slot_size < kSlotSize || recv_slot_size > kV2SlotSize) {
    set_why(why, "invalid receive slot size");
    return nullptr;
  }
  std::unique_ptr<VerbsLink> l(new VerbsLink(port, recv_slot_size));
  if (!l->init(why)) return nullptr;
  return l;
}

bool VerbsLink::init(std::string* why) {
  ibv_context* ctx = port_.context;
  const std::string& dev = port_.device;
  // The PSN is what keeps a blind sender from injecting into the QP (as a
  // TCP ISN): a link without a random one is no link.
  uint32_t psn = 0;
  if (!random_bytes(&psn, sizeof psn)) {
    set_why(why, "no random PSN (getrandom failed)");
    return false;
  }
  psn_ = psn & 0xFFFFFF;
  pd_ = ibv_alloc_pd(ctx);
  if (!pd_) {
    set_why(why, dev + ": ibv_alloc_pd: " + errstr(errno));
    return false;
  }
  channel_ = ibv_create_comp_channel(ctx);
  if (!channel_) {
    set_why(why, dev + ": ibv_create_comp_channel: " + errstr(errno));
    return false;
  }
  int fl = sys::fcntl(channel_->fd, F_GETFL);
  if (fl < 0 || sys::fcntl(channel_->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
    set_why(why, "cannot make the completion channel non-blocking");
    return false;
  }
  send_cq_ = ibv_create_cq(ctx, static_cast<int>(kSendDepth), nullptr, nullptr, 0);
  recv_cq_ = ibv_create_cq(ctx, static_cast<int>(kRecvDepth), this, channel_, 0);
  if (!send_cq_ || !recv_cq_) {
    set_why(why, dev + ": ibv_create_cq: " + errstr(errno));
    return false;
  }

  // Ask for room to inline small writes too; fall back to what the device
  // takes (a provider rejects a max_inline_data above its limit).
  for (uint32_t inl : {256u, 64u, 0u}) {
    ibv_qp_init_attr qa{};
    qa.send_cq = send_cq_;
    qa.recv_cq = recv_cq_;
    qa.qp_type = IBV_QPT_RC;
    qa.sq_sig_all = 0;
    qa.cap.max_send_wr = kSendDepth;
    qa.cap.max_recv_wr = kRecvDepth;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    qa.cap.max_inline_data = inl;
    qp_ = ibv_create_qp(pd_, &qa);
    if (qp_) {
      max_inline_ = qa.cap.max_inline_data;  // the provider reports what it granted
      break;
    }
  }
  if (!qp_) {
    set_why(why, dev + ": ibv_create_qp(RC): " + errstr(errno));
    return false;
  }

  ring_len_ = page_round(static_cast<size_t>(kRecvDepth) * recv_slot_size_ + static_cast<size_t>(kSendDepth) * kSlotSize);
  ring_ = map_zeroed(ring_len_);
  if (!ring_) {
    set_why(why, "cannot map the message ring");
    return false;
  }
  ring_mr_ = ibv_reg_mr(pd_, ring_, ring_len_, IBV_ACCESS_LOCAL_WRITE);
  if (!ring_mr_) {
    set_why(why, dev + ": ibv_reg_mr(ring): " + errstr(errno));
    return false;
  }

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = port_.port;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  int rc = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) {
    set_why(why, dev + ": QP -> INIT: " + errstr(rc));
    return false;
  }
  for (uint32_t i = 0; i < kRecvDepth; ++i) {
    if (!post_recv(i)) {
      set_why(why, dev + ": ibv_post_recv failed");
      return false;
    }
  }
  if (ibv_req_notify_cq(recv_cq_, 0) != 0) {
    set_why(why, dev + ": ibv_req_notify_cq failed");
    return false;
  }
  {
    MutexLock lock(drain_mu_);
    armed_ = true;
  }

  ibv_ece e{};
  rc = ibv_query_ece(qp_, &e);
  if (rc == 0) {
    ece_supported_ = true;
    ece_.vendor_id = e.vendor_id;
    ece_.options = e.options;
    char buf[96];
    snprintf(buf, sizeof buf, "ECE supported by %s: vendor 0x%06" PRIx32 " options 0x%08" PRIx32, dev.c_str(),
             e.vendor_id, e.options);
    ece_status_ = buf;
  } else {
    ece_status_ = "ECE not supported by " + dev + " (" + errstr(rc) + ")";
  }
  verbs_internal::note_device_ece(dev, ece_supported_ ? std::optional<VerbsEce>(ece_) : std::nullopt);

  SMCR_LOG(1, "verbs: link on %s port %u gid[%d] qpn 0x%06x psn 0x%06x inline %u tclass %u; %s", dev.c_str(),
           port_.port, port_.gid_index, qp_->qp_num, psn_, max_inline_, tclass_, ece_status_.c_str());
  return true;
}

VerbsLink::~VerbsLink() {
  // The QP goes first: nothing may still reference the MRs and CQs.
  if (qp_) ibv_destroy_qp(qp_);
  if (send_cq_) ibv_destroy_cq(send_cq_);
  if (recv_cq_) ibv_destroy_cq(recv_cq_);
  if (channel_) ibv_destroy_comp_channel(channel_);
  if (ring_mr_) ibv_dereg_mr(ring_mr_);
  if (ring_) munmap(ring_, ring_len_);
  for (LocalMr& m : local_mrs_) {
    if (m.mr) ibv_dereg_mr(m.mr);
    if (m.addr && m.owns_memory) munmap(m.addr, m.len);
  }
  auto free_staging = [](Staging& s) {
    if (s.mr) ibv_dereg_mr(s.mr);
    if (s.addr) munmap(s.addr, s.len);
  };
  for (auto& kv : staging_) free_staging(*kv.second);
  for (auto& r : retired_) free_staging(*r.second);
  if (pd_) ibv_dealloc_pd(pd_);
}

uint32_t VerbsLink::qpn() const { return qp_ ? qp_->qp_num : 0; }

int VerbsLink::notify_fd() const { return channel_ ? channel_->fd : -1; }

bool VerbsLink::set_ece(const VerbsEce& ece, std::string* why) {
  if (!ece_supported_) {
    set_why(why, ece_status_);
    return false;
  }
  ibv_ece e{};
  e.vendor_id = ece.vendor_id;
  e.options = ece.options;
  int rc = ibv_set_ece(qp_, &e);
  if (rc != 0) {
    set_why(why, "ibv_set_ece: " + errstr(rc));
    return false;
  }
  ibv_ece now{};
  if (ibv_query_ece(qp_, &now) == 0) {
    ece_.vendor_id = now.vendor_id;
    ece_.options = now.options;
  }
  ece_applied_ = true;
  return true;
}

bool VerbsLink::connect(const clc::Gid& remote_gid, uint32_t remote_qpn, uint32_t remote_psn, uint8_t mtu_code,
                        std::string* why) {
  if (mtu_code < 1 || mtu_code > 5) {
    set_why(why, "MTU code " + std::to_string(mtu_code) + " is reserved");
    return false;
  }
  if (remote_qpn == 0 || remote_qpn > 0xFFFFFF || remote_psn > 0xFFFFFF) {
    set_why(why, "peer QPN/PSN out of range");
    return false;
  }
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min(mtu_code, port_.active_mtu_code));
  a.dest_qp_num = remote_qpn;
  a.rq_psn = remote_psn;
  a.max_dest_rd_atomic = 1;
  // 0.64 ms: RNR NAKs only happen when the receiver has not reposted yet,
  // and the sender retries forever (rnr_retry 7), so keep the pause short.
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  std::memcpy(a.ah_attr.grh.dgid.raw, remote_gid.data(), 16);
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(port_.gid_index);
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.grh.traffic_class = tclass_;
  a.ah_attr.grh.flow_label = 0;
  a.ah_attr.dlid = 0;
  a.ah_attr.sl = 0;
  a.ah_attr.src_path_bits = 0;
  a.ah_attr.port_num = port_.port;
  int rc = ibv_modify_qp(qp_, &a,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) {
    set_why(why, port_.device + ": QP -> RTR: " + errstr(rc));
    return false;
  }
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.sq_psn = psn_;
  // 4.096 us * 2^14 = 67 ms local ACK timeout, 6 retries: a dead peer is
  // detected in about half a second, long enough for a busy soft-RoCE peer.
  // Not 7: rxe treats retry_cnt 7 as "retry forever" (rxe_comp.c only
  // decrements when != 7), so a dead peer would never surface as an error.
  s.timeout = 14;
  s.retry_cnt = 6;
  s.rnr_retry = 7;  // 7 = retry forever: RNR means "slow", not "dead"
  s.max_rd_atomic = 1;
  rc = ibv_modify_qp(qp_, &s,
                     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) {
    set_why(why, port_.device + ": QP -> RTS: " + errstr(rc));
    return false;
  }
  SMCR_LOG(1, "verbs: qpn 0x%06x (gid %s) connected to %s qpn 0x%06x (mtu code %u)", qpn(),
           gid_to_string(port_.gid).c_str(), gid_to_string(remote_gid).c_str(),
           remote_qpn, a.path_mtu);
  return true;
}

bool VerbsLink::alloc_rmb(uint32_t size, LocalRmb* out) {
  if (size == 0) return false;
  size_t len = page_round(size);
  uint8_t* p = map_zeroed(len);
  if (!p) return false;
  ibv_mr* mr = ibv_reg_mr(pd_, p, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!mr) {
    SMCR_LOG(1, "verbs: ibv_reg_mr(%u): %s", size, strerror(errno));
    munmap(p, len);
    return false;
  }
  MutexLock lock(mr_mu_);
  size_t slot = 0;
  while (slot < local_mrs_.size() && local_mrs_[slot].mr) ++slot;
  if (slot == local_mrs_.size()) local_mrs_.emplace_back();
  local_mrs_[slot] = {p, len, mr};
  out->addr = p;
  out->size = size;
  out->rkey = mr->rkey;
  out->vaddr = reinterpret_cast<uint64_t>(p);
  out->handle = static_cast<int>(slot);
  return true;
}

void VerbsLink::free_local_rmb(LocalRmb* rmb) {
  LocalMr m;
  {
    MutexLock lock(mr_mu_);
    if (rmb->handle < 0 || static_cast<size_t>(rmb->handle) >= local_mrs_.size()) return;
    LocalMr& slot = local_mrs_[static_cast<size_t>(rmb->handle)];
    if (slot.addr != rmb->addr || !slot.mr) return;
    m = slot;
    slot = {};
  }
  ibv_dereg_mr(m.mr);
  if (m.owns_memory) munmap(m.addr, m.len);
  rmb->addr = nullptr;
  rmb->handle = -1;
  rmb->rkey = 0;
  rmb->vaddr = 0;
}

bool VerbsLink::register_alias(const LocalRmb& memory, LocalRmb* out) {
  if (!memory.addr || memory.size == 0) return false;
  ibv_mr* mr = ibv_reg_mr(pd_, memory.addr, memory.size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!mr) {
    SMCR_LOG(1, "verbs: ibv_reg_mr(alias %u): %s", memory.size, strerror(errno));
    return false;
  }
  MutexLock lock(mr_mu_);
  size_t slot = 0;
  while (slot < local_mrs_.size() && local_mrs_[slot].mr) ++slot;
  if (slot == local_mrs_.size()) local_mrs_.emplace_back();
  local_mrs_[slot] = {memory.addr, page_round(memory.size), mr, false};
  *out = memory;
  out->rkey = mr->rkey;
  out->handle = static_cast<int>(slot);
  out->alias = true;
  return true;
}

const uint8_t* VerbsLink::written_mirror(const RemoteRmb& rmb) {
  Staging* s = staging_for(rmb);
  return s ? s->addr : nullptr;
}

VerbsLink::Staging* VerbsLink::staging_for(const RemoteRmb& rmb) {
  MutexLock lock(mr_mu_);
  auto key = std::make_pair(rmb.rkey, rmb.vaddr);
  auto it = staging_.find(key);
  if (it != staging_.end()) return it->second->len >= rmb.size ? it->second.get() : nullptr;
  auto s = std::make_unique<Staging>();
  s->len = page_round(rmb.size);
  s->addr = map_zeroed(s->len);
  if (!s->addr) return nullptr;
  // Only the local NIC reads it (as the WRITE source): no access flags.
  s->mr = ibv_reg_mr(pd_, s->addr, s->len, 0);
  if (!s->mr) {
    SMCR_LOG(1, "verbs: ibv_reg_mr(staging %u): %s", rmb.size, strerror(errno));
    munmap(s->addr, s->len);
    return nullptr;
  }
  Staging* raw = s.get();
  staging_.emplace(key, std::move(s));
  return raw;
}

void VerbsLink::release_remote_rmb(RemoteRmb* rmb) {
  std::unique_ptr<Staging> s;
  {
    MutexLock lock(mr_mu_);
    auto it = staging_.find(std::make_pair(rmb->rkey, rmb->vaddr));
    if (it != staging_.end()) {
      s = std::move(it->second);
      staging_.erase(it);
    }
  }
  rmb->addr = nullptr;
  if (!s) return;
  // A WRITE from this buffer may still be in the SQ (unsignaled), or held
  // for the next SEND (posted now): free it once a later signaled
  // completion proves every WR up to now is done.
  MutexLock lock(sq_mu_);
  if (chain_->len > 0) post_send_locked(nullptr);
  retired_.emplace_back(send_seq_, std::move(s));
  bool progressed;
  reap_send_locked(&progressed);
}

// ---------------------------------------------------------------- send side

bool VerbsLink::reap_send_locked(bool* progressed) {
  *progressed = false;
  ibv_wc wc[16];
  for (;;) {
    int n = ibv_poll_cq(send_cq_, 16, wc);
    if (n < 0) {
      fail("ibv_poll_cq(send) failed");
      return false;
    }
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        if (!(failed() && wc[i].status == IBV_WC_WR_FLUSH_ERR))
          fail(std::string("send completion: ") + ibv_wc_status_str(wc[i].status) + " (vendor_err 0x" +
               std::to_string(wc[i].vendor_err) + ")");
        continue;
      }
      // wr_id of a signaled WR is its sequence number; RC completes in order,
      // so every earlier (unsignaled) WR is done too.
      if (wc[i].wr_id > completed_seq_ && wc[i].wr_id <= send_seq_) {
        completed_seq_ = wc[i].wr_id;
        completed_id_.store(completed_seq_, std::memory_order_release);
      }
      c_send_comps_.fetch_add(1, std::memory_order_relaxed);
      *progressed = true;
    }
    if (n < 16) break;
  }
  while (!retired_.empty() && retired_.front().first <= completed_seq_) {
    Staging& s = *retired_.front().second;
    ibv_dereg_mr(s.mr);
    munmap(s.addr, s.len);
    retired_.pop_front();
  }
  return !failed();
}

bool VerbsLink::wait_room_locked(uint64_t n) {
  if (failed()) return false;
  int64_t deadline = -1;
  int sleep_us = 20;
  while (send_seq_ - completed_seq_ + n > kSendDepth) {
    bool progressed = false;
    if (!reap_send_locked(&progressed)) return false;
    if (progressed) continue;
    if (deadline < 0) {
      deadline = sys::now_ms() + kSqWaitMs;
      c_sq_waits_.fetch_add(1, std::memory_order_relaxed);
    } else if (sys::now_ms() > deadline) {
      fail("send queue stuck for " + std::to_string(kSqWaitMs) + " ms (peer not acknowledging)");
      return false;
    }
    // Completions of our own sends need no engine: the NIC (or rxe's
    // kernel thread) produces them; back off briefly while it does.
    timespec ts{0, sleep_us * 1000L};
    nanosleep(&ts, nullptr);
    sleep_us = std::min(sleep_us * 2, 1000);
  }
  return true;
}

bool VerbsLink::post_send_locked(void* wr_ptr) {
  auto* last = static_cast<ibv_send_wr*>(wr_ptr);
  SendChain& chain = *chain_;
  const int held = chain.len;
  const int n = held + (last ? 1 : 0);
  if (n == 0) return true;
  chain.len = 0;  // posted below, or dropped with the failed link
  if (!wait_room_locked(static_cast<uint64_t>(n))) return false;
  ibv_send_wr* first = held > 0 ? &chain.wr[0] : last;
  uint64_t signaled = last_signaled_seq_;
  for (int i = 0; i < n; ++i) {
    ibv_send_wr* wr = i < held ? &chain.wr[static_cast<size_t>(i)] : last;
    uint64_t seq = send_seq_ + 1 + static_cast<uint64_t>(i);
    uint64_t outstanding = seq - completed_seq_;
    bool signal = seq - signaled >= kSignalEvery || outstanding + kSignalEvery >= kSendDepth;
    wr->wr_id = signal ? seq : kUnsignaledWrId;
    if (signal) {
      wr->send_flags |= IBV_SEND_SIGNALED;
      signaled = seq;
    }
    wr->next = i + 1 < n ? (i + 1 < held ? &chain.wr[static_cast<size_t>(i) + 1] : last) : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp_, first, &bad);
  if (rc != 0) {
    fail("ibv_post_send: " + errstr(rc));
    return false;
  }
  send_seq_ += static_cast<uint64_t>(n);
  last_signaled_seq_ = signaled;
  c_posts_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool VerbsLink::write_remote(const RemoteRmb& rmb, uint32_t offset, const void* src, size_t len) {
  if (offset > rmb.size || len > rmb.size - offset) return false;
  if (len == 0) return true;
  if (failed()) return false;
  // The staging buffer always gets the bytes, inline writes included: it is
  // the mirror a connection moving to another link writes again (RFC 4.6),
  // and what a held WRITE reads when it is posted.
  Staging* s = staging_for(rmb);
  if (!s) return false;
  if (src != s->addr + offset) std::memcpy(s->addr + offset, src, len);
  bool inl = len <= max_inline_;
  {
    MutexLock lock(sq_mu_);
    SendChain& chain = *chain_;
    if (chain.len == SendChain::kMax && !post_send_locked(nullptr)) return false;
    auto i = static_cast<size_t>(chain.len);
    ibv_sge& sge = chain.sge[i];
    ibv_send_wr& wr = chain.wr[i];
    sge = ibv_sge{};
    wr = ibv_send_wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = rmb.vaddr + offset;
    wr.wr.rdma.rkey = rmb.rkey;
    sge.length = static_cast<uint32_t>(len);
    sge.addr = reinterpret_cast<uint64_t>(s->addr + offset);
    // Inline: copied into the WQE at post time, from the staging buffer.
    if (inl) wr.send_flags = IBV_SEND_INLINE;
    else sge.lkey = s->mr->lkey;
    ++chain.len;
  }
  c_bytes_written_.fetch_add(len, std::memory_order_relaxed);
  c_writes_.fetch_add(1, std::memory_order_relaxed);
  if (inl) c_writes_inline_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool VerbsLink::post_message(std::span<const uint8_t, kLinkMessageLen> msg) {
  return post_message_tracked(msg, nullptr);
}

bool VerbsLink::post_message_tracked(std::span<const uint8_t, kLinkMessageLen> msg, uint64_t* post_id) {
  ibv_sge sge{};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  sge.length = static_cast<uint32_t>(msg.size());
  MutexLock lock(sq_mu_);
  if (max_inline_ >= msg.size()) {
    sge.addr = reinterpret_cast<uint64_t>(msg.data());
    wr.send_flags = IBV_SEND_INLINE;
  } else {
    // The slot of the WR about to be posted (after the held WRITEs) was last
    // used kSendDepth WRs ago; once there is SQ room, that WR is complete and
    // the slot free.
    const auto ahead = static_cast<uint64_t>(chain_->len) + 1;
    if (!wait_room_locked(ahead)) return false;
    uint8_t* slot = ring_ + static_cast<size_t>(kRecvDepth) * recv_slot_size_ + ((send_seq_ + ahead) % kSendDepth) * kSlotSize;
    std::memcpy(slot, msg.data(), msg.size());
    sge.addr = reinterpret_cast<uint64_t>(slot);
    sge.lkey = ring_mr_->lkey;
  }
  if (!post_send_locked(&wr)) return false;
  if (post_id) *post_id = send_seq_;
  c_msgs_sent_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// ---------------------------------------------------------------- receive side

bool VerbsLink::post_recv(uint32_t slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uint64_t>(recv_slot(slot));
  sge.length = recv_slot_size_;
  sge.lkey = ring_mr_->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp_, &wr, &bad) == 0;
}

void VerbsLink::fail(const std::string& reason) {
  {
    MutexLock lock(fail_mu_);
    if (failed_.load(std::memory_order_relaxed)) return;
    failure_reason_ = reason;
    failed_.store(true, std::memory_order_release);
  }
  SMCR_LOG(1, "verbs: link qpn 0x%06x on %s failed: %s", qpn(), port_.device.c_str(), reason.c_str());
  // Flushing the receive ring wakes whoever waits on notify_fd().
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(qp_, &a, IBV_QP_STATE);
}

std::string VerbsLink::describe() const {
  std::string out;
  char buf[512];
  auto q = query_qp();
  VerbsLinkCounters c = counters();
  char ece_text[48];
  snprintf(ece_text, sizeof ece_text, "agreed:0x%06x/0x%08x", ece_.vendor_id, ece_.options);
  snprintf(buf, sizeof buf,
           "fabric=verbs device=%s port=%u netdev=%s gid_index=%d qpn=%u dest_qpn=%u qp_state=%s path_mtu_code=%u "
           "tclass=%u retry_cnt=%u ece=%s state=%s bytes_written=%llu writes=%llu messages_sent=%llu posts=%llu "
           "messages_received=%llu sq_full_waits=%llu",
           port_.device.c_str(), port_.port, port_.netdev.empty() ? "?" : port_.netdev.c_str(), port_.gid_index, qpn(),
           q ? q->dest_qpn : 0, q ? q->state : "?", q ? q->path_mtu_code : 0, q ? q->traffic_class : 0,
           q ? q->retry_cnt : 0, ece_applied_ ? ece_text : ece_supported_ ? "supported" : "not-supported", failed() ? "failed" : "up",
           static_cast<unsigned long long>(c.bytes_written), static_cast<unsigned long long>(c.writes_posted),
           static_cast<unsigned long long>(c.messages_sent), static_cast<unsigned long long>(c.posts),
           static_cast<unsigned long long>(c.messages_received),
           static_cast<unsigned long long>(c.sq_full_waits));
  out = buf;
  // The device's own counters (retries, congestion: CNPs, ECN) where it has them.
  std::string hw = verbs_port_counters(port_);
  for (size_t pos; (pos = hw.find("not provided")) != std::string::npos;) hw.replace(pos, 12, "not-provided");
  for (char& ch : hw)
    if (ch == '\n') ch = ' ';
  out += " hw: ";
  out += hw;
  return out;
}

std::string VerbsLink::failure_reason() const {
  MutexLock lock(fail_mu_);
  return failure_reason_;
}

bool VerbsLink::poll_recv(const std::function<void(std::span<const uint8_t>)>& on_message, bool* got_any) {
  *got_any = false;
  ibv_wc wc[16];
  for (;;) {
    int n = ibv_poll_cq(recv_cq_, 16, wc);
    if (n < 0) {
      fail("ibv_poll_cq(recv) failed");
      return false;
    }
    for (int i = 0; i < n; ++i) {
      *got_any = true;
      if (wc[i].status != IBV_WC_SUCCESS) {
        if (!(failed() && wc[i].status == IBV_WC_WR_FLUSH_ERR))
          fail(std::string("receive completion: ") + ibv_wc_status_str(wc[i].status));
        continue;
      }
      if (wc[i].wr_id >= kRecvDepth || wc[i].opcode != IBV_WC_RECV || wc[i].byte_len > recv_slot_size_) {
        fail("unexpected receive completion");
        continue;
      }
      uint32_t slot = static_cast<uint32_t>(wc[i].wr_id);
      c_msgs_recv_.fetch_add(1, std::memory_order_relaxed);
      // Delivered even after a failure: RC placed it completely and in
      // order, and it may carry the cursor that makes received data readable.
      on_message(std::span<const uint8_t>(recv_slot(slot), wc[i].byte_len));
      // Reposted only after the callback: it reads the slot in place.
      if (!failed() && !post_recv(slot)) fail("ibv_post_recv failed");
    }
    if (n < 16) break;
  }
  return !failed();
}

bool VerbsLink::drain_messages(const std::function<void(std::span<const uint8_t>)>& on_message) {
  MutexLock lock(drain_mu_);
  return drain_locked(on_message);
}

bool VerbsLink::drain_locked(const std::function<void(std::span<const uint8_t>)>& on_message) {
  while (!pending_.empty()) {
    auto m = pending_.front();
    pending_.pop_front();
    on_message(std::span<const uint8_t>(m));
  }
  {
    // Send errors first: when the peer is gone, the retry-exceeded error of
    // our own WR names the cause, and the receive flushes it triggers do not.
    if (sq_mu_.try_lock()) {
      bool progressed;
      reap_send_locked(&progressed);
      sq_mu_.unlock();
    }
  }
  for (;;) {
    ibv_cq* cq = nullptr;
    void* cq_ctx = nullptr;
    if (ibv_get_cq_event(channel_, &cq, &cq_ctx) != 0) break;  // EAGAIN: no event
    ibv_ack_cq_events(cq, 1);
    armed_ = false;
    c_cq_events_.fetch_add(1, std::memory_order_relaxed);
    smcr::counters().link_wakeups.fetch_add(1, std::memory_order_relaxed);
  }
  for (;;) {
    bool got = false;
    if (!poll_recv(on_message, &got)) return false;
    if (armed_ || failed()) break;
    // An application thread polls the CQ (app_poll): left unarmed, its
    // completions wake nobody; the engine looks again next tick.
    if (app_polling_recently()) {
      rearm_deferred_.store(true, std::memory_order_release);
      break;
    }
    rearm_deferred_.store(false, std::memory_order_release);
    // Re-arm, then poll once more: a completion that landed between the
    // last poll and the re-arm raised no event and would otherwise wait.
    if (ibv_req_notify_cq(recv_cq_, 0) != 0) {
      fail("ibv_req_notify_cq failed");
      return false;
    }
    armed_ = true;
    if (!poll_recv(on_message, &got)) return false;
    if (!got) break;
    armed_ = false;  // harmless double arm; loop to poll until empty
  }
  return !failed();
}

int64_t VerbsLink::rearm_defer_ns() {
  static const int64_t ns = int64_t{1000} * env_long("SMCR_REARM_DEFER_US", kDefaultRearmDeferUs, 0, 1000000);
  return ns;
}

bool VerbsLink::app_polling_recently() const {
  if (app_pollers_.load(std::memory_order_seq_cst) > 0) return true;
  int64_t last = app_polled_ns_.load(std::memory_order_relaxed);
  return last != 0 && sys::now_ns() - last < rearm_defer_ns();
}

bool VerbsLink::app_take_locked(const std::function<bool(std::span<const uint8_t>)>& take, bool* engine_owed) {
  // Messages the engine has yet to deliver come first: nothing overtakes them.
  if (!pending_.empty()) {
    *engine_owed = true;
    return false;
  }
  bool handed = false, stashing = false, got = false;
  bool alive = poll_recv(
      [&](std::span<const uint8_t> m) SMCR_REQUIRES(drain_mu_) {
        if (!stashing && take(m)) {
          handed = true;
          c_app_polled_.fetch_add(1, std::memory_order_relaxed);
          smcr::counters().link_app_polled.fetch_add(1, std::memory_order_relaxed);
          return;
        }
        stashing = true;
        pending_.emplace_back(m.begin(), m.end());
      },
      &got);
  if (stashing || !alive) *engine_owed = true;
  return handed;
}

bool VerbsLink::app_poll(const std::function<bool(std::span<const uint8_t>)>& take, bool* engine_owed) {
  if (failed()) {
    *engine_owed = true;
    return false;
  }
  // The engine (or another thread) is draining: what it finds it delivers.
  if (!drain_mu_.try_lock()) return false;
  bool handed = app_take_locked(take, engine_owed);
  drain_mu_.unlock();
  return handed;
}

bool VerbsLink::app_poll_end(bool will_sleep, const std::function<bool(std::span<const uint8_t>)>& take,
                             bool* engine_owed) {
  if (!will_sleep) {
    // Polling goes on (the thread found something and comes back): the
    // engine keeps the CQ unarmed a while.
    app_polled_ns_.store(sys::now_ns(), std::memory_order_relaxed);
    app_pollers_.fetch_sub(1, std::memory_order_seq_cst);
    return false;
  }
  app_pollers_.fetch_sub(1, std::memory_order_seq_cst);
  // The engine never waits for an application thread while it holds this
  // (a connection it cannot take gets the message in its inbox).
  MutexLock lock(drain_mu_);
  if (failed()) {
    *engine_owed = true;
    return false;
  }
  if (!armed_) {
    if (ibv_req_notify_cq(recv_cq_, 0) != 0) {
      fail("ibv_req_notify_cq failed");
      *engine_owed = true;
      return false;
    }
    armed_ = true;
    rearm_deferred_.store(false, std::memory_order_release);
  }
  // What completed before the arming raised no event.
  return app_take_locked(take, engine_owed);
}

bool VerbsLink::wait_message(uint8_t (&out)[kLinkMessageLen], int timeout_ms) {
  int64_t deadline = sys::now_ms() + std::max(timeout_ms, 0);
  for (;;) {
    {
      MutexLock lock(drain_mu_);
      // Everything drained lands in pending_ (under the lock, so a concurrent
      // drain_messages cannot reorder it); the first one is ours.
      bool ok = drain_locked([this](std::span<const uint8_t> m) SMCR_REQUIRES(drain_mu_) {
        pending_.emplace_back(m.begin(), m.end());
      });
      if (!pending_.empty()) {
        auto first = pending_.front();
        pending_.pop_front();
        if (first.size() != kLinkMessageLen) return false;
        std::memcpy(out, first.data(), kLinkMessageLen);
        return true;
      }
      if (!ok) return false;
    }
    int64_t left = deadline - sys::now_ms();
    if (left <= 0) return false;
    pollfd p{channel_->fd, POLLIN, 0};
    int r = sys::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno != EINTR) return false;
  }
}

VerbsLinkCounters VerbsLink::counters() const {
  VerbsLinkCounters c;
  c.bytes_written = c_bytes_written_.load(std::memory_order_relaxed);
  c.writes_posted = c_writes_.load(std::memory_order_relaxed);
  c.writes_inline = c_writes_inline_.load(std::memory_order_relaxed);
  c.posts = c_posts_.load(std::memory_order_relaxed);
  c.messages_sent = c_msgs_sent_.load(std::memory_order_relaxed);
  c.messages_received = c_msgs_recv_.load(std::memory_order_relaxed);
  c.send_completions = c_send_comps_.load(std::memory_order_relaxed);
  c.sq_full_waits = c_sq_waits_.load(std::memory_order_relaxed);
  c.cq_events = c_cq_events_.load(std::memory_order_relaxed);
  c.app_polled = c_app_polled_.load(std::memory_order_relaxed);
  return c;
}

std::optional<VerbsQpInfo> VerbsLink::query_qp() const {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  if (ibv_query_qp(qp_, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_TIMEOUT |
                                IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_CAP,
                   &ia) != 0)
    return std::nullopt;
  static const char* const kStates[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  VerbsQpInfo q;
  q.state = a.qp_state <= IBV_QPS_ERR ? kStates[a.qp_state] : "?";
  q.path_mtu_code = static_cast<uint8_t>(a.path_mtu);
  q.traffic_class = a.ah_attr.grh.traffic_class;
  q.sgid_index = a.ah_attr.grh.sgid_index;
  q.hop_limit = a.ah_attr.grh.hop_limit;
  q.dest_qpn = a.dest_qp_num;
  q.timeout = a.timeout;
  q.retry_cnt = a.retry_cnt;
  q.rnr_retry = a.rnr_retry;
  q.max_inline_data = max_inline_;
  return q;
}

bool VerbsLink::force_error_for_test() {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  return ibv_modify_qp(qp_, &a, IBV_QP_STATE) == 0;
}

}  // namespace smcr
