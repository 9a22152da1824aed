// The record of a connection handed to a program spawned from here
// (core/exec_carry.h): sent and received over a diagnostics connection.
#include "core/exec_carry.h"

#include <poll.h>

#include <cstring>

#include "core/sys.h"

namespace smcr::exec_carry {

bool send_record(int sock, const Record& r) {
  Record copy = r;
  int fds[sys::kMaxPassedFds];
  size_t count = 0;
  for (int32_t* fd : descriptors(&copy))
    if (*fd >= 0) fds[count++] = *fd;
  unsigned char bytes[1 + sizeof(Record)];
  bytes[0] = static_cast<unsigned char>(kReplyRecord);
  std::memcpy(bytes + 1, &copy, sizeof copy);
  // A stream socket: the descriptors go with the first bytes; the rest may
  // take more than one send.
  size_t sent = 0;
  while (sent < sizeof bytes) {
    ssize_t n = sent == 0 ? sys::sendmsg_with_fds(sock, bytes, sizeof bytes, fds, count, 0)
                          : sys::send(sock, bytes + sent, sizeof bytes - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool receive_record(int sock, Record* r, int timeout_ms, const int* first_fds, size_t first_count) {
  unsigned char bytes[sizeof(Record)];
  int fds[sys::kMaxPassedFds];
  size_t count = 0, got = 0;
  for (size_t i = 0; i < first_count; ++i) {
    if (count < sys::kMaxPassedFds) fds[count++] = first_fds[i];
    else sys::close(first_fds[i]);
  }
  int64_t deadline = sys::now_ms() + timeout_ms;
  while (got < sizeof bytes) {
    pollfd p{sock, POLLIN, 0};
    int left = static_cast<int>(deadline - sys::now_ms());
    if (left <= 0 || sys::poll(&p, 1, left) <= 0) break;
    size_t k = 0;
    ssize_t n = sys::recv_with_fds(sock, bytes + got, sizeof bytes - got, fds + count, sys::kMaxPassedFds - count, &k,
                                   MSG_DONTWAIT);
    count += k;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  Record in;
  if (got == sizeof bytes) std::memcpy(static_cast<void*>(&in), bytes, sizeof in);
  bool ok = got == sizeof bytes && in.magic == kMagic && in.bytes == sizeof(Record);
  size_t next = 0;
  if (ok) {
    // The fields that were >= 0 at the sender take the descriptors in order.
    for (int32_t* fd : descriptors(&in)) {
      if (*fd < 0) continue;
      *fd = next < count ? fds[next] : -1;
      ++next;
    }
  }
  if (!ok || next != count) {
    for (size_t i = 0; i < count; ++i) sys::close(fds[i]);
    return false;
  }
  if (in.n_app_fds > kMaxAppFds) in.n_app_fds = 0;
  *r = in;
  return true;
}

}  // namespace smcr::exec_carry
