// RMBs (RFC 7609 2.4, 3.5.2): everything about them in one place.
//
// - Sizes and MTU codes as CLC carries them (rmb.cc; the decoders use these,
//   and nothing else here, so the fuzz targets build rmb.cc alone).
// - A link group's RMBs (rmb_group.cc): RMBs belong to the group, not to a
//   connection. Ours that an ended connection left stay registered with the
//   peer in a LocalPool for the next connection; the peer's that CLC, CONFIRM
//   RKEY or ADD LINK CONTINUATION announced are kept in a PeerTable until its
//   DELETE RKEY. Neither class locks: the group's mutex guards both.
// - A connection's RMBs (ConnRmbs) through the handshake and the end of the
//   connection: allocated or taken from the pool, registered on every link,
//   announced, claimed, freed or pooled (the LinkGroup members declared in
//   link_group.h's "RMBs" section, defined in rmb_group.cc).
//
// The memory itself is the fabric's: Link::alloc_rmb (shm: a sealed memfd
// with a control page, core/fabric_shm.cc; verbs: registered pages,
// core/fabric_verbs.cc), Link::register_alias, Link::free_local_rmb.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/fabric.h"

namespace smcr {

class LinkGroup;

namespace rmb {

// RMB/RMBE sizing (RFC 7609 A.2.3 Bsize): size = 2^(x+14) bytes, x in 0..5
// (16 KiB .. 512 KiB). The 4-byte RMBE eyecatcher is counted inside the size.
inline constexpr uint32_t kMinSize = 16 * 1024;
inline constexpr uint32_t kMaxSize = 512 * 1024;
inline constexpr uint8_t kMaxCode = 5;

// Size in bytes for a Bsize code; nullopt for codes 6..15 (beyond RFC maximum).
std::optional<uint32_t> decode_size(uint8_t code);
// Smallest code whose size is >= bytes (rounding up, RFC 4.1); bytes above
// 512 KiB are capped at code 5, bytes below 16 KiB give code 0.
uint8_t encode_size(uint32_t bytes);

// The size of a new connection's RMB when `live` connections already have
// one and their RMBs should fit in `budget` bytes at `wanted` each: the
// largest RFC size <= budget / live, between 16 KiB and `wanted` (budget 0:
// always `wanted`). As TCP's buffers shrink under memory pressure: a
// thousand connections do not each need the window of a bulk stream, and
// every RMB page is faulted in once, on its first lap (writer and reader
// each), so that a small RMB is also a cheap one for a connection that
// moves little.
uint32_t size_under_budget(uint32_t wanted, size_t live, size_t budget);

// QP MTU codes (A.2.3): 1=256 .. 5=4096; others reserved.
std::optional<uint32_t> decode_mtu(uint8_t code);
std::optional<uint8_t> encode_mtu(uint32_t bytes);

}  // namespace rmb

// One RMB as each link of the group registers it (RKeys are per link).
using LocalRmbs = std::array<LocalRmb, kMaxGroupLinks>;
using RemoteRmbs = std::array<RemoteRmb, kMaxGroupLinks>;

// The peer's RMB as each link of the group names it.
struct PeerRmbTokens {
  std::array<bool, kMaxGroupLinks> has{};
  std::array<uint32_t, kMaxGroupLinks> rkey{};
  std::array<uint64_t, kMaxGroupLinks> vaddr{};

  bool on(size_t slot, uint32_t k, uint64_t va) const { return has[slot] && rkey[slot] == k && vaddr[slot] == va; }
  // Whether `m` maps this RMB (by any link's RToken).
  bool names(const RemoteRmb& m) const {
    for (size_t i = 0; i < has.size(); ++i)
      if (on(i, m.rkey, m.vaddr)) return true;
    return false;
  }
};

// A connection's RMBs as each link of its group names them.
struct ConnRmbs {
  LocalRmbs local{};
  RemoteRmbs peer{};
  // shm: both RMBs' memfds, kept for an exec that may take the connection
  // along (ConnectionSetup); -1 where the RMB came from a pool without one.
  int memfd = -1;
  int peer_memfd = -1;
};

namespace rmb {

// Our idle RMBs, still registered with (and mapped by) the peer (shm; RFC
// 3.5.2): a subsequent contact on one needs no memfd, no CONFIRM RKEY and
// no fresh page faults. SMCR_RMB_POOL caps it (default 64, 0: no reuse).
class LocalPool {
 public:
  static size_t max();
  bool has_room() const { return rmbs_.size() < max(); }
  size_t size() const { return rmbs_.size(); }
  // Keeps `rmbs` (its control page cleared for the next connection, its memfd
  // moved out of the application's descriptor numbers); *rmbs is emptied.
  void put(LocalRmbs* rmbs);
  // One of `size` bytes, or false.
  bool take(uint32_t size, LocalRmbs* out);
  // The one kept longest, whatever its size, or false.
  bool take_oldest(LocalRmbs* out);
  // Everything kept (the group is ending).
  std::vector<LocalRmbs> drain();

