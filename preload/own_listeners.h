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
// served and the connection is SMC-R. For a blocking listener, connect()
// waits up to 20 ms for such a thread (one started just before connect()
// to accept, as a test does); an event loop's listener is non-blocking and
// gets no grace. Only this process's threads count: in a forked child
// (nginx's workers) the listener may be served by another process or by
// the connecting thread itself, and its connects go plain TCP.
#pragma once

#include <sys/socket.h>

namespace smcr::preload::own {

// listen() made `fd` an SMC-R listener of this process.
void listening(int fd);

// A blocking or non-blocking accept() on listener `fd` in progress.
class Accepting {
 public:
  explicit Accepting(int fd);
  ~Accepting();
  Accepting(const Accepting&) = delete;
  Accepting& operator=(const Accepting&) = delete;

 private:
  int slot_;
};

// connect() to `addr`: is it one of this process's SMC-R listeners that no
// other thread is accepting on (after a short grace)? Then the connection
// must stay plain TCP.
bool unattended(const sockaddr* addr, socklen_t len);

}  // namespace smcr::preload::own
