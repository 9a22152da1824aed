// A link group (RFC 7609 2.2): the links between two peers in one role, and
// the connections multiplexed over them, addressed by alert token. Incoming
// 44-byte messages are dispatched here: CDC to its connection, LLC handled
// by the group.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/clc.h"
#include "core/fabric.h"

namespace smcr {

class Connection;

enum class Role : uint8_t { kClient, kServer };

// How each end names the group's link in CLC (Accept/Confirm of subsequent
// contacts must name an active link of the group, RFC 3.5.2).
struct LinkIdentity {
  clc::Gid gid{};
  clc::Mac mac{};
  uint32_t qpn = 0;
  uint8_t mtu_code = 0;
};

class LinkGroup {
 public:
  LinkGroup(Role role, const clc::PeerId& peer, std::unique_ptr<Link> link, uint8_t link_num,
            const LinkIdentity& local = {}, const LinkIdentity& remote = {})
      : role_(role), peer_(peer), link_(std::move(link)), link_num_(link_num), local_(local), remote_(remote) {}
  ~LinkGroup();

  Role role() const { return role_; }
  Link* link() { return link_.get(); }
  uint8_t link_num() const { return link_num_; }
  const clc::PeerId& peer() const { return peer_; }
  const LinkIdentity& local() const { return local_; }
  const LinkIdentity& remote() const { return remote_; }
  bool shm() const;

  // Registry of live groups, for subsequent contacts (RFC 3.5.2): the server
  // finds its group by the client's Peer ID, the client by the link that an
  // F=0 Accept names. A found group is returned held (see release_hold).
  static void register_group(LinkGroup* g);
  // Every live group, its link and connections, as "key=value" lines.
  static std::string describe_all();
  static LinkGroup* acquire_for_server(const clc::PeerId& client, bool shm);
  static LinkGroup* acquire_for_client(const clc::PeerId& server, const clc::Gid& gid, const clc::Mac& mac,
                                       uint32_t qpn);
  // Drops a handshake's hold; the group may end when nothing else uses it.
  void release_hold();
  size_t connection_count();

  // A subsequent contact's peer may send data as soon as it has sent (client)
  // or processed (server) the Confirm, before our connection exists: CDCs for
  // an expected token are held and delivered by add_connection (RFC 3.5.2.4).
  void expect_token(uint32_t token);
  void forget_token(uint32_t token);
  void add_connection(uint32_t token, Connection* c);
  // A connection finished with the group. A server's group ends with its last
  // user (it decides, RFC 3.5.4); a client's lasts until the server deletes it.
  void remove_connection(uint32_t token);

  // One LLC request/response exchange from a handshake thread (the engine
  // delivers the reply). `attach_fd` travels with the request where the
  // fabric can carry it (shm: the new RMB's memfd). False on timeout,
  // negative reply or link failure.
  bool llc_exchange(const std::array<uint8_t, 44>& request, int attach_fd, int timeout_ms);
  // RTokens the peer announced with CONFIRM RKEY (and, on shm, the RMB fd
  // that came with it); taken by the handshake whose Accept/Confirm names it.
  bool take_peer_rtoken(uint32_t rkey, uint64_t vaddr, int* fd);
  // Our RMB with `rkey` is gone (its connection has ended): tell the peer
  // with DELETE RKEY (RFC 3.5.5.2.2). Not awaited: the peer's connection has
  // exchanged C and writes no more; the reply is only logged.
  void announce_rmb_deleted(uint32_t rkey);
  // The peer's first-contact RMB (named in CLC, not by CONFIRM RKEY).
  void note_peer_rkey(uint32_t rkey);

  // Engine thread: one message off the link.
  void dispatch(std::span<const uint8_t> msg);
  // Engine thread, periodically: RFC 4.5.3 keepalive. A link idle for
  // `interval_ms` gets a TEST LINK; no (or a wrong) reply within the LLC
  // timeout means the link has failed. Returns false when it has.
  bool keepalive_tick(int64_t now_ms, int64_t interval_ms);
  // Engine thread: the link failed; abort every connection on it.
  void on_link_failure();
  // Engine thread, last connection gone: the server ends the group with
  // DELETE LINK (all links, orderly) before the link is closed (RFC 3.5.4).
  void terminate();
  bool failed() const { return failed_.load(); }

 private:
  void handle_llc(std::span<const uint8_t> msg);
  // With mu_ held: ends the group if nothing uses it and it may end.
  void maybe_retire_locked();

  Role role_;
  clc::PeerId peer_;
  std::unique_ptr<Link> link_;
  uint8_t link_num_;
  LinkIdentity local_;
  LinkIdentity remote_;
  std::mutex mu_;
  std::map<uint32_t, Connection*> conns_;
  std::atomic<bool> failed_{false};
  bool retired_ = false;
  int users_ = 0;  // connections + handshake holds
  std::map<std::pair<uint32_t, uint64_t>, int> peer_rtokens_;  // (rkey, vaddr) -> shm fd or -1
  std::map<uint32_t, std::vector<std::array<uint8_t, 44>>> early_cdcs_;
  std::set<uint32_t> peer_rkeys_in_use_;  // claimed by a connection, until DELETE RKEY

  // Keepalive state, engine thread only.
  int64_t last_rx_ms_ = 0;
  int64_t test_link_deadline_ms_ = 0;  // 0: no TEST LINK outstanding
  std::array<uint8_t, 16> test_link_data_{};
  bool test_link_mismatch_ = false;

  std::mutex exchange_mu_;  // one LLC exchange at a time (RFC 3.5.5.3)
  std::condition_variable exchange_cv_;
  uint8_t exchange_type_ = 0;  // LLC type awaited, 0 = none (guarded by mu_)
  bool exchange_done_ = false;
  bool exchange_ok_ = false;
};

}  // namespace smcr
