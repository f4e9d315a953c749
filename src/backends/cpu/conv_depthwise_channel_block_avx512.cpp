// The channel-blocked loop of cpu.conv.depthwise for small NCHW planes (see ChannelBlock in
// conv_depthwise_kernels.hpp). Compiled with AVX-512 F/BW/VL/DQ; entered only after
// cpu_has_avx512(). With 16 channels per vector a stride is only addressing, where a plane loop
// splits every input row into even and odd columns with loads and permutes for each pair of
// taps, and every lane is used however narrow the plane; the price is two 16x16 transposes per
// 16 pixels in and out, which the saved permutes and lanes repay on small strided planes.
// Nothing here instantiates a standard-library template (see sgemm_avx512.cpp).
#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"
#include "backends/cpu/avx512_post_ops.hpp"
#include "backends/cpu/avx512_transpose.hpp"
#include "backends/cpu/conv_depthwise_kernels.hpp"

namespace galley::backends::cpu::depthwise {
namespace {

using avx512::lanes;
using avx512::min64;
using avx512::PostOps;

constexpr std::int64_t kLanes = 16;

// The padded positions the input does not cover: rows above and below it, and the columns left
// and right of it in its rows. Zeroed for every block, as the input's copy overwrites only its own.
void zero_border(const ConvShape& s, const ChannelBlock& block, float* scratch) {
  const __m512 zero = _mm512_setzero_ps();
  const auto zero_run = [&](std::int64_t row, std::int64_t col0, std::int64_t col1) {
    float* p = scratch + (row * block.cols + col0) * kLanes;
    for (std::int64_t c = col0; c < col1; ++c, p += kLanes) _mm512_storeu_ps(p, zero);
  };
  for (std::int64_t row = 0; row < block.rows; ++row) {
    if (row < s.ph || row >= s.ph + s.h) {
      zero_run(row, 0, block.cols);
    } else {
      zero_run(row, 0, s.pw);
      zero_run(row, s.pw + s.w, block.cols);
    }
  }
}

// The planes of `channels` channels (at x, H*W floats apart) into the block's interior, 16 input
// pixels at a time: one masked load per channel, a transpose, one store per pixel. Channels past
// `channels` read as zero.
void copy_in(const ConvShape& s, const ChannelBlock& block, const float* x, std::int64_t channels,
             float* scratch) {
  const std::int64_t pixels = s.h * s.w;
  std::int64_t ih = 0, iw = 0;
  for (std::int64_t q0 = 0; q0 < pixels; q0 += kLanes) {
    const __mmask16 valid = lanes(pixels - q0);
    __m512 v[kLanes];
#pragma GCC unroll 16
    for (int i = 0; i < kLanes; ++i)
      v[i] = i < channels ? _mm512_maskz_loadu_ps(valid, x + i * pixels + q0) : _mm512_setzero_ps();
    avx512::transpose16x16(v);
    const std::int64_t count = min64(kLanes, pixels - q0);
#pragma GCC unroll 16
    for (int l = 0; l < kLanes; ++l) {
      if (l < count) {
        _mm512_storeu_ps(scratch + ((ih + s.ph) * block.cols + iw + s.pw) * kLanes, v[l]);
        if (++iw == s.w) {
          iw = 0;
          ++ih;
        }
      }
    }
  }
}

// The sums of kPix output pixels of one row, their top-left taps at a, a + step, ...: the taps
// outer and the pixels inner, so the kPix independent FMA chains interleave in program order and
// the core need not look far ahead to overlap them.
template <int kPix>
[[gnu::always_inline]] inline void sum_pixels(const __m512 (&wv)[9], const float* a, std::int64_t row,
                                              std::int64_t step, float* sum) {
  __m512 acc[kPix];
#pragma GCC unroll 8
  for (int i = 0; i < kPix; ++i) acc[i] = _mm512_mul_ps(wv[0], _mm512_loadu_ps(a + i * step));
#pragma GCC unroll 9
  for (int t = 1; t < 9; ++t) {
    const float* tap = a + (t / 3) * row + (t % 3) * kLanes;
#pragma GCC unroll 8
    for (int i = 0; i < kPix; ++i) acc[i] = _mm512_fmadd_ps(wv[t], _mm512_loadu_ps(tap + i * step), acc[i]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < kPix; ++i) _mm512_storeu_ps(sum + i * kLanes, acc[i]);
}

}  // namespace

void nchw_channel_block_avx512(const ConvShape& s, const ChannelBlock& block, const float* x, const float* w,
                               std::int64_t channels, float* y, float* scratch, const PostOps* post) {
  float* padded = scratch;
  float* sums = scratch + block.padded_floats();
  zero_border(s, block, padded);
  copy_in(s, block, x, channels, padded);

  // The nine taps as vectors over the block's channels: tap t of channel i is w[i * 9 + t].
  const __m512i filter_starts = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(9));
  const __mmask16 live = lanes(channels);
  __m512 wv[9];
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t)
    wv[t] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, filter_starts, w + t, 4);

  // Every output pixel's 16 channel sums, in pixel order.
  const std::int64_t row = block.cols * kLanes;  // floats from one padded row to the next
  const std::int64_t step = s.sw * kLanes;
  float* sum = sums;
  for (std::int64_t oh = 0; oh < s.ho; ++oh) {
    const float* a = padded + oh * s.sh * row;
    std::int64_t ow = 0;
    for (; ow + 8 <= s.wo; ow += 8, a += 8 * step, sum += 8 * kLanes) sum_pixels<8>(wv, a, row, step, sum);
    switch (s.wo - ow) {
      case 7:
        sum_pixels<7>(wv, a, row, step, sum);
        break;
      case 6:
        sum_pixels<6>(wv, a, row, step, sum);
        break;
      case 5:
        sum_pixels<5>(wv, a, row, step, sum);
        break;
      case 4:
        sum_pixels<4>(wv, a, row, step, sum);
        break;
      case 3:
        sum_pixels<3>(wv, a, row, step, sum);
        break;
      case 2:
        sum_pixels<2>(wv, a, row, step, sum);
        break;
      case 1:
        sum_pixels<1>(wv, a, row, step, sum);
        break;
      default:
        break;
    }
    sum += (s.wo - ow) * kLanes;
  }

  // Back to one plane per channel, 16 pixels at a time; the sums past the last pixel are stale
  // and not stored.
  const std::int64_t pixels = s.ho * s.wo;
  for (std::int64_t p0 = 0; p0 < pixels; p0 += kLanes) {
    __m512 v[kLanes];
#pragma GCC unroll 16
    for (int l = 0; l < kLanes; ++l) v[l] = _mm512_loadu_ps(sums + (p0 + l) * kLanes);
    avx512::transpose16x16(v);  // v[i]: channel i, pixels p0..p0+15
    const __mmask16 store = lanes(pixels - p0);
#pragma GCC unroll 16
    for (int i = 0; i < kLanes; ++i) {
      if (i < channels) {
        __m512 r[1] = {v[i]};
        if (post != nullptr) avx512::apply_post<1>(*post, i, p0, r, store);
        _mm512_mask_storeu_ps(y + i * pixels + p0, store, r[0]);
      }
    }
  }
}

}  // namespace galley::backends::cpu::depthwise
