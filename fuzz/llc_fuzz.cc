// Feeds arbitrary bytes to the LLC decoder in both ADD LINK layouts and checks
// that decoded messages re-encode to bytes that decode to the same value.
#include <cstdlib>

#include "core/llc.h"

using namespace smcr::llc;

namespace {
void check(bool condition) {
  if (!condition) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  if (size > 0) (void)classify(data[0]);
  for (auto layout : {LayoutVariant::kRfc, LayoutVariant::kLinux}) {
    DecodeError err = DecodeError::kNone;
    auto m = decode(bytes, &err, layout);
    (void)to_string(err);
    if (!m) {
      check(err != DecodeError::kNone);
      continue;
    }
    check(size >= kMessageLen && classify(data[0]) == Opcode::kLlc);
    check(static_cast<uint8_t>(type_of(*m)) == data[0]);
    (void)is_reply(*m);
    auto encoded = encode(*m, layout);
    auto again = decode(encoded, nullptr, layout);
    check(again && *again == *m);
  }
  return 0;
}
