#include "core/stream_copy.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace smcr {

void copy_for_peer(void* dst, const void* src, size_t len) {
#if defined(__x86_64__)
  if (len >= kStreamingCopyMin) {
    auto* d = static_cast<uint8_t*>(dst);
    auto* s = static_cast<const uint8_t*>(src);
    // Streaming stores need 16-byte aligned destinations: the head goes
    // through the cache.
    size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
    std::memcpy(d, s, head);
    d += head, s += head, len -= head;
    for (; len >= 64; d += 64, s += 64, len -= 64) {
      __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
      __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
      __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
    }
    std::memcpy(d, s, len);
    // Streaming stores are weakly ordered: the reader must not see the
    // cursor that follows before them.
    _mm_sfence();
    return;
  }
#endif
  std::memcpy(dst, src, len);
}

}  // namespace smcr
