// AVX2/F16C conversion loops; compiled with -mavx2 -mfma -mf16c, entered only after
// cpu_has_f16c(). Tails fall back to the scalar helpers of galley/core/dtype.hpp.
#include <immintrin.h>

#include "backends/cpu/conv_convert.hpp"

namespace galley::backends::cpu::avx2 {

void half_to_float(const std::uint16_t* src, float* dst, std::size_t count) {
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < count; ++i) dst[i] = galley::half_to_float(src[i]);
}

void float_to_half(const float* src, std::uint16_t* dst, std::size_t count) {
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    // Round to nearest even, as the scalar float_to_half does; NaN stays NaN in vcvtps2ph.
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < count; ++i) dst[i] = galley::float_to_half(src[i]);
}

void bf16_to_float(const std::uint16_t* src, float* dst, std::size_t count) {
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
  }
  for (; i < count; ++i) dst[i] = galley::bfloat16_to_float(src[i]);
}

void float_to_bf16(const float* src, std::uint16_t* dst, std::size_t count) {
  std::size_t i = 0;
  const __m256i lsb_mask = _mm256_set1_epi32(1);
  const __m256i bias = _mm256_set1_epi32(0x7fff);
  const __m256i quiet = _mm256_set1_epi32(0x00400000);
  for (; i + 8 <= count; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    const __m256i bits = _mm256_castps_si256(v);
    // Round to nearest even: add 0x7fff plus the lowest kept bit, then keep the high half.
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), lsb_mask);
    __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(bias, lsb));
    // NaN must not round into infinity: quieten it and truncate instead.
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    rounded = _mm256_blendv_epi8(rounded, _mm256_or_si256(bits, quiet), nan);
    const __m256i high = _mm256_srli_epi32(rounded, 16);
    // Pack 8 x u32 (each < 65536) to 8 x u16; packus works per 128-bit lane, so fix the order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(high, high), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(packed));
  }
  for (; i < count; ++i) dst[i] = galley::float_to_bfloat16(src[i]);
}

}  // namespace galley::backends::cpu::avx2
