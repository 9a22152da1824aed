// CDC (Connection Data Control) message, RFC 7609 appendix A.4: the 44-byte
// message that carries producer/consumer cursors and connection flags for one
// connection. Also the cursor arithmetic of RFC section 4 (wrap counters,
// used/free space) parameterised on where the data area of an RMBE starts:
// 4 for the RFC's eyecatcher model, 0 for the Linux model (no eyecatcher).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

namespace smcr::cdc {

inline constexpr uint8_t kType = 0xFE;
inline constexpr size_t kMessageLen = 44;

struct Cursor {
  uint16_t wrap = 0;
  uint32_t offset = 0;
  bool operator==(const Cursor&) const = default;
};

struct Flags {
  bool writer_blocked = false;    // B
  bool urgent_pending = false;    // P
  bool urgent_present = false;    // U
  bool request_update = false;    // R
  bool failover_validation = false;  // F
  bool peer_done_writing = false;    // D
  bool peer_conn_closed = false;     // C
  bool peer_conn_abort = false;      // A
  bool operator==(const Flags&) const = default;
};

struct Message {
  uint16_t seq = 0;
  uint32_t alert_token = 0;  // the receiver's token for the connection
  Cursor producer;
  Cursor consumer;
  Flags flags;
  bool operator==(const Message&) const = default;
};

std::array<uint8_t, kMessageLen> encode(const Message& m);
// Validates type 0xFE and length 44. Cursor ranges are validated against the
// connection's RMBE by the receiver (CursorSpace::valid), not here.
std::optional<Message> decode(std::span<const uint8_t> bytes);

// 16-bit serial-number comparison (RFC 1982 style): true if `a` is newer than `b`.
inline bool seq_newer(uint16_t a, uint16_t b) { return static_cast<int16_t>(a - b) > 0; }

// Cursor arithmetic for one RMBE of `length` bytes whose data area is
// [base, length): base = 4 (RFC eyecatcher) or 0 (Linux). capacity = length - base.
class CursorSpace {
 public:
  CursorSpace(uint32_t length, uint32_t base) : length_(length), base_(base) {}
  uint32_t length() const { return length_; }
  uint32_t base() const { return base_; }
  uint32_t capacity() const { return length_ - base_; }
  Cursor initial() const { return Cursor{0, base_}; }
  bool in_range(const Cursor& c) const { return c.offset >= base_ && c.offset < length_; }

  // Moves c forward by n <= capacity bytes, wrapping to base and bumping wrap.
  Cursor advance(Cursor c, uint32_t n) const;
  // Bytes written but not yet consumed between consumer c and producer p, or
  // nullopt when the pair is inconsistent (wrap difference > 1, or offsets that
  // contradict the wrap difference): a protocol violation by the peer.
  std::optional<uint32_t> used(const Cursor& p, const Cursor& c) const;
  // Free space for the writer: capacity - used.
  std::optional<uint32_t> free_space(const Cursor& p, const Cursor& c) const;
  // Contiguous bytes from c up to the end of the data area.
  uint32_t contiguous_to_end(const Cursor& c) const { return length_ - c.offset; }

 private:
  uint32_t length_;
  uint32_t base_;
};

}  // namespace smcr::cdc
