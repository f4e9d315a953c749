// See transpose_avx512.hpp. Compiled with AVX-512 F/BW/VL/DQ; nothing here instantiates a
// standard-library template (see sgemm_avx512.cpp).
#include "backends/cpu/transpose_avx512.hpp"

#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

// r[i] = row i of a 16 x 16 block on entry, column i on return. Interleaving pairs of rows, then
// pairs of pairs, leaves each 128-bit lane k of vector 4 i + j holding column 4 k + j of rows
// 4 i .. 4 i + 3; two rounds of 128-bit lane shuffles gather each column's four lanes.
inline void transpose_in_registers(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 even_lanes = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);
    const __m512 odd_lanes = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);
    const __m512 even_lanes_hi = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const __m512 odd_lanes_hi = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
    r[j] = _mm512_shuffle_f32x4(even_lanes, even_lanes_hi, 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(even_lanes, even_lanes_hi, 0xdd);
    r[4 + j] = _mm512_shuffle_f32x4(odd_lanes, odd_lanes_hi, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(odd_lanes, odd_lanes_hi, 0xdd);
  }
}

// One block of up to 16 x 16; the parts past rows or cols are neither read nor written.
inline void block(const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride,
                  std::int64_t rows, std::int64_t cols) {
  __m512 r[16];
  if (rows == 16 && cols == 16) {
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * src_stride);
    transpose_in_registers(r);
    for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * dst_stride, r[i]);
    return;
  }
  const __mmask16 in = lanes(cols), out = lanes(rows);
  for (int i = 0; i < 16; ++i)
    r[i] = i < rows ? _mm512_maskz_loadu_ps(in, src + i * src_stride) : _mm512_setzero_ps();
  transpose_in_registers(r);
  for (int i = 0; i < cols; ++i) _mm512_mask_storeu_ps(dst + i * dst_stride, out, r[i]);
}

}  // namespace

void transpose_32bit(const std::uint32_t* src, std::int64_t src_stride, std::uint32_t* dst,
                     std::int64_t dst_stride, std::int64_t rows, std::int64_t cols) {
  // Moved as floats: the shuffles only move bits, and the float forms are the complete set.
  const auto* s = reinterpret_cast<const float*>(src);
  auto* d = reinterpret_cast<float*>(dst);
  for (std::int64_t y = 0; y < rows; y += 16) {
    for (std::int64_t x = 0; x < cols; x += 16) {
      block(s + y * src_stride + x, src_stride, d + x * dst_stride + y, dst_stride, min64(16, rows - y),
            min64(16, cols - x));
    }
  }
}

}  // namespace galley::backends::cpu::avx512
