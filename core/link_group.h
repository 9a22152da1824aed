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
#include "core/llc.h"
#include "core/mutex.h"
#include "core/ready_set.h"
#include "core/rmb.h"

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
            const LinkIdentity& local = {}, const LinkIdentity& remote = {});
  ~LinkGroup();

  Role role() const { return role_; }
  const clc::PeerId& peer() const { return peer_; }
  bool shm() const;

  // A group with a Linux SMC-Rv2 peer (../shared/spec/SMC-Rv2-LINUX.md): LLC
  // framed as version 2 both ways (Linux sends its group's format and takes
  // either), and Linux's RMBE model, which its CONFIRM LINK announces with
  // flag 0x03: no eyecatcher, cursors from 0. Set before the group is
  // registered; RFC 7609 groups (version 1, eyecatcher) are the default.
  void set_linux_v2() {
    llc_version_ = llc::v2::kVersion;
    rmbe_base_ = 0;
  }
  uint8_t llc_version() const { return llc_version_; }
  // Where each RMBE's data area starts: 4 after RFC 7609's eyecatcher, or 0.
  uint32_t rmbe_base() const { return rmbe_base_; }
  // `m` as this group's peer reads it (every message we send is 44 bytes in
  // either version).
  std::array<uint8_t, llc::kMessageLen> wire(const llc::Message& m) const { return wire_for(llc_version_, m); }
  // The same for a group still being set up (`version` 1 or 2).
  static std::array<uint8_t, llc::kMessageLen> wire_for(uint8_t version, const llc::Message& m);

  // --- links. A group has slots 0..kMaxGroupLinks-1; links are added only
  // while the group is being set up (before Engine::add_group), and a link
  // that goes down stays in its slot, unused, until the group ends.
  // Returns the new link's slot, or -1 when the group is full.
  int add_link(std::unique_ptr<Link> link, uint8_t link_num, const LinkIdentity& local, const LinkIdentity& remote);
  int link_slots() const { return slots_used_.load(std::memory_order_acquire); }
  Link* link_at(int slot) { return links_[static_cast<size_t>(slot)].link.get(); }
  bool link_up(int slot) const { return links_[static_cast<size_t>(slot)].up.load(std::memory_order_acquire); }
  uint8_t link_num_at(int slot) const { return links_[static_cast<size_t>(slot)].num; }
  int slot_of_link_num(uint8_t num) const;
  // The first link that is up (slot 0 when none is): new connections,
  // LLC requests and CLC identities use it.
  int primary_slot() const;
  Link* link() { return link_at(primary_slot()); }
  uint8_t link_num() const { return link_num_at(primary_slot()); }
  const LinkIdentity& local() const { return links_[static_cast<size_t>(primary_slot())].local; }
  const LinkIdentity& remote() const { return links_[static_cast<size_t>(primary_slot())].remote; }
  // A link other than `slot` that is up and has not failed, or -1.
  int alternate_slot(int slot) const;
  // Links up.
  int links_up() const;

  // Registry of live groups, for subsequent contacts (RFC 3.5.2): the server
  // finds its group by the client's Peer ID, the client by the link that an
  // F=0 Accept names. A found group is returned held (see release_hold).
  static void register_group(LinkGroup* g);
  // Process exit (after the connections' process_exit): a Linux kernel
  // peer outlives us, and its close() of each connection waits for our
  // answer to the DELETE RKEY that follows it (2 s, or longer while our
  // vanished QP times out). So each SMC-Rv2 group of this process waits,
  // up to `timeout_ms` in all, for its connections to finish closing and
  // for the peer to delete its RMBs (the engine thread answers), and a
  // group the peer has finished with (no connection, every peer RMB
  // deleted) is ended with DELETE LINK (all links, orderly), as a peer going
  // away ends it. RFC 7609 groups are left to the peer's link-failure
  // handling, as before.
  static void farewell_at_exit(int timeout_ms);
  // Every live group, its links and connections, as "key=value" lines.
  static std::string describe_all();
  // `v2_client_gid`: an SMC-Rv2 client, whose Peer ID may be zero (Linux
  // sends none in a version-2-only Proposal), is known by its Peer ID and
  // RoCE GID together, as Linux's server matches it; null: an RFC 7609 group.
  static LinkGroup* acquire_for_server(const clc::PeerId& client, bool shm, const clc::Gid* v2_client_gid = nullptr);
  // Whether acquire_for_server would find a group now (it may be gone a
  // moment later: a guess for planning, nothing held).
  static bool serves_client(const clc::PeerId& client, bool shm, const clc::Gid* v2_client_gid = nullptr);
  static LinkGroup* acquire_for_client(const clc::PeerId& server, const clc::Gid& gid, const clc::Mac& mac,
                                       uint32_t qpn);
  // Drops a handshake's hold; the group may end when nothing else uses it.
  void release_hold();

  // Re-homing (core/handoff.h), shm only. A group for one connection that
  // changed process, on its own link: never found for a subsequent contact,
  // and it ends with that connection. `like` is the group it came from (in a
  // forked child: the parent's, as copied by fork).
  static LinkGroup* make_rehomed(const LinkGroup& like, std::unique_ptr<Link> link);
  // The same in a program exec'd with such a connection (core/exec_carry.h).
  static LinkGroup* make_carried(Role role, const clc::PeerId& peer, std::unique_ptr<Link> link, uint8_t link_num,
                                 const LinkIdentity& local, const LinkIdentity& remote);
  // Made by make_rehomed or make_carried: its one connection owns the link.
  bool single_connection() const { return rehomed_; }
  // Peer side: moves connection `token` (and our mapping of the peer's RMB
  // it uses, `peer_view`) to a new group on `link`; returns it registered,
  // or null (nothing moved) when the connection cannot move. This group
  // keeps a hold for the caller to release (release_hold) once its answer
  // is posted on our link.
  LinkGroup* rehome_connection(uint32_t token, std::unique_ptr<Link> link, const RemoteRmb& peer_view);
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

  // One LLC request/response exchange from a handshake thread on the primary
  // link (the engine delivers the reply). `attach_fd` travels with the
  // request where the fabric can carry it (shm: the new RMB's memfd). One at
  // a time (RFC 3.5.5.3): `timeout_ms` bounds the whole exchange, the wait
  // for its turn included, so that a handshake queued behind many others
  // ends (Declines) while its peer still waits for it. False on timeout,
  // negative reply or link failure.
  bool llc_exchange(const std::array<uint8_t, 44>& request, int attach_fd, int timeout_ms);
  // --- RMBs (core/rmb.h: these are defined in rmb_group.cc with the pool
  // and the table of the peer's RMBs they work on).
  // The peer's RMB that CONFIRM RKEY announced (and, on shm, the RMB fd that
  // came with it), found by its RToken on link `slot`: taken by the
  // handshake whose Accept/Confirm names it.
  // On shm, a peer RMB that an earlier connection mapped comes back as
  // *mapped (shared with the group, which unmaps it), with the memfd an
  // earlier connection left with it in *fd (or -1).
  bool take_peer_rtoken(int slot, uint32_t rkey, uint64_t vaddr, PeerRmbTokens* tokens, int* fd,
                        RemoteRmb* mapped = nullptr);
  // Our RMB is gone (its connection has ended): tell the peer with DELETE
  // RKEY (RFC 3.5.5.2.2), naming it by its RKey on the primary link. Not
  // awaited: the peer's connection has exchanged C and writes no more.
  void announce_rmb_deleted(const std::array<uint32_t, kMaxGroupLinks>& rkey_by_slot);
  // Releases one connection's RMB registrations on every link (aliases
  // before the owning one, which frees the memory) and its view of the
  // peer's RMB; returns the RKeys the RMB had, by slot (all zero when the
  // group kept the RMB for reuse: nothing to announce).
  //
  // RMB reuse (shm fabric, RFC 3.5.2: RMBs belong to the link group): with
  // `reusable` (the connection ended with both C exchanged, so neither side
  // writes its RMBEs again) our RMB stays registered with the peer (no
  // DELETE RKEY) in a pool for the next connection of its size, and the
  // peer's RMB stays mapped here until the peer deletes it. A subsequent
  // contact on a pooled RMB needs no memfd, no CONFIRM RKEY and no fresh
  // page faults. The memfds go along (ours as local[0].handle, the peer's
  // from *peer_memfd, which is left -1 if the group took it), so that the
  // next connection on them can be carried into an exec too.
  std::array<uint32_t, kMaxGroupLinks> free_rmbs(LocalRmbs* local, RemoteRmbs* peer, bool reusable = false,
                                                 int* peer_memfd = nullptr);
  // A pooled RMB of `size` (its control page cleared), or false.
  bool take_pooled_rmb(uint32_t size, LocalRmbs* local);
  // Before a CONFIRM RKEY announces a new RMB of ours: the peer keeps at
  // most rmb::PeerTable::kMax of them (RFC 7609 8.2) and refuses the next.
  // Each one it has is a connection's or a handshake's (users_) or pooled;
  // acquire_for_server bounds the first, but pooled RMBs of sizes no
  // handshake asks for any more (sizes shrink as connections grow,
  // rmb::size_under_budget) would fill its table. Deletes the oldest pooled
  // ones until the new one fits; the DELETE RKEYs go first on the link the
  // CONFIRM RKEY follows, so the peer has forgotten them when it comes.
  void make_room_to_announce();
  size_t pooled_rmbs();
  // The peer's first-contact RMB (named in CLC and ADD LINK CONTINUATION);
  // on shm with its mapping, which the group then owns.
  void note_peer_rmb(const PeerRmbTokens& tokens, const RemoteRmb* mapping = nullptr);
  // shm: the mapping of a peer RMB that take_peer_rtoken gave as an fd; the
  // group owns it from now on and unmaps it when the peer deletes the RMB or
  // the group ends.
  void adopt_peer_mapping(const RemoteRmb& m);
  // Gives back a mapping take_peer_rtoken lent (a handshake that failed).
  void return_peer_rmb(RemoteRmb* m);

  // Engine thread: one message off the link in `slot`.
  void dispatch(int slot, std::span<const uint8_t> msg);
  // An application thread waiting on `link` (the one in `slot`) polls its
  // receive queue itself (Link::app_poll): the CDCs it finds are delivered
  // on that thread, as dispatch delivers them; anything else (LLC, a
  // failover validation, a failure) is left to the engine, which is woken.
  // True when a CDC was delivered.
  bool app_poll(int slot, Link* link);
  void app_poll_end(int slot, Link* link, bool will_sleep);
  // Engine thread, periodically: RFC 4.5.3 keepalive of one link. A link idle
  // for `interval_ms` gets a TEST LINK; no (or a wrong) reply within the LLC
  // timeout means the link has failed. Returns false when it has.
  bool keepalive_tick(int slot, int64_t now_ms, int64_t interval_ms);
  // Engine thread: the link in `slot` failed. Its connections move to a
  // surviving link (RFC 4.6) and the peer is told with DELETE LINK; with no
  // survivor every connection is reset.
  void on_link_failure(int slot);
  // Engine thread, periodically: a server's group without users retires
  // once it has been idle for SMCR_LGR_LINGER_MS (default 10 s; kernel SMC
  // keeps them 10 min), so that a client reconnecting meanwhile makes a
  // subsequent contact instead of a new group. True if it retired.
  bool retire_if_idle(int64_t now_ms);
  static int64_t linger_ms();
  // Engine thread, last connection gone: the server ends the group with
  // DELETE LINK (all links, orderly) before the links are closed (RFC 3.5.4).
  void terminate();
  // Every link is down.
  bool failed() const { return failed_.load(); }

  // Ready sets (core/ready_set.h). Writer side: the peer's set `id`, its
  // page and bell (a socket), once both have arrived; false otherwise (the writer
  // then posts its CDC on the link). Lock-free: installed once, kept until
  // the group ends (connections that use it hold the group).
  bool peer_ready_set(uint32_t id, uint8_t** page, int* bell_fd) const;
  // Reader side: a fresh id for a set of ours on this group (never reused
  // within the group's life); false once kMaxPerGroup are used up.
  bool next_ready_set_id(uint32_t* id);
  // Tells this group from any other of the process, past or future (its
  // address may be reused).
  uint64_t serial() const { return serial_; }

 private:
  struct GroupLink {
    std::unique_ptr<Link> link;
    uint8_t num = 0;
    LinkIdentity local;
    LinkIdentity remote;
    std::atomic<bool> up{false};
    // Keepalive state, engine thread only (last_rx_ms also from app_poll).
    std::atomic<int64_t> last_rx_ms{0};
    int64_t test_link_deadline_ms = 0;  // 0: no TEST LINK outstanding
    std::array<uint8_t, 16> test_link_data{};
    bool test_link_mismatch = false;
  };
  // The RMBs this group holds at its end (the peer's mappings, our pool).
  void free_all_rmbs();

  void handle_llc(int slot, std::span<const uint8_t> msg);
  // A decoded CDC to its connection (or held for one being set up).
  void deliver_cdc(const cdc::Message& m, std::span<const uint8_t> msg, int bell);
  // app_poll's filter: a CDC this thread may deliver; false leaves it to the engine.
  bool take_from_app(std::span<const uint8_t> msg);
  // After an application thread's poll: the link heard from (keepalive),
  // the engine woken for what was left to it.
  void after_app_poll(int slot, bool handed, bool engine_owed);
  // Takes the link in `slot` down (engine thread). notify_peer: send DELETE
  // LINK for it on a survivor.
  void link_down(int slot, bool notify_peer, const char* why);
  // With mu_ held: ends the group if nothing uses it and it may end.
  void maybe_retire_locked() SMCR_REQUIRES(mu_);
  void post_llc(int slot, const std::array<uint8_t, 44>& msg);
  void fail_all_links();

  Role role_;
  clc::PeerId peer_;
  uint8_t llc_version_ = 1;
  uint32_t rmbe_base_ = 4;
  uint64_t owner_generation_;  // a forked child never uses its parent's groups
  std::array<GroupLink, kMaxGroupLinks> links_;
  std::atomic<int> slots_used_{0};  // published after the slot is filled (add_link)
  Mutex mu_;
  std::map<uint32_t, Connection*> conns_ SMCR_GUARDED_BY(mu_);
  std::atomic<bool> failed_{false};
  bool retired_ SMCR_GUARDED_BY(mu_) = false;
  bool rehomed_ = false;  // make_rehomed: one connection, no subsequent contacts
  int users_ SMCR_GUARDED_BY(mu_) = 0;  // connections + handshake holds
  rmb::PeerTable peer_rmbs_ SMCR_GUARDED_BY(mu_);
  rmb::LocalPool rmb_pool_ SMCR_GUARDED_BY(mu_);
  int64_t idle_since_ms_ SMCR_GUARDED_BY(mu_) = 0;  // server: users_ reached 0 (0: in use)
  std::map<uint32_t, std::vector<std::array<uint8_t, 44>>> early_cdcs_ SMCR_GUARDED_BY(mu_);
  // Readiness sockets (core/cdc_mem.h) that arrived before their connection.
  std::map<uint32_t, int> early_bells_ SMCR_GUARDED_BY(mu_);
  // The peer's ready sets, by id (peer_ready_set): the engine installs the
  // bell, then the page; writers read them without the group's lock.
  struct PeerReadySet {
    std::atomic<uint8_t*> page{nullptr};
    std::atomic<int> bell_fd{-1};
  };
  std::array<PeerReadySet, readyset::kMaxPerGroup> peer_ready_sets_;
  void install_peer_ready_set(const readyset::Announcement& a, int fd);
  std::atomic<uint32_t> ready_set_ids_used_{0};
  const uint64_t serial_;
  bool draining_others_ = false;  // engine thread: a failover validation is draining the other links

  // One LLC exchange at a time (RFC 3.5.5.3): the turn is taken under mu_
  // and waited for with a deadline (llc_exchange).
  bool exchange_busy_ SMCR_GUARDED_BY(mu_) = false;
  std::condition_variable exchange_cv_;  // a reply came, the group failed, or the turn is free
  uint8_t exchange_type_ SMCR_GUARDED_BY(mu_) = 0;  // LLC type awaited, 0 = none
  bool exchange_done_ SMCR_GUARDED_BY(mu_) = false;
  bool exchange_ok_ SMCR_GUARDED_BY(mu_) = false;
};

}  // namespace smcr
