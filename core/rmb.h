// RMB/RMBE sizing (RFC 7609 A.2.3 Bsize): size = 2^(x+14) bytes, x in 0..5
// (16 KiB .. 512 KiB). The 4-byte RMBE eyecatcher is counted inside the size.
#pragma once

#include <cstdint>
#include <optional>

namespace smcr::rmb {

inline constexpr uint32_t kMinSize = 16 * 1024;
inline constexpr uint32_t kMaxSize = 512 * 1024;
inline constexpr uint8_t kMaxCode = 5;

// Size in bytes for a Bsize code; nullopt for codes 6..15 (beyond RFC maximum).
std::optional<uint32_t> decode_size(uint8_t code);
// Smallest code whose size is >= bytes (rounding up, RFC 4.1); bytes above
// 512 KiB are capped at code 5, bytes below 16 KiB give code 0.
uint8_t encode_size(uint32_t bytes);

// QP MTU codes (A.2.3): 1=256 .. 5=4096; others reserved.
std::optional<uint32_t> decode_mtu(uint8_t code);
std::optional<uint8_t> encode_mtu(uint32_t bytes);

}  // namespace smcr::rmb
