// Writing one value over a run of f32, as the backward passes of reductions and global pooling
// broadcast each output's gradient. Outputs much larger than the caches are written with
// non-temporal stores: a plain store first reads the line it fills, so a broadcast that leaves the
// cache would move every byte twice.
#pragma once

#include <algorithm>
#include <cstdint>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace galley::backends::cpu {

/// Whole outputs of at least this many bytes bypass the caches in fill_f32().
inline constexpr std::int64_t kBypassCacheBytes = std::int64_t{16} << 20;

/// dst[0, n) = v; with bypass_cache, whole aligned vectors are stored non-temporally and the
/// stores are fenced before returning, so a thread that sees this call finish sees them.
inline void fill_f32(float* dst, std::int64_t n, float v, bool bypass_cache) {
#if defined(__SSE2__)
  if (bypass_cache) {
    std::int64_t i = 0;
    for (; i < n && reinterpret_cast<std::uintptr_t>(dst + i) % 16 != 0; ++i) dst[i] = v;
    const __m128 vv = _mm_set1_ps(v);
    for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, vv);
    for (; i < n; ++i) dst[i] = v;
    _mm_sfence();
    return;
  }
#endif
  (void)bypass_cache;
  std::fill_n(dst, n, v);
}

}  // namespace galley::backends::cpu
