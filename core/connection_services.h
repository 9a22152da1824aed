// The engine's side of a connection, as an interface, so that a
// connection depends on no engine (core/engine.h implements it).
#pragma once

namespace smcr {

class Connection;
class LinkGroup;

// What a connection asks of the engine thread: its close timers, the watch
// on its idle TCP socket, and the groups a move to this process makes.
// core/engine.h implements it. A unit test drives a connection without
// the engine thread by installing its own (set_connection_services), and
// calls on_cdc, on_timer and on_tcp_peer_gone itself, as the engine would.
class ConnectionServices {
 public:
  virtual void arm_timer(Connection* c) = 0;
  virtual void watch_tcp(Connection* c, int tcp_fd) = 0;
  virtual void unwatch_tcp(Connection* c) = 0;
  virtual void add_group(LinkGroup* g) = 0;

 protected:
  ~ConnectionServices() = default;
};
// The services every connection of the process uses; null: the engine's.
void set_connection_services(ConnectionServices* s);
ConnectionServices& connection_services();

}  // namespace smcr
