// Lane masks of a 16-float AVX-512 vector, for the kernels compiled with AVX-512 (include it only
// from those files). Plain inline code: like the kernels, it instantiates no standard-library
// template (see sgemm_avx512.cpp).
#pragma once

#include <immintrin.h>

#include <cstdint>

// GCC 12's _mm512_alignr_epi32 (and its other lane shifts) build their pass-through operand from
// _mm512_undefined_epi32(), whose deliberate self-initialisation trips -Wmaybe-uninitialized or
// -Wuninitialized at every inlined use: a false positive, since the unmasked intrinsic never reads
// it. Silenced in the AVX-512 files, the only ones that include this header, so CI logs stay
// readable.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace galley::backends::cpu::avx512 {

inline std::int64_t min64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
inline std::int64_t max64(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

/// Lanes [0, count) of a 16-float vector, count clamped to [0, 16].
inline __mmask16 lanes(std::int64_t count) {
  if (count <= 0) return 0;
  if (count >= 16) return 0xffff;
  return static_cast<__mmask16>((1u << count) - 1u);
}

/// Whether any of the n floats at p is a NaN; one comparison tests two vectors.
inline bool holds_nan(const float* p, std::int64_t n) {
  __mmask16 nan = 0;
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    nan |= _mm512_cmp_ps_mask(_mm512_loadu_ps(p + i), _mm512_loadu_ps(p + i + 16), _CMP_UNORD_Q);
  for (; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(lanes(n - i), p + i);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  }
  return nan != 0;
}

/// Asks for the cache lines [first, last) of the n floats at p (lines of 16 floats from p), clipped
/// to them.
inline void prefetch_lines(const float* p, std::int64_t n, std::int64_t first, std::int64_t last) {
  const std::int64_t lines = (n + 15) / 16;
  for (std::int64_t i = first; i < min64(last, lines); ++i)
    _mm_prefetch(reinterpret_cast<const char*>(p + 16 * i), _MM_HINT_T0);
}

/// Lanes l with lo <= l < hi, both clamped to [0, 16].
inline __mmask16 lane_range(std::int64_t lo, std::int64_t hi) {
  lo = max64(lo, 0);
  hi = min64(hi, 16);
  if (hi <= lo) return 0;
  const unsigned below_hi = hi >= 16 ? 0xffffu : (1u << hi) - 1u;
  return static_cast<__mmask16>(below_hi & ~((1u << lo) - 1u));
}

}  // namespace galley::backends::cpu::avx512
