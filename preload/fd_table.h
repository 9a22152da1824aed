// fd number -> SMC-R connection, lock-free. This lookup is all that a non-SMC
// fd pays in every interposed call: two atomic loads, no syscall, no lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "core/connection.h"

namespace smcr::preload {

enum FdKind : uint8_t {
  kFdUnknown = 0,
  kFdTcp = 1,          // AF_INET/AF_INET6 stream socket created through us
  kFdSmcListener = 2,  // listener opted in to SMC-R
  kFdListenerNoBpf = 3,  // listener that could not opt in: the eBPF program is not loaded
  kFdPolicyListener = 4,  // listener the operator's policy keeps on TCP
  kFdAccepting = 5,    // accepted as SMC-R, the Confirm maybe not read yet (preload/takeover.h)
  kFdLateConnect = 6,  // a non-blocking connect() gave SMC-R up; a Decline may be owed (preload/late_connect.h)
  kFdExecInherited = 7,  // a handed-over connection inherited across exec (preload/exec_inherit.h)
  kFdTakePending = 8,    // inherited across a forked child's exec, its owner's still: taken on first use (exec_inherit.h)
};

enum FdFlag : uint8_t {
  // A kFdTcp socket registered in an epoll set before it was connected: the
  // registration must move with the fd number if the socket becomes SMC-R
  // (preload/epoll.h, epoll_note_before_takeover).
  kFdEpollBeforeTakeover = 1,
  // A kFdTcp socket that stays TCP for good (connected as TCP, or accepted
  // as TCP): no registration of it needs following.
  kFdSettledTcp = 2,
  // A non-blocking connect() that became SMC-R inside the call returned
  // EINPROGRESS, as TCP's does: the next connect() returns 0, then EISCONN.
  kFdConnectUnreported = 4,
  // A kFdTcp socket whose client CLC handshake runs inside connect() on some
  // thread: its bytes are CLC messages, not the application's, and the
  // number may change hands at any moment. Another thread's call on it
  // (a reader woken by the Accept's arrival) waits for the handshake's end.
  kFdClcInline = 8,
  // A socket created through us (or accepted from such a listener) on which
  // the application never set SO_LINGER, SO_RCVTIMEO, SO_SNDTIMEO or
  // SO_OOBINLINE: taking it over need not ask the kernel for them (four
  // system calls per connection). Absent means "ask".
  kFdDefaultOptions = 16,
};

class FdTable {
 public:
  static constexpr int kChunkBits = 12;
  static constexpr int kChunkSize = 1 << kChunkBits;
  static constexpr int kChunks = 1024;  // 4M fds
  static constexpr int kMaxFd = kChunkSize * kChunks;

