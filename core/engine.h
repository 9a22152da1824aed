// The per-process engine thread: it waits (epoll, no polling when idle) on
// every link's notification fd and the shared-memory rendezvous socket,
// dispatches CDC/LLC messages, runs close timers, and tears down link groups.
// Application threads never wait for it: they copy data themselves and block
// on their own fd (see connection.h).
#pragma once

#include <cstdint>

namespace smcr {

class LinkGroup;
class Connection;

class Engine {
 public:
  // Starts the thread on first use (again in a forked child).
  static Engine& get();
  void add_group(LinkGroup* g);
  // Called when the group's last connection is gone: the engine stops
  // watching it and frees it on its own thread.
  void retire_group(LinkGroup* g);
  void arm_timer(Connection* c);
  // Watches the connection's idle TCP socket for the peer's FIN/RST (its
  // process died or its kernel reset the connection); unwatch_tcp before the
  // socket is closed.
  void watch_tcp(Connection* c, int tcp_fd);
  void unwatch_tcp(Connection* c);
  // Makes sure the shared-memory rendezvous listener is being served.
  bool serve_shm_rendezvous();

 private:
  Engine() = default;
  void start();
  void loop();
  struct Impl;
  Impl* impl_ = nullptr;
};

}  // namespace smcr
