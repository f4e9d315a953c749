// The AVX-512 batched GEMM of cpu.conv.winograd_f4x3 (see conv_winograd_kernels.hpp); the
// transforms stay AVX2. Compiled with AVX-512 F/BW/VL/DQ; entered only after cpu_has_avx512().
// Nothing here instantiates a standard-library template (see sgemm_avx512.cpp).
#include <immintrin.h>

#include "backends/cpu/conv_winograd_kernels.hpp"

namespace galley::backends::cpu::winograd {
namespace {

constexpr std::int64_t kChunk = 64;  // input channels per partial sum, as the AVX2 loop does
constexpr int kTiles = 12;           // tiles per register block: 12 x 2 panels = 24 accumulators

// M rows [0, kW) x kP panels of 16 output channels += V rows x U panels over channels [c0, c1).
template <int kW, int kP>
void block(const float* up, std::int64_t panel_stride, const float* vx, std::int64_t c0, std::int64_t c1,
           std::int64_t cp, std::int64_t k16, float* mx) {
  __m512 acc[kW][kP];
#pragma GCC unroll 16
  for (int j = 0; j < kW; ++j) {
#pragma GCC unroll 2
    for (int q = 0; q < kP; ++q) acc[j][q] = _mm512_setzero_ps();
  }
  for (std::int64_t c = c0; c < c1; ++c) {
    __m512 uv[kP];
#pragma GCC unroll 2
    for (int q = 0; q < kP; ++q) uv[q] = _mm512_loadu_ps(up + q * panel_stride + c * 16);
#pragma GCC unroll 16
    for (int j = 0; j < kW; ++j) {
      const __m512 b = _mm512_set1_ps(vx[j * cp + c]);
#pragma GCC unroll 2
      for (int q = 0; q < kP; ++q) acc[j][q] = _mm512_fmadd_ps(uv[q], b, acc[j][q]);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < kW; ++j) {
#pragma GCC unroll 2
    for (int q = 0; q < kP; ++q) {
      float* dst = mx + j * k16 + q * 16;
      if (c0 != 0) acc[j][q] = _mm512_add_ps(acc[j][q], _mm512_loadu_ps(dst));
      _mm512_storeu_ps(dst, acc[j][q]);
    }
  }
}

template <int kP>
void rows(const float* up, std::int64_t panel_stride, const float* vx, std::int64_t c0, std::int64_t c1,
          std::int64_t cp, std::int64_t k16, std::int64_t count, float* mx) {
  std::int64_t t = 0;
  for (; t + kTiles <= count; t += kTiles) block<kTiles, kP>(up, panel_stride, vx + t * cp, c0, c1, cp, k16, mx + t * k16);
  const float* vt = vx + t * cp;
  float* mt = mx + t * k16;
  switch (count - t) {
    case 11: block<11, kP>(up, panel_stride, vt, c0, c1, cp, k16, mt); break;
    case 10: block<10, kP>(up, panel_stride, vt, c0, c1, cp, k16, mt); break;
    case 9: block<9, kP>(up, panel_stride, vt, c0, c1, cp, k16, mt); break;
    case 8: block<8, kP>(up, panel_stride, vt, c0, c1, cp, k16, mt); break;
    case 7: block<7, kP>(up, panel_stride, vt, c0, c1, cp, k16, mt); break;
    case 6: block<6, kP>(up, panel_stride, vt, c0, c1, cp, k16, mt); break;
    case 5: block<5, kP>(up, panel_stride, vt, c0, c1, cp, k16, mt); break;
    case 4: block<4, kP>(up, panel_stride, vt, c0, c1, cp, k16, mt); break;
    case 3: block<3, kP>(up, panel_stride, vt, c0, c1, cp, k16, mt); break;
    case 2: block<2, kP>(up, panel_stride, vt, c0, c1, cp, k16, mt); break;
    case 1: block<1, kP>(up, panel_stride, vt, c0, c1, cp, k16, mt); break;
    default: break;
  }
}

}  // namespace

void multiply_avx512(const Geometry& g, const float* u, const float* vbuf, std::int64_t xi, std::int64_t kb,
                     std::int64_t panels, std::int64_t count, float* m) {
  const std::int64_t channels = g.s.c;
  const std::int64_t panel_stride = channels * 16;
  const float* up = u + (xi * (g.k16 / 16) + kb) * panel_stride;
  const float* vx = vbuf + xi * g.block * g.cp;
  float* mx = m + xi * g.block * g.k16 + kb * 16;
  for (std::int64_t c0 = 0; c0 < channels; c0 += kChunk) {
    const std::int64_t c1 = c0 + kChunk < channels ? c0 + kChunk : channels;
    if (panels >= 2) {
      rows<2>(up, panel_stride, vx, c0, c1, g.cp, g.k16, count, mx);
    } else {
      rows<1>(up, panel_stride, vx, c0, c1, g.cp, g.k16, count, mx);
    }
  }
}

}  // namespace galley::backends::cpu::winograd
