#include "core/cdc.h"

#include <algorithm>

#include "core/wire.h"

namespace smcr::cdc {

namespace {

// Byte 24 (producer flags) and byte 25 (connection state flags), RFC A.4.
constexpr uint8_t kWriterBlocked = 0x80;
constexpr uint8_t kUrgentPending = 0x40;
constexpr uint8_t kUrgentPresent = 0x20;
constexpr uint8_t kRequestUpdate = 0x10;
constexpr uint8_t kFailoverValidation = 0x08;
constexpr uint8_t kPeerDoneWriting = 0x80;
constexpr uint8_t kPeerConnClosed = 0x40;
constexpr uint8_t kPeerConnAbort = 0x20;

// Each cursor is reserved(2) | wrap(2) | offset(4).
Cursor read_cursor(WireReader& r) {
  r.skip(2);
  Cursor c;
  c.wrap = r.be16();
  c.offset = r.be32();
  return c;
}

}  // namespace

std::array<uint8_t, kMessageLen> encode(const Message& m) {
  // Built for every data message (a write through memory publishes one):
  // each field stored at its fixed offset (RFC 7609 A.4), reserved bytes zero.
  std::array<uint8_t, kMessageLen> out{};
  auto put_be = [&out](size_t at, uint32_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * (n - 1 - i)));
  };
  out[0] = kType;
  out[1] = static_cast<uint8_t>(kMessageLen);
  put_be(2, m.seq, 2);
  put_be(4, m.alert_token, 4);
  // Each cursor is reserved(2) | wrap(2) | offset(4): the producer's at 8,
  // the consumer's at 16.
  put_be(10, m.producer.wrap, 2);
  put_be(12, m.producer.offset, 4);
  put_be(18, m.consumer.wrap, 2);
  put_be(20, m.consumer.offset, 4);
  const Flags& f = m.flags;
  out[24] = static_cast<uint8_t>((f.writer_blocked ? kWriterBlocked : 0) | (f.urgent_pending ? kUrgentPending : 0) |
                                 (f.urgent_present ? kUrgentPresent : 0) | (f.request_update ? kRequestUpdate : 0) |
                                 (f.failover_validation ? kFailoverValidation : 0));
  out[25] = static_cast<uint8_t>((f.peer_done_writing ? kPeerDoneWriting : 0) |
                                 (f.peer_conn_closed ? kPeerConnClosed : 0) | (f.peer_conn_abort ? kPeerConnAbort : 0));
  return out;
}

std::optional<Message> decode(std::span<const uint8_t> bytes) {
  if (bytes.size() < kMessageLen) return std::nullopt;
  WireReader r(bytes.first(kMessageLen));
  if (r.u8() != kType) return std::nullopt;
  if (r.u8() != kMessageLen) return std::nullopt;
  Message m;
  m.seq = r.be16();
  m.alert_token = r.be32();
  m.producer = read_cursor(r);
  m.consumer = read_cursor(r);
  // Reserved bits are ignored on receipt (RFC A: send zero, do not validate).
  const uint8_t producer_flags = r.u8();
  const uint8_t conn_state_flags = r.u8();
  if (!r.ok()) return std::nullopt;
  m.flags.writer_blocked = producer_flags & kWriterBlocked;
  m.flags.urgent_pending = producer_flags & kUrgentPending;
  m.flags.urgent_present = producer_flags & kUrgentPresent;
  m.flags.request_update = producer_flags & kRequestUpdate;
  m.flags.failover_validation = producer_flags & kFailoverValidation;
  m.flags.peer_done_writing = conn_state_flags & kPeerDoneWriting;
  m.flags.peer_conn_closed = conn_state_flags & kPeerConnClosed;
  m.flags.peer_conn_abort = conn_state_flags & kPeerConnAbort;
  return m;
}

Cursor CursorSpace::advance(Cursor c, uint32_t n) const {
  uint64_t offset = uint64_t{c.offset} + n;
  if (offset >= length_) {
    offset -= capacity();
    c.wrap = static_cast<uint16_t>(c.wrap + 1);
  }
  c.offset = static_cast<uint32_t>(offset);
  return c;
}

std::optional<uint32_t> CursorSpace::used(const Cursor& p, const Cursor& c) const {
  if (base_ >= length_ || !in_range(p) || !in_range(c)) return std::nullopt;
  const uint16_t wrap_difference = static_cast<uint16_t>(p.wrap - c.wrap);
  if (wrap_difference == 0) {
    if (p.offset < c.offset) return std::nullopt;
    return p.offset - c.offset;
  }
  if (wrap_difference == 1) {
    // Equal offsets one wrap apart is the full window, hence <= not <.
    if (p.offset > c.offset) return std::nullopt;
    return (length_ - c.offset) + (p.offset - base_);
  }
  return std::nullopt;
}

std::optional<uint32_t> CursorSpace::free_space(const Cursor& p, const Cursor& c) const {
  auto in_use = used(p, c);
  if (!in_use) return std::nullopt;
  return capacity() - *in_use;
}

}  // namespace smcr::cdc
