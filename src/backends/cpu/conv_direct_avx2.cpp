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

// A zero to broadcast for taps that fall in the padding.
alignas(32) const float kZero[8] = {};

// kW columns starting at ow. kInterior: every tap column lies inside the image, so there are no
// checks; otherwise taps in the padding broadcast a zero (the pointer is switched, not the FMA,
// so the block keeps its full register blocking at the image edges).
// Input channels [c0, c1) are added to the partial sums in the tile (or start them when c0 == 0).
template <int kV, int kW, bool kInterior>
void block(const Geometry& g, const float* xg, const float* wp, std::int64_t oh, std::int64_t ow, std::int64_t r_lo,
           std::int64_t r_hi, std::int64_t c0, std::int64_t c1, float* tile) {
  const ConvShape& s = g.s;
  __m256 acc[kW][kV];
  #pragma GCC unroll 16
  for (int j = 0; j < kW; ++j) {
    #pragma GCC unroll 16
    for (int v = 0; v < kV; ++v) {
      acc[j][v] = c0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(tile + (ow + j) * g.kbw + 8 * v);
    }
  }
  const std::int64_t xstep = s.sw * g.x_ws;
  const std::int64_t tap_step = s.dw * g.x_ws;
  const std::int64_t iw0 = ow * s.sw - s.pw;
  const float* x0 = xg + (oh * s.sh - s.ph) * g.x_hs + iw0 * g.x_ws;
  for (std::int64_t c = c0; c < c1; ++c) {
    for (std::int64_t r = r_lo; r < r_hi; ++r) {
      const float* xs = x0 + c * g.x_cs + r * s.dh * g.x_hs;
      const float* wr = wp + (c * s.r + r) * s.s * g.kbw;
      for (std::int64_t q = 0; q < s.s; ++q, xs += tap_step, wr += g.kbw) {
        __m256 wv[kV];
        #pragma GCC unroll 16
        for (int v = 0; v < kV; ++v) wv[v] = _mm256_loadu_ps(wr + 8 * v);
        #pragma GCC unroll 16
        for (int j = 0; j < kW; ++j) {
          const float* src = xs + j * xstep;
          if constexpr (!kInterior) {
            const std::int64_t iw = iw0 + j * s.sw + q * s.dw;
            if (iw < 0 || iw >= s.w) src = kZero;
          }
          const __m256 b = _mm256_broadcast_ss(src);
          #pragma GCC unroll 16
          for (int v = 0; v < kV; ++v) acc[j][v] = _mm256_fmadd_ps(wv[v], b, acc[j][v]);
        }
      }
    }
  }
  #pragma GCC unroll 16
  for (int j = 0; j < kW; ++j) {
    #pragma GCC unroll 16
    for (int v = 0; v < kV; ++v) _mm256_storeu_ps(tile + (ow + j) * g.kbw + 8 * v, acc[j][v]);
  }
}

template <int kV, int kW>
void block_any(const Geometry& g, const float* xg, const float* wp, std::int64_t oh, std::int64_t ow,
               std::int64_t r_lo, std::int64_t r_hi, std::int64_t c0, std::int64_t c1, float* tile) {
  if (ow >= g.ow_lo && ow + kW <= g.ow_hi) {
    block<kV, kW, true>(g, xg, wp, oh, ow, r_lo, r_hi, c0, c1, tile);
  } else {
    block<kV, kW, false>(g, xg, wp, oh, ow, r_lo, r_hi, c0, c1, tile);
  }
}

// Columns [ow, ow + width) with width <= kMax, dispatched to a compile-time width.
template <int kV, int kMax>
void block_width(const Geometry& g, const float* xg, const float* wp, std::int64_t oh, std::int64_t ow,
                 std::int64_t width, std::int64_t r_lo, std::int64_t r_hi, std::int64_t c0, std::int64_t c1,
                 float* tile) {
  if constexpr (kMax > 0) {
    if (width == kMax) {
      block_any<kV, kMax>(g, xg, wp, oh, ow, r_lo, r_hi, c0, c1, tile);
    } else {
      block_width<kV, kMax - 1>(g, xg, wp, oh, ow, width, r_lo, r_hi, c0, c1, tile);
    }
  }
}

template <int kV, int kW>
void rows(const Geometry& g, const float* x, std::int64_t gi, const float* wp, std::int64_t row0, std::int64_t row1,
          float* tile) {
  const ConvShape& s = g.s;
  // Near-equal blocks of at most kW columns: 7 columns become 4 + 3, not 6 + 1, so no block is
  // left with too few accumulators to hide the FMA latency.
  const std::int64_t blocks = (s.wo + kW - 1) / kW;
  // Input channels in chunks whose packed weights (kChunkBytes) stay in L1 while every row of
  // the task uses them; the partial sums wait in the tile between chunks.
  constexpr std::int64_t kChunkBytes = 16 << 10;
  const std::int64_t chunk = std::max<std::int64_t>(1, kChunkBytes / (s.r * s.s * g.kbw * 4));
  for (std::int64_t c0 = 0; c0 < s.cg; c0 += chunk) {
    const std::int64_t c1 = std::min(s.cg, c0 + chunk);
    for (std::int64_t row = row0; row < row1; ++row) {
      const std::int64_t n = row / s.ho, oh = row % s.ho;
      const float* xg = x + n * s.c * s.h * s.w + gi * s.cg * g.x_cs;
      float* trow = tile + (row - row0) * s.wo * g.kbw;
      // Filter rows that fall inside the image are the same for the whole output row.
      std::int64_t r_lo = 0, r_hi = s.r;
      while (r_lo < s.r && oh * s.sh - s.ph + r_lo * s.dh < 0) ++r_lo;
      while (r_hi > r_lo && oh * s.sh - s.ph + (r_hi - 1) * s.dh >= s.h) --r_hi;
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int64_t ow0 = s.wo * b / blocks, ow1 = s.wo * (b + 1) / blocks;
        block_width<kV, kW>(g, xg, wp, oh, ow0, ow1 - ow0, r_lo, r_hi, c0, c1, trow);
      }
    }
  }
}

}  // namespace

void rows_avx2(const Geometry& g, const float* x, std::int64_t gi, const float* wp, std::int64_t row0,
               std::int64_t row1, float* tile) {
  if (g.kbw == 16) {
    rows<2, 6>(g, x, gi, wp, row0, row1, tile);
  } else {
    rows<1, 12>(g, x, gi, wp, row0, row1, tile);
  }
}

}  // namespace galley::backends::cpu::direct
