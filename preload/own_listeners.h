// This process's SMC-R listeners, so that a connect() to one of them does
// not wait in the CLC for an accept() that only the connecting thread would
// make.
//
// The server half of our CLC runs in accept() (Linux runs it in the kernel,
// whether or not the application has called accept()). A program that
// connects to its own listener and only then accepts, in the same thread
// (a TCP socketpair, a test's client and server side by side, an event loop
// serving and calling itself), would hold connect() until the CLC timeout,
// then fail it. Such a connect() goes plain TCP instead (no option on its
// SYN: the accepted side follows), unless another thread of this process is
// already blocked in accept() on that listener: then the handshake is
// served and the connection is SMC-R (so is one asleep in poll, select or
// epoll_wait with the listener in its set: an event loop in another thread). For a blocking listener, connect()
// waits up to 20 ms for such a thread (one started just before connect()
// to accept, as a test does); an event loop's listener is non-blocking and
// gets no grace. Only this process's threads count: in a forked child
// (nginx's workers) the listener may be served by another process or by
// the connecting thread itself, and its connects go plain TCP.
#pragma once

#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>

#include <cstdint>

namespace smcr::preload::own {

// listen() made `fd` an SMC-R listener of this process, bound to `ss`
// (its getsockname() after listen()).
void listening(int fd, const sockaddr_storage& ss);

// Counts the calling thread, for its lifetime, as serving this process's
// SMC-R listeners: in accept() on one, or asleep in poll/select/epoll_wait
// with one in the set for reading (it accepts when the connection comes).
class Serving {
 public:
  Serving() = default;
  ~Serving();
  Serving(const Serving&) = delete;
  Serving& operator=(const Serving&) = delete;
  void listener(int fd);                         // accept() on fd
  void poll_set(const struct pollfd* fds, unsigned long n);
  void select_set(int nfds, const fd_set* readfds);
  void epoll_set(int epfd);                      // what epoll_watch recorded

 private:
  void count(int slot);
  static constexpr int kMax = 8;  // listeners counted per wait
  int slots_[kMax];
  int n_ = 0;
};

// epoll_ctl(epfd, op, fd, events) succeeded on one of our listeners.
void epoll_watch(int epfd, int op, int fd, uint32_t events);
// `fd` was closed (or replaced by dup2): as an epoll set it watches nothing.
void forget(int fd);

// connect() to `addr`: is it one of this process's SMC-R listeners that no
// other thread is accepting on (after a short grace)? Then the connection
// must stay plain TCP.
bool unattended(const sockaddr* addr, socklen_t len);

}  // namespace smcr::preload::own
