// copy_for_peer: every size and alignment around the streaming threshold
// copies exactly (the streamed body, its cached head and tail) and writes
// nothing outside the destination.
#include "core/stream_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace smcr {
namespace {

TEST(StreamCopy, ExactForEverySizeAndAlignmentAroundTheThreshold) {
  constexpr size_t kGuard = 64;
  const size_t sizes[] = {0, 1, 15, 4096, kStreamingCopyMin - 1, kStreamingCopyMin, kStreamingCopyMin + 1,
                          kStreamingCopyMin + 63, 2 * kStreamingCopyMin + 17, 64000};
  std::vector<uint8_t> src(64000 + 2 * kStreamingCopyMin + 64);  // the largest size, from the largest offset
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t len : sizes) {
    ASSERT_LE(len + 16, src.size());
    for (size_t dst_align = 0; dst_align < 20; dst_align += 3) {
      for (size_t src_align : {size_t{0}, size_t{5}, size_t{16}}) {
        std::vector<uint8_t> dst(len + 2 * kGuard + 32, 0xee);
        uint8_t* d = dst.data() + kGuard + dst_align;
        copy_for_peer(d, src.data() + src_align, len);
        for (size_t i = 0; i < len; ++i)
          ASSERT_EQ(d[i], src[src_align + i]) << "len " << len << " dst+" << dst_align << " src+" << src_align << " at " << i;
        for (uint8_t* p = dst.data(); p < d; ++p) ASSERT_EQ(*p, 0xee) << "wrote before the destination, len " << len;
        for (uint8_t* p = d + len; p < dst.data() + dst.size(); ++p)
          ASSERT_EQ(*p, 0xee) << "wrote past the destination, len " << len;
      }
    }
  }
}

}  // namespace
}  // namespace smcr
