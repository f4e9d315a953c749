// See transpose_avx512.hpp. Compiled with AVX-512 F/BW/VL/DQ; nothing here instantiates a
// standard-library template (see sgemm_avx512.cpp).
#include "backends/cpu/transpose_avx512.hpp"

#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"
#include "backends/cpu/avx512_transpose.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

// One block of up to 16 x 16; the parts past rows or cols are neither read nor written.
inline void block(const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride,
                  std::int64_t rows, std::int64_t cols, bool stream) {
  __m512 r[16];
  if (rows == 16 && cols == 16) {
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * src_stride);
    transpose16x16(r);
    if (stream) {
      for (int i = 0; i < 16; ++i) _mm512_stream_ps(dst + i * dst_stride, r[i]);
    } else {
      for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * dst_stride, r[i]);
    }
    return;
  }
  const __mmask16 in = lanes(cols), out = lanes(rows);
  for (int i = 0; i < 16; ++i)
    r[i] = i < rows ? _mm512_maskz_loadu_ps(in, src + i * src_stride) : _mm512_setzero_ps();
  transpose16x16(r);
  for (int i = 0; i < cols; ++i) _mm512_mask_storeu_ps(dst + i * dst_stride, out, r[i]);
}

}  // namespace

void transpose_32bit(const std::uint32_t* src, std::int64_t src_stride, std::uint32_t* dst,
                     std::int64_t dst_stride, std::int64_t rows, std::int64_t cols,
                     const std::uint32_t* next_src, std::int64_t next_rows, bool stream) {
  // Moved as floats: the shuffles only move bits, and the float forms are the complete set.
  const auto* s = reinterpret_cast<const float*>(src);
  auto* d = reinterpret_cast<float*>(dst);
  const auto* next = reinterpret_cast<const float*>(next_src);
  // Every block row of dst starts 64-byte aligned when dst does and its stride is whole lines.
  const bool aligned = stream && reinterpret_cast<std::uintptr_t>(d) % 64 == 0 && dst_stride % 16 == 0;
  const std::int64_t line_cols = (cols + 15) / 16;
  for (std::int64_t y = 0; y < rows; y += 16) {
    // The next src's rows of this block row: their lines, a row at a time.
    if (next != nullptr) {
      for (std::int64_t i = y; i < min64(y + 16, next_rows); ++i)
        for (std::int64_t l = 0; l < line_cols; ++l)
          _mm_prefetch(reinterpret_cast<const char*>(next + i * src_stride + 16 * l), _MM_HINT_T0);
    }
    for (std::int64_t x = 0; x < cols; x += 16) {
      block(s + y * src_stride + x, src_stride, d + x * dst_stride + y, dst_stride, min64(16, rows - y),
            min64(16, cols - x), aligned);
    }
  }
  if (next != nullptr) {
    for (std::int64_t i = rows + (16 - rows % 16) % 16; i < next_rows; ++i)
      for (std::int64_t l = 0; l < line_cols; ++l)
        _mm_prefetch(reinterpret_cast<const char*>(next + i * src_stride + 16 * l), _MM_HINT_T0);
  }
}

void stream_fence() { _mm_sfence(); }

}  // namespace galley::backends::cpu::avx512
