// CDC through memory: on the shared-memory fabric a connection's CDC
// messages are written into a control page that follows the receiver's RMB
// in the same memfd, as SMC-D writes its CDC into the peer's DMB, instead of
// travelling as link messages that the receiver's engine thread must wake up
// for. The receiving application thread reads the newest CDC itself when it
// next takes the connection (a load of the next publish's slot word when
// nothing changed), so a message costs the sender a memcpy and a cache line, and the
// receiver no context switch of its own engine.
//
// Wake-ups: the receiver says in the same page what it waits for (data, or
// room in the window). The sender, holding a descriptor of the receiver's
// readiness socket (its "engine end", fetched from the receiver's process
// with pidfd_getfd, or passed once per connection over the link), claims
// that bit and rings the receiver's socket itself: one
// wake-up per message, as with TCP, and none while the receiver is busy.
// Every CDC with D, C, A or U, and every CDC while the receiver has not
// allowed direct rings, is also posted on the link, so the receiver's engine
// sees each state change even when no application thread is reading; except
// a C to a receiver that has closed and said it waits only for that C
// (welcome_close_in_memory), whose timer finds it here.
//
// The page is shared with the peer process: every value read from it is
// untrusted. The CDC is decoded and its cursors validated as a link message
// would be; a peer that never finishes a write only stalls its own flow.
//
// Ordering (the classic two-flag handshake): the receiver sets a wait bit and
// then looks at the version; the sender publishes a version and then looks at
// the bits. Both use sequentially consistent operations, so at least one of
// them sees the other: no wake-up is lost.
#pragma once

#include <atomic>
#include <cstddef>
#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "core/cdc.h"

