// See reduce_fill_avx512.hpp. Compiled with AVX-512 F/BW/VL/DQ; nothing here instantiates a
// standard-library template (see sgemm_avx512.cpp).
#include "backends/cpu/reduce_fill_avx512.hpp"

#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"

namespace galley::backends::cpu::avx512 {

void fill_f32(float* dst, std::int64_t n, float v, bool bypass_cache) {
  const __m512 vv = _mm512_set1_ps(v);
  // Masked stores up to the first 64-byte boundary and after the last, whole lines between.
  const auto misalignment = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(dst) % 64 / 4);
  const std::int64_t head = min64(n, (16 - misalignment) % 16);
  _mm512_mask_storeu_ps(dst, lanes(head), vv);
  std::int64_t i = head;
  if (bypass_cache) {
    for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, vv);
    _mm_sfence();
  } else {
    for (; i + 64 <= n; i += 64) {
      _mm512_store_ps(dst + i, vv);
      _mm512_store_ps(dst + i + 16, vv);
      _mm512_store_ps(dst + i + 32, vv);
      _mm512_store_ps(dst + i + 48, vv);
    }
    for (; i + 16 <= n; i += 16) _mm512_store_ps(dst + i, vv);
  }
  _mm512_mask_storeu_ps(dst + i, lanes(n - i), vv);
}

}  // namespace galley::backends::cpu::avx512
