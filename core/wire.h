// Explicit big-endian encode/decode over byte spans. Every protocol decoder in
// core/ reads untrusted bytes through WireReader, which never reads past the
// end of its span: a short read latches ok() == false and yields zeros.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace smcr {

class WireReader {
 public:
  explicit WireReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  bool ok() const { return ok_; }
  size_t pos() const { return pos_; }
  size_t remaining() const { return ok_ ? bytes_.size() - pos_ : 0; }

  uint8_t u8() { return static_cast<uint8_t>(take(1)); }
  uint16_t be16() { return static_cast<uint16_t>(take(2)); }
  uint32_t be24() { return static_cast<uint32_t>(take(3)); }
  uint32_t be32() { return static_cast<uint32_t>(take(4)); }
  uint64_t be64() { return take(8); }

  template <size_t N>
  std::array<uint8_t, N> bytes() {
    std::array<uint8_t, N> out{};
    if (!need(N)) return out;
    std::memcpy(out.data(), bytes_.data() + pos_, N);
    pos_ += N;
    return out;
  }
  void skip(size_t n) {
    if (need(n)) pos_ += n;
  }
  void seek(size_t absolute) {
    if (absolute > bytes_.size()) ok_ = false;
    else pos_ = absolute;
  }

 private:
  bool need(size_t n) {
    if (!ok_ || bytes_.size() - pos_ < n) {
      ok_ = false;
      return false;
    }
    return true;
  }
  uint64_t take(size_t n) {
    if (!need(n)) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | bytes_[pos_ + i];
    pos_ += n;
    return v;
  }

  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// Bytes of a fixed capacity N, for a message built once per data message
// (the CDC): appending allocates nothing. Appending past N is dropped and
// latches overflowed().
template <size_t N>
class FixedBytes {
 public:
  void push_back(uint8_t v) {
    if (size_ < N) bytes_[size_] = v;
    else overflowed_ = true;
    ++size_;
  }
  size_t size() const { return size_; }
  bool overflowed() const { return overflowed_; }
  uint8_t& operator[](size_t i) { return bytes_[i]; }
  const uint8_t* begin() const { return bytes_.data(); }

 private:
  std::array<uint8_t, N> bytes_{};
  size_t size_ = 0;
  bool overflowed_ = false;
};

// Appends to a buffer (growable by default); fixed-size messages are built by
// writing every field in order and checked against their architected length
// by the caller.
template <typename Buffer = std::vector<uint8_t>>
class BasicWireWriter {
 public:
  void u8(uint8_t v) { out_.push_back(v); }
  void be16(uint16_t v) { put(v, 2); }
  void be24(uint32_t v) { put(v, 3); }
  void be32(uint32_t v) { put(v, 4); }
  void be64(uint64_t v) { put(v, 8); }
  void zeros(size_t n) {
    for (size_t i = 0; i < n; ++i) out_.push_back(0);
  }
  void bytes(std::span<const uint8_t> b) {
    for (uint8_t v : b) out_.push_back(v);
  }
  // Overwrite a big-endian u16 already written at `offset` (length fields).
  void patch_be16(size_t offset, uint16_t v) {
    out_[offset] = static_cast<uint8_t>(v >> 8);
    out_[offset + 1] = static_cast<uint8_t>(v);
  }
  size_t size() const { return out_.size(); }
  Buffer& buffer() { return out_; }
  Buffer take() { return std::move(out_); }

 private:
  void put(uint64_t v, size_t n) {
    for (size_t i = n; i-- > 0;) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  Buffer out_;
};

using WireWriter = BasicWireWriter<>;

}  // namespace smcr