  // A referenced connection for fd, or null. Caller unrefs.
  Connection* get(int fd) {
    Entry* e = find(fd);
    if (!e) return nullptr;
    for (;;) {
      Connection* c = e->conn.load(std::memory_order_acquire);
      if (!c) return nullptr;
      if (!c->try_ref()) return nullptr;
      if (e->conn.load(std::memory_order_acquire) == c) return c;
      c->unref();
    }
  }
  bool has_conn(int fd) {
    Entry* e = find(fd);
    return e && e->conn.load(std::memory_order_relaxed);
  }
  // Installs c (its reference is the table's) and returns what was there.
  Connection* set(int fd, Connection* c) {
    Entry* e = find_or_create(fd);
    return e ? e->conn.exchange(c, std::memory_order_acq_rel) : nullptr;
  }
  // Removes and returns the table's reference, or null.
  Connection* take(int fd) {
    Entry* e = find(fd);
    return e ? e->conn.exchange(nullptr, std::memory_order_acq_rel) : nullptr;
  }
  uint8_t kind(int fd) {
    Entry* e = find(fd);
    return e ? e->kind.load(std::memory_order_relaxed) : static_cast<uint8_t>(kFdUnknown);
  }
  void set_kind(int fd, uint8_t k) {
    Entry* e = k == kFdUnknown ? find(fd) : find_or_create(fd);
    if (!e) return;
    e->kind.store(k, std::memory_order_relaxed);
    e->flags.store(0, std::memory_order_relaxed);
    e->offers.store(0, std::memory_order_relaxed);
    e->offers_matched.store(0, std::memory_order_relaxed);
    if (k == kFdUnknown) {  // the number is free: forget what its socket asked for
      e->rcvbuf.store(0, std::memory_order_relaxed);
      e->sndbuf.store(0, std::memory_order_relaxed);
    }
  }
  // An opted-in listener's bpfopt::offer_slot (0: none) and the port's
  // offer count it has matched: its baseline (bpfopt::offers_counted before
  // its first SYN-ACK) plus its accepted children that had the option.
  // set_kind clears both.
  struct Offers {
    uint32_t slot = 0;
    uint64_t matched = 0;
  };
  Offers offers(int fd) {
    Entry* e = find(fd);
    if (!e) return {};
    return {e->offers.load(std::memory_order_relaxed), e->offers_matched.load(std::memory_order_acquire)};
  }
  void set_offers(int fd, uint32_t slot, uint64_t baseline) {
    if (Entry* e = find(fd)) {
      e->offers_matched.store(baseline, std::memory_order_relaxed);
      e->offers.store(slot, std::memory_order_release);
    }
  }
  void offer_matched(int fd) {
    if (Entry* e = find(fd)) e->offers_matched.fetch_add(1, std::memory_order_acq_rel);
  }
  // Per-number marks of a TCP socket that may still be taken over (FdFlag);
  // set_kind clears them.
  uint8_t flags(int fd) {
    Entry* e = find(fd);
    return e ? e->flags.load(std::memory_order_relaxed) : 0;
  }
  void add_flags(int fd, uint8_t f) {
    if (Entry* e = find_or_create(fd)) e->flags.fetch_or(f, std::memory_order_relaxed);
  }
  // Clears `f` and returns the flags as they were.
  uint8_t clear_flags(int fd, uint8_t f) {
    Entry* e = find(fd);
    return e ? e->flags.fetch_and(static_cast<uint8_t>(~f), std::memory_order_relaxed) : 0;
  }
  // Buffer sizes the application asked for with SO_RCVBUF / SO_SNDBUF
  // before the connection existed (bytes as the kernel granted them, 0 =
  // not set): they size the RMB and cap the send window.
  struct BufferRequest {
    uint32_t rcvbuf = 0, sndbuf = 0;
  };
  BufferRequest buffers(int fd) {
    Entry* e = find(fd);
    if (!e) return {};
    return {e->rcvbuf.load(std::memory_order_relaxed), e->sndbuf.load(std::memory_order_relaxed)};
  }
  void set_buffers(int fd, BufferRequest b) {
    Entry* e = (b.rcvbuf || b.sndbuf) ? find_or_create(fd) : find(fd);
    if (!e) return;
    e->rcvbuf.store(b.rcvbuf, std::memory_order_relaxed);
    e->sndbuf.store(b.sndbuf, std::memory_order_relaxed);
  }

  template <typename F>
  void for_each_conn(F&& f) {
    for (int i = 0; i < kChunks; ++i) {
      Entry* chunk = chunks_[i].load(std::memory_order_acquire);
      if (!chunk) continue;
      for (int j = 0; j < kChunkSize; ++j)
        if (chunk[j].conn.load(std::memory_order_acquire)) f((i << kChunkBits) | j);
    }
  }

 private:
  struct Entry {
    std::atomic<Connection*> conn{nullptr};
    std::atomic<uint8_t> kind{kFdUnknown};
    std::atomic<uint8_t> flags{0};
    std::atomic<uint32_t> rcvbuf{0}, sndbuf{0};
    std::atomic<uint32_t> offers{0};  // a listener's bpfopt::offer_slot
    std::atomic<uint64_t> offers_matched{0};
  };
  Entry* find(int fd) {
    if (fd < 0 || fd >= kMaxFd) return nullptr;
    Entry* chunk = chunks_[fd >> kChunkBits].load(std::memory_order_acquire);
    return chunk ? &chunk[fd & (kChunkSize - 1)] : nullptr;
  }
  Entry* find_or_create(int fd) {
    if (fd < 0 || fd >= kMaxFd) return nullptr;
    auto& slot = chunks_[fd >> kChunkBits];
    Entry* chunk = slot.load(std::memory_order_acquire);
    if (!chunk) {
      auto* fresh = static_cast<Entry*>(calloc(kChunkSize, sizeof(Entry)));  // zero = empty entries
      if (!fresh) return nullptr;
      if (!slot.compare_exchange_strong(chunk, fresh, std::memory_order_acq_rel)) free(fresh);
      else chunk = fresh;
    }
    return &chunk[fd & (kChunkSize - 1)];
  }
  std::atomic<Entry*> chunks_[kChunks] = {};
};

FdTable& fd_table();

}  // namespace smcr::preload