 private:
  std::vector<LocalRmbs> rmbs_;
};

// The peer's RMBs a group knows, from their announcement until the peer
// deletes them (DELETE RKEY) and no connection of ours uses them. On shm an
// entry also holds the RMB's memfd until a connection claims it, and the
// group's mapping of it, shared by the connections on it and kept after
// they end, for the next one the peer names it for. `unmapper` is the link
// whose fabric maps peer RMBs (the group's primary).
class PeerTable {
 public:
  // RFC 7609 8.2: at most 255 RMBs per peer per link group.
  static constexpr size_t kMax = 255;

  size_t size() const { return entries_.size(); }
  // The RMBs the peer has (announced, not deleted): what RFC 7609 8.2's
  // limit counts. An entry the peer deleted stays while a connection of ours
  // still maps it; it is not the peer's any more.
  size_t held_by_peer() const;
  // Every announced RMB deleted by the peer (a group the peer has finished with).
  bool all_deleted() const;

  // The peer added an RMB (CONFIRM RKEY on link `slot`). A repeated RToken is
  // refused, unless `renew_repeated` (Linux reuses an RMB with its RToken
  // unchanged and announces it again after its DELETE RKEY, which our
  // connection on it may not have seen through yet). Takes *memfd (leaves
  // -1) when the RMB is added. False: answer negatively.
  bool announce(size_t slot, const PeerRmbTokens& tokens, int* memfd, bool renew_repeated);
  // The peer's RMB of a first contact (CLC, ADD LINK CONTINUATION), claimed
  // at once; on shm with its mapping, which the table then owns.
  void note(const PeerRmbTokens& tokens, const RemoteRmb* mapping);
  // The RMB that an Accept/Confirm names by its RToken on link `slot`, for
  // its connection: tokens on every link, its memfd (or -1) in *memfd. On
  // shm (`mapped` set), one an earlier connection mapped comes back shared
  // in *mapped.
  bool claim(size_t slot, uint32_t rkey, uint64_t vaddr, PeerRmbTokens* tokens, int* memfd, RemoteRmb* mapped);
  // shm: the mapping a claim made from the memfd; the table owns it now.
  void adopt_mapping(const RemoteRmb& m);
  // A connection is done with the RMB `m` maps. True if the mapping was the
  // table's (*m is cleared: not for the caller to unmap). The connection's
  // memfd for it is kept for the next connection where the table has none
  // (*memfd then -1). An RMB the peer deleted goes with its last user.
  bool give_back(RemoteRmb* m, int* memfd, Link* unmapper);
  // verbs: a connection of ours that wrote into the peer's RMB with `rkey`
  // on link `slot` has ended (nothing is mapped). An RMB the peer deleted
  // goes with its last user; one it did not may be named again by its next
  // connection (RFC 3.5.2: an RMB stays registered for reuse), with or
  // without a new announcement. False if unknown.
  bool release(size_t slot, uint32_t rkey, Link* unmapper);
  // The peer deleted the RMB with `rkey` on link `slot`; false if unknown.
  bool forget(size_t slot, uint32_t rkey, Link* unmapper);
  // Moves the entry whose mapping is `view`, used by one connection alone,
  // to `to` (a connection moving to its own group); false if there is none.
  bool move_sole_user(const RemoteRmb& view, PeerTable* to);
  // The group is ending.
  void clear(Link* unmapper);

 private:
  struct Entry {
    PeerRmbTokens tokens;
    int fd = -1;  // shm: the RMB's memfd until claimed; then one a connection left with `mapped`
    bool claimed = false;
    // shm: kept mapped after its connection ended, for the next one the
    // peer names it for; `users` connections map it now.
    RemoteRmb mapped;
    int users = 0;
    bool deleted = false;  // DELETE RKEY came while a connection still used it
  };
  static void drop(Entry* e, Link* unmapper);

  std::vector<Entry> entries_;
};

}  // namespace rmb

// ---- A connection's RMBs during its handshake (rmb_group.cc).

// Subsequent contact (RFC 3.5.2): an RMB of `size` for a new connection on
// `g`: one from the group's pool, or a new one registered with every link
// and announced with CONFIRM RKEY (Figure 13; other links' RTokens in the
// same message) before our Accept/Confirm names it.
bool add_rmb_to_group(LinkGroup* g, uint32_t size, int llc_timeout_ms, ConnRmbs* r);
// The peer's RMB that its CONFIRM RKEY announced and its Accept/Confirm
// names (by its RToken on the primary link), on every link it was given for.
bool claim_peer_rmb(LinkGroup* g, uint32_t rkey, uint64_t vaddr, uint8_t index, uint32_t size, ConnRmbs* r);
// Releases what a failed handshake registered, and announces our RMB gone
// (DELETE RKEY) where it had one.
void free_conn_rmbs(LinkGroup* g, ConnRmbs* r);
// What the peer's RMB is called on each link, from what we know of it.
PeerRmbTokens tokens_of(const ConnRmbs& r);

}  // namespace smcr
