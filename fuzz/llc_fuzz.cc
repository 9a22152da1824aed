// Feeds arbitrary bytes to the LLC decoder in both ADD LINK layouts, and to the
// version-2 decoders, and checks that decoded messages re-encode to bytes that
// decode to the same value.
#include <cstdlib>
#include <vector>

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
  // Version 2 (a Linux SMC-Rv2 link group): framing, ADD LINK's extension,
  // REQ ADD LINK. Random bytes rarely say version 2 with a fitting length:
  // the first byte's low bit frames the rest as one.
  std::vector<uint8_t> framed(bytes.begin(), bytes.end());
  if (size >= 3 && (data[0] & 1)) {
    framed[0] = static_cast<uint8_t>(0x20 | (data[1] & 0x0F));
    framed[1] = static_cast<uint8_t>(size & 0xFF);
    framed[2] = static_cast<uint8_t>(size >> 8);
  }
  for (std::span<const uint8_t> in : {bytes, std::span<const uint8_t>(framed)}) {
    DecodeError err = DecodeError::kNone;
    if (auto m = v2::decode(in, &err)) {
      check(in.size() >= kMessageLen);
      if ((in[0] >> 4) == 0) {  // version 1 in a version-2 group: read as version 1 (Linux layout)
        auto v1 = decode(in, nullptr, LayoutVariant::kLinux);
        check(v1 && *v1 == *m);
        continue;
      }
      check((in[0] >> 4) == v2::kVersion && v2::claimed_length(in) <= in.size());
      auto encoded = v2::encode(*m);
      check(!encoded.empty() && encoded.size() <= v2::kMaxMessageLen);
      auto again = v2::decode(encoded, &err);
      check(again && *again == *m);
    } else {
      check(err != DecodeError::kNone);
    }
    if (auto r = v2::decode_req_add_link(in, &err)) {
      auto again = v2::decode_req_add_link(v2::encode(*r));
      v2::ReqAddLink expected = *r;
      if (expected.reply) expected.gids.clear();  // a reply carries none
      check(again && *again == expected);
    }
  }
  return 0;
}
