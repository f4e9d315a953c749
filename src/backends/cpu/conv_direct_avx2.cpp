// AVX2 row kernel of cpu.conv.direct (see conv_direct_kernels.hpp). Compiled with -mavx2 -mfma;
// entered only after cpu_has_avx2_fma().
//
// Register blocking: kV vectors of output channels x kW output columns of accumulators
// (2 x 6 for 16-channel blocks, 1 x 12 for 8-channel blocks): 12 of the 16 ymm registers, with
// the rest holding the weight vectors and the broadcast input. Per tap: kV weight loads, kW
// broadcasts, kV*kW FMAs.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/conv_direct_kernels.hpp"

namespace galley::backends::cpu::direct {
namespace {

// kW columns starting at ow, all of whose taps lie inside the image horizontally.
template <int kV, int kW>
void block_interior(const Geometry& g, const float* xg, const float* wp, std::int64_t oh, std::int64_t ow,
                    std::int64_t r_lo, std::int64_t r_hi, float* tile) {
  const ConvShape& s = g.s;
  __m256 acc[kW][kV];
  for (auto& col : acc) {
    for (auto& v : col) v = _mm256_setzero_ps();
  }
  const std::int64_t xstep = s.sw * g.x_ws;
  const std::int64_t tap_step = s.dw * g.x_ws;
  const float* x0 = xg + (oh * s.sh - s.ph) * g.x_hs + (ow * s.sw - s.pw) * g.x_ws;
  for (std::int64_t c = 0; c < s.cg; ++c) {
    for (std::int64_t r = r_lo; r < r_hi; ++r) {
      const float* xs = x0 + c * g.x_cs + r * s.dh * g.x_hs;
      const float* wr = wp + (c * s.r + r) * s.s * g.kbw;
      for (std::int64_t q = 0; q < s.s; ++q, xs += tap_step, wr += g.kbw) {
        __m256 wv[kV];
        for (int v = 0; v < kV; ++v) wv[v] = _mm256_loadu_ps(wr + 8 * v);
        for (int j = 0; j < kW; ++j) {
          const __m256 b = _mm256_broadcast_ss(xs + j * xstep);
          for (int v = 0; v < kV; ++v) acc[j][v] = _mm256_fmadd_ps(wv[v], b, acc[j][v]);
        }
      }
    }
  }
  for (int j = 0; j < kW; ++j) {
    for (int v = 0; v < kV; ++v) _mm256_storeu_ps(tile + (ow + j) * g.kbw + 8 * v, acc[j][v]);
  }
}

// One column near the left or right edge: taps outside the image are skipped.
template <int kV>
void column_edge(const Geometry& g, const float* xg, const float* wp, std::int64_t oh, std::int64_t ow,
                 std::int64_t r_lo, std::int64_t r_hi, float* tile) {
  const ConvShape& s = g.s;
  __m256 acc[kV];
  for (auto& v : acc) v = _mm256_setzero_ps();
  for (std::int64_t c = 0; c < s.cg; ++c) {
    for (std::int64_t r = r_lo; r < r_hi; ++r) {
      const float* xr = xg + c * g.x_cs + (oh * s.sh - s.ph + r * s.dh) * g.x_hs;
      const float* wr = wp + (c * s.r + r) * s.s * g.kbw;
      for (std::int64_t q = 0; q < s.s; ++q) {
        const std::int64_t iw = ow * s.sw - s.pw + q * s.dw;
        if (iw < 0 || iw >= s.w) continue;
        const __m256 b = _mm256_broadcast_ss(xr + iw * g.x_ws);
        for (int v = 0; v < kV; ++v) acc[v] = _mm256_fmadd_ps(_mm256_loadu_ps(wr + q * g.kbw + 8 * v), b, acc[v]);
      }
    }
  }
  for (int v = 0; v < kV; ++v) _mm256_storeu_ps(tile + ow * g.kbw + 8 * v, acc[v]);
}

template <int kV, int kW>
void row(const Geometry& g, const float* xg, const float* wp, std::int64_t oh, float* tile) {
  const ConvShape& s = g.s;
  // Filter rows that fall inside the image are the same for the whole output row.
  std::int64_t r_lo = 0, r_hi = s.r;
  while (r_lo < s.r && oh * s.sh - s.ph + r_lo * s.dh < 0) ++r_lo;
  while (r_hi > r_lo && oh * s.sh - s.ph + (r_hi - 1) * s.dh >= s.h) --r_hi;
  std::int64_t ow = 0;
  for (; ow < g.ow_lo; ++ow) column_edge<kV>(g, xg, wp, oh, ow, r_lo, r_hi, tile);
  for (; ow + kW <= g.ow_hi; ow += kW) block_interior<kV, kW>(g, xg, wp, oh, ow, r_lo, r_hi, tile);
  for (; ow < g.ow_hi; ++ow) block_interior<kV, 1>(g, xg, wp, oh, ow, r_lo, r_hi, tile);
  for (; ow < s.wo; ++ow) column_edge<kV>(g, xg, wp, oh, ow, r_lo, r_hi, tile);
}

}  // namespace

void row_avx2(const Geometry& g, const float* xg, const float* wp, std::int64_t oh, float* tile) {
  if (g.kbw == 16) {
    row<2, 6>(g, xg, wp, oh, tile);
  } else {
    row<1, 12>(g, xg, wp, oh, tile);
  }
}

}  // namespace galley::backends::cpu::direct
