#include "core/rmb.h"

namespace smcr::rmb {

namespace {
constexpr uint32_t kBsizeShift = 14;  // code 0 is 2^14 = 16 KiB
constexpr uint8_t kMinMtuCode = 1;
constexpr uint8_t kMaxMtuCode = 5;
constexpr uint32_t kMinMtu = 256;
}  // namespace

std::optional<uint32_t> decode_size(uint8_t code) {
  if (code > kMaxCode) return std::nullopt;
  return uint32_t{1} << (code + kBsizeShift);
}

uint8_t encode_size(uint32_t bytes) {
  // Rounding up because RFC 4.1 requires the RMBE to hold at least the TCP
  // receive buffer; above 512 KiB the RFC has no code, so the caller gets the
  // largest element there is.
  for (uint8_t code = 0; code < kMaxCode; ++code) {
    if (bytes <= (uint32_t{1} << (code + kBsizeShift))) return code;
  }
  return kMaxCode;
}

uint32_t size_under_budget(uint32_t wanted, size_t live, size_t budget) {
  if (budget == 0 || live == 0 || wanted <= kMinSize) return wanted;
  size_t share = budget / live;
  uint32_t size = wanted;
  while (size > kMinSize && size > share) size >>= 1;
  return size;
}

std::optional<uint32_t> decode_mtu(uint8_t code) {
  if (code < kMinMtuCode || code > kMaxMtuCode) return std::nullopt;
  return kMinMtu << (code - kMinMtuCode);
}

std::optional<uint8_t> encode_mtu(uint32_t bytes) {
  // Exact IB MTUs map to their code; anything in between rounds down to the
  // largest IB MTU that still fits, since a path MTU can only be lowered.
  if (bytes < kMinMtu) return std::nullopt;
  uint8_t code = kMinMtuCode;
  while (code < kMaxMtuCode && (kMinMtu << (code + 1 - kMinMtuCode)) <= bytes) ++code;
  return code;
}

}  // namespace smcr::rmb
