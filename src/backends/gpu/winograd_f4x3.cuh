// Winograd F(4, 3) over the points 0, +-1, +-2, inf (Lavin & Gray) as 1-D transforms of one vector
// each, applied along columns and then rows for the 2-D F(4x4, 3x3). Forward (gpu.conv.winograd):
// y = A^T [(G g G^T) . (B^T d B)] A. Its transpose computes a weight gradient
// (gpu.conv.bwd_weights_winograd): the 3x3 correlation of a 6x6 input tile d with a 4x4 output-gradient
// tile e is G^T [(A e A^T) . (B^T d B)] G, the same 36 products in the same points.
#pragma once

#include <cstdint>

#include "conv_params.hpp"

namespace galley::backends::gpu {

// B^T d for one 6-vector (stride `st` apart in `d`), into v[0..5].
__device__ __forceinline__ void in_1d(const float* d, int st, float* v, int vs) {
  const float d0 = d[0], d1 = d[st], d2 = d[2 * st], d3 = d[3 * st], d4 = d[4 * st], d5 = d[5 * st];
  v[0] = 4.f * d0 - 5.f * d2 + d4;
  v[vs] = -4.f * d1 - 4.f * d2 + d3 + d4;
  v[2 * vs] = 4.f * d1 - 4.f * d2 - d3 + d4;
  v[3 * vs] = -2.f * d1 - d2 + 2.f * d3 + d4;
  v[4 * vs] = 2.f * d1 - d2 - 2.f * d3 + d4;
  v[5 * vs] = 4.f * d1 - 5.f * d3 + d5;
}

// G g for one 3-vector.
__device__ __forceinline__ void filter_1d(const float* g, int st, float* u, int us) {
  const float g0 = g[0], g1 = g[st], g2 = g[2 * st];
  u[0] = 0.25f * g0;
  u[us] = -(g0 + g1 + g2) * (1.f / 6.f);
  u[2 * us] = -(g0 - g1 + g2) * (1.f / 6.f);
  u[3 * us] = g0 * (1.f / 24.f) + g1 * (1.f / 12.f) + g2 * (1.f / 6.f);
  u[4 * us] = g0 * (1.f / 24.f) - g1 * (1.f / 12.f) + g2 * (1.f / 6.f);
  u[5 * us] = g2;
}

// A^T m for one 6-vector, into y[0..3].
__device__ __forceinline__ void out_1d(const float* m, int st, float* y, int ys) {
  const float m0 = m[0], m1 = m[st], m2 = m[2 * st], m3 = m[3 * st], m4 = m[4 * st], m5 = m[5 * st];
  y[0] = m0 + m1 + m2 + m3 + m4;
  y[ys] = m1 - m2 + 2.f * (m3 - m4);
  y[2 * ys] = m1 + m2 + 4.f * (m3 + m4);
  y[3 * ys] = m1 - m2 + 8.f * (m3 - m4) + m5;
}

// A e for one 4-vector (an output-gradient run), into u[0..5].
__device__ __forceinline__ void grad_1d(const float* e, int st, float* u, int us) {
  const float e0 = e[0], e1 = e[st], e2 = e[2 * st], e3 = e[3 * st];
  u[0] = e0;
  u[us] = e0 + e1 + e2 + e3;
  u[2 * us] = e0 - e1 + e2 - e3;
  u[3 * us] = e0 + 2.f * e1 + 4.f * e2 + 8.f * e3;
  u[4 * us] = e0 - 2.f * e1 + 4.f * e2 - 8.f * e3;
  u[5 * us] = e3;
}

// G^T m for one 6-vector, into w[0..2] (three taps of a weight gradient).
__device__ __forceinline__ void weight_grad_1d(const float* m, int st, float* w, int ws) {
  const float m0 = m[0], m1 = m[st], m2 = m[2 * st], m3 = m[3 * st], m4 = m[4 * st], m5 = m[5 * st];
  w[0] = 0.25f * m0 - (m1 + m2) * (1.f / 6.f) + (m3 + m4) * (1.f / 24.f);
  w[ws] = (m2 - m1) * (1.f / 6.f) + (m3 - m4) * (1.f / 12.f);
  w[2 * ws] = (m3 + m4 - m1 - m2) * (1.f / 6.f) + m5;
}

/// Tile t of the n * tiles_h * tiles_w 4x4 output tiles: image n, tile row th, tile column tw.
__device__ __forceinline__ void tile_position(std::int64_t t, int tiles_h, int tiles_w, int& n, int& th,
                                              int& tw) {
  const int tiles = tiles_h * tiles_w;
  n = int(t / tiles);
  const int rem = int(t - std::int64_t(n) * tiles);
  th = rem / tiles_w, tw = rem - th * tiles_w;
}

/// B^T d B of the 6x6 tile of x (p's layout) at rows h0.., columns w0.. of image n, channel c, zero
/// outside x, into r[36] (row-major).
template <bool kNhwc>
__device__ __forceinline__ void input_tile_transform(const ConvParams& p, const float* __restrict__ x, int n,
                                                     int c, int h0, int w0, float* r) {
  float d[36];
#pragma unroll
  for (int i = 0; i < 6; ++i) {
#pragma unroll
    for (int j = 0; j < 6; ++j) {
      const int h = h0 + i, ww = w0 + j;
      const bool ok = unsigned(h) < unsigned(p.h) && unsigned(ww) < unsigned(p.w);
      const std::int64_t at = kNhwc ? ((std::int64_t(n) * p.h + h) * p.w + ww) * p.c + c
                                    : ((std::int64_t(n) * p.c + c) * p.h + h) * p.w + ww;
      d[i * 6 + j] = ok ? __ldg(x + at) : 0.f;
    }
  }
  float tmp[36];
#pragma unroll
  for (int col = 0; col < 6; ++col) in_1d(d + col, 6, tmp + col, 6);  // B^T d
#pragma unroll
  for (int row = 0; row < 6; ++row) in_1d(tmp + row * 6, 1, r + row * 6, 1);  // (B^T d) B
}

}  // namespace galley::backends::gpu
