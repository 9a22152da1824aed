// Feeds arbitrary bytes to the CDC decoder and the cursor arithmetic. The
// cursor checks are the properties the engine relies on: used() never exceeds
// the capacity, and advancing an in-range cursor by n <= capacity yields a
// cursor exactly n bytes ahead.
#include <cstdlib>
#include <cstring>

#include "core/cdc.h"

using namespace smcr::cdc;

namespace {

void check(bool condition) {
  if (!condition) std::abort();
}

uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void check_cursors(const Message& m, const uint8_t* extra) {
  // Bound the RMBE length so the interesting wraps stay reachable.
  const uint32_t base = (extra[0] & 1) ? 4 : 0;
  const uint32_t length = base + 1 + read_u32(extra + 1) % (1u << 20);
  const CursorSpace space(length, base);
  const auto used = space.used(m.producer, m.consumer);
  const auto free_space = space.free_space(m.producer, m.consumer);
  check(used.has_value() == free_space.has_value());
  if (used) {
    check(space.in_range(m.producer) && space.in_range(m.consumer));
    check(*used <= space.capacity());
    check(*used + *free_space == space.capacity());
  }
  if (space.in_range(m.consumer)) {
    const uint32_t n = read_u32(extra + 5) % (space.capacity() + 1);
    const Cursor ahead = space.advance(m.consumer, n);
    check(space.in_range(ahead));
    check(space.used(ahead, m.consumer) == n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto m = decode(bytes);
  if (!m) return 0;
  check(size >= kMessageLen && data[0] == kType && data[1] == kMessageLen);
  auto again = decode(encode(*m));
  check(again && *again == *m);
  (void)seq_newer(m->seq, static_cast<uint16_t>(m->seq + 1));
  // Bytes past the message choose the RMBE geometry for the cursor checks.
  if (size >= kMessageLen + 9) check_cursors(*m, data + kMessageLen);
  return 0;
}