namespace smcr::cdcmem {

// Bytes after the RMB in its memfd; one page.
inline constexpr size_t kControlBytes = 4096;
// Where the two CDC slots lie in the page, and the CDC within a slot (for
// tests that play a sender stopped halfway).
namespace layout {
inline constexpr size_t kSlot0 = 64, kSlot1 = 128, kCdcInSlot = 8;
}

// What the receiver waits for. Each is a word of its own: the cursor the
// receiver already knows (the producer cursor for data, the consumer cursor
// of its own data for window), with kArmed set. The sender answers (rings,
// or empties the socket) only when the CDC it just published carries a
// different cursor, and takes the arming with a compare-and-swap, so a
// wake-up is never delivered for data the receiver has already taken: a
// readable socket with nothing to read is something a TCP socket with one
// reader never shows (wrk counts the EAGAIN as a read error).
enum class Want : uint8_t {
  kData,    // ring my readiness socket when the producer cursor moves
  kWindow,  // empty my readiness socket (POLLOUT) when the consumer cursor moves
};
inline constexpr uint64_t kArmed = 1;
// An arming for a ready set (core/ready_set.h): its taker marks the slot
// named beside it (ready_set_slot) instead of ringing the readiness socket.
inline constexpr uint64_t kForSet = uint64_t{1} << 63;
struct ReadySetSlot {
  uint32_t set_id = 0;  // the page's id on this link group
  uint32_t slot = 0;
};

uint64_t load_want(uint8_t* page, Want which);
// Receiver: arms `which`, knowing the cursor up to `known`.
// `tag` (the receiving connection's token) tells armings of successive
// connections on a reused RMB apart: a sender of an earlier connection that
// loaded the word before the page was reused cannot take the new arming.
void arm(uint8_t* page, Want which, const cdc::Cursor& known, uint32_t tag = 0);
// Receiver: arms for data, the taker to mark `where` (kForSet).
void arm_for_set(uint8_t* page, const cdc::Cursor& known, uint32_t tag, ReadySetSlot where);
// Sender, having taken a kForSet arming: where to mark (untrusted).
ReadySetSlot ready_set_slot(uint8_t* page);
// Receiver: disarms its own arming; true if it was still armed (nobody took it).
bool disarm(uint8_t* page, Want which);
// Sender, having just published `cursor` (producer for kData, consumer for
// kWindow): takes the arming `seen` (a load_want value) if the receiver knew
// a different cursor; true if this call took it, and the wake-up is then this
// caller's to deliver.
bool take(uint8_t* page, Want which, uint64_t seen, const cdc::Cursor& cursor);
// Sender, having just published an end (D, C or A): takes the data arming
// `seen` whatever cursor it names (the end is news without new data).
bool take_for_end(uint8_t* page, uint64_t seen);

// Receiver whose application has closed, with its own C sent: the peer's C
// may come through memory alone. Nobody waits for it any more, so no engine
// need wake up for it: the receiver reaps it on a timer (close_in_memory,
// core/connection_close.cc). Cleared with the page when the RMB is reused;
// the token tells this connection's word from an earlier one's.
void welcome_close_in_memory(uint8_t* page, uint32_t alert_token);
// Sender of a C to the receiver `alert_token`: whether it said so.
bool close_in_memory_welcome(uint8_t* page, uint32_t alert_token);

// Receiver: set once to have every CDC posted on the link and the
// readiness socket never touched by the peer again (a handover).
void forbid_direct(uint8_t* page);
bool direct_forbidden(uint8_t* page);

// The urgent byte of the newest CDC that carried U: kept apart from the
// newest CDC, which a later one may replace before the receiver reads it.
struct UrgentRecord {
  uint16_t seq = 0;
  cdc::Cursor producer;
  bool valid = false;
};

// Sender: writes `m` as the newest CDC (and, with U, the urgent record);
// returns the version it published.
uint32_t publish(uint8_t* page, const cdc::Message& m);
// The version word: the number of completed publishes.
uint32_t version(const uint8_t* page);
// Receiver: whether a CDC after publish `seen` is there to fetch. Looks at
// the slot the next publish goes to, and at the version only when that slot
// is being written or holds nothing newer.
bool news(const uint8_t* page, uint32_t seen);
// Receiver: the newest completed CDC and the urgent record if there is one
// after *seen; updates *seen. A publish in progress does not hide the one
// before it. False when nothing new, when the bytes do not decode, or
// (a sender outpacing every try, in practice never) call again later.
bool fetch(const uint8_t* page, uint32_t* seen, cdc::Message* out, UrgentRecord* urgent);

// Since when the sender's unread data (or end) has waited (CLOCK_MONOTONIC
// ns, 0: none known), so that an epoll wait reports connections in the
// order their data came, as the kernel's ready list does for TCP sockets (a
// client's command on one connection, then its command on another, are
// handled in that order). Written by the sender only, before it publishes
// (the version line: no line of its own to move); untrusted: it orders,
// nothing more.
void set_ready_since(uint8_t* page, uint64_t stamp);
uint64_t ready_since(const uint8_t* page);

// The receiver's readiness socket, for a sender that has none yet: the
// process and descriptor number that hold its engine end, and its inode
// (which file the number named when this was written). The sender fetches
// it with pidfd_getfd (core/peer_fd.h) instead of waiting for it to ride
// the receiver's first CDC on the link, which the sender's engine thread
// must wake up for (and the receiver's first data the receiver's). Written
// by the receiver before its Accept or Confirm names the RMB, under its
// connection's alert token; cleared with the page when the RMB is reused.
// Untrusted: a sender fetches only the file whose inode this names.
struct BellRecord {
  uint32_t pid = 0;
  uint32_t fd = 0;
  uint64_t ino = 0;
};
void publish_bell(uint8_t* page, uint32_t alert_token, const BellRecord& bell);
// The record written under `alert_token`, if any.
std::optional<BellRecord> read_bell(const uint8_t* page, uint32_t alert_token);
// Sender, having fetched the bell: says so in the receiver's page, so that
// the receiver does not pass it on the link as well (a peer's word: one that
// lies only goes without the receiver's bell).
void ack_bell(uint8_t* page, uint32_t alert_token);
bool bell_acked(const uint8_t* page, uint32_t alert_token);

// Sender-side count of rings in progress, for a receiver taking back its
// readiness socket (forbid_direct) to wait out.
std::atomic_ref<uint32_t> ringing(uint8_t* page);
// The page of an RMB given to a new connection: everything cleared but the
// ringing count, which senders of the old connection may still hold.
void reset_for_reuse(uint8_t* page);

}  // namespace smcr::cdcmem

namespace smcr::cdcmem {

// The link message that carries a connection's readiness socket to the peer
// (SCM_RIGHTS): LLC's optional type range, so a peer that does not know it
// discards it (RFC 7609 4.3.1: unknown optional types are ignored).
inline constexpr uint8_t kBellMessageType = 0xBE;
std::array<uint8_t, cdc::kMessageLen> encode_bell(uint32_t alert_token);
// The alert token a bell message names, or nullopt if it is not one.
std::optional<uint32_t> decode_bell(std::span<const uint8_t> msg);

}  // namespace smcr::cdcmem
