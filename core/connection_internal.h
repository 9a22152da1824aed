// What the files of a Connection (core/connection*.cc) share: constants of
// the RMBE layout and data path, and helpers for iovecs and waits. Private
// to core/connection*.cc.
#pragma once

#include <poll.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/sys.h"

namespace smcr::connection_internal {

inline constexpr uint8_t kRmbeEyecatcher[4] = {0xE2, 0xD4, 0xC3, 0xD9};

// With CDCs through memory a cursor update costs a cache line, so a large
// copy publishes its cursor every this many bytes: the peer copies the
// first part out (or refills the freed part) while we copy the next, as
// TCP's sender and receiver overlap on loopback, instead of each side
// waiting for the other's whole window-sized copy.
inline constexpr uint32_t kStreamChunk = 64 * 1024;
// How long a blocking read may wait for a blocked writer's refill once it
// has bytes (Connection::fill_more_locked).
inline constexpr int kFillWaitMs = 2;

inline size_t iov_total(const iovec* iov, int n) {
  size_t t = 0;
  for (int i = 0; i < n; ++i) t += iov[i].iov_len;
  return t;
}

// Copies between a ring region and an iovec at a running iovec offset.
class IovCursor {
 public:
  IovCursor(const iovec* iov, int n) : iov_(iov), n_(n) {}
  // dir_out: ring -> iov; else iov -> ring
  void copy(uint8_t* ring, size_t len, bool ring_to_iov) {
    while (len > 0 && i_ < n_) {
      size_t room = iov_[i_].iov_len - off_;
      size_t k = std::min(room, len);
      uint8_t* p = static_cast<uint8_t*>(iov_[i_].iov_base) + off_;
      if (ring_to_iov) std::memcpy(p, ring, k);
      else std::memcpy(ring, p, k);
      ring += k;
      len -= k;
      off_ += k;
      if (off_ == iov_[i_].iov_len) {
        ++i_;
        off_ = 0;
      }
    }
  }
  // Hands out the next chunk of the iovec (for writes through the Link).
  bool next_chunk(size_t max, const uint8_t** p, size_t* k) {
    while (i_ < n_ && off_ == iov_[i_].iov_len) {
      ++i_;
      off_ = 0;
    }
    if (i_ >= n_) return false;
    *k = std::min(max, iov_[i_].iov_len - off_);
    *p = static_cast<const uint8_t*>(iov_[i_].iov_base) + off_;
    off_ += *k;
    return true;
  }

 private:
  const iovec* iov_;
  int n_;
  int i_ = 0;
  size_t off_ = 0;
};

inline int wait_fd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  return sys::poll(&p, 1, timeout_ms);
}

// SO_RCVTIMEO / SO_SNDTIMEO bound a blocking call's waiting, all of it, as
// TCP's do (the kernel takes what each wait used off the call's budget): a
// wake-up that brings too little to return (MSG_WAITALL, a window opened
// by a few bytes) must not start the timeout again. The clock starts at
// the first wait; calls that never wait never read it.
class CallTimeout {
 public:
  explicit CallTimeout(int timeout_ms) : timeout_ms_(timeout_ms) {}
  int timeout_ms() const { return timeout_ms_; }
  // The next wait's limit: -1 (none), or what is left; 0 once spent.
  int next_wait_ms() {
    if (timeout_ms_ < 0) return -1;
    int64_t now = sys::now_ms();
    if (deadline_ms_ < 0) deadline_ms_ = now + timeout_ms_;
    return static_cast<int>(std::max<int64_t>(deadline_ms_ - now, 0));
  }

 private:
  int timeout_ms_;
  int64_t deadline_ms_ = -1;
};

// A non-blocking call (or one whose timeout ran out) that cannot go on:
// what it moved, or EAGAIN if nothing.
inline ssize_t done_or_eagain(size_t done) {
  if (done) return static_cast<ssize_t>(done);
  errno = EAGAIN;
  return -1;
}

// Would the kernel restart a socket call that a signal interrupted (see
// connection.cc)?
bool restart_after_signal(int timeout_ms);
// A data call on a connection of the parent process (fork): EOPNOTSUPP.
ssize_t refuse_foreign(uint32_t token);

}  // namespace smcr::connection_internal
