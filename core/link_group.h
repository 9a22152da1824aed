// A link group (RFC 7609 2.2): the links between two peers in one role, and
// the connections multiplexed over them, addressed by alert token. Incoming
// 44-byte messages are dispatched here: CDC to its connection, LLC handled
// by the group.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "core/clc.h"
#include "core/fabric.h"

namespace smcr {

class Connection;

enum class Role : uint8_t { kClient, kServer };

class LinkGroup {
 public:
  LinkGroup(Role role, const clc::PeerId& peer, std::unique_ptr<Link> link, uint8_t link_num)
      : role_(role), peer_(peer), link_(std::move(link)), link_num_(link_num) {}

  Role role() const { return role_; }
  Link* link() { return link_.get(); }
  uint8_t link_num() const { return link_num_; }
  const clc::PeerId& peer() const { return peer_; }

  void add_connection(uint32_t token, Connection* c);
  // A connection finished with the group; the last one ends the group.
  void remove_connection(uint32_t token);

  // Engine thread: one message off the link.
  void dispatch(std::span<const uint8_t> msg);
  // Engine thread: the link failed; abort every connection on it.
  void on_link_failure();
  // Engine thread, last connection gone: the server ends the group with
  // DELETE LINK (all links, orderly) before the link is closed (RFC 3.5.4).
  void terminate();
  bool failed() const { return failed_.load(); }

 private:
  void handle_llc(std::span<const uint8_t> msg);

  Role role_;
  clc::PeerId peer_;
  std::unique_ptr<Link> link_;
  uint8_t link_num_;
  std::mutex mu_;
  std::map<uint32_t, Connection*> conns_;
  std::atomic<bool> failed_{false};
  int users_ = 0;
};

}  // namespace smcr
