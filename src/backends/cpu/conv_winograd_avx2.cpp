// AVX2 kernels of cpu.conv.winograd_f4x3 (see conv_winograd_kernels.hpp). Compiled with -mavx2
// -mfma; entered only after cpu_has_avx2_fma(). Every transform works on 8 channels per vector.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/conv_winograd_kernels.hpp"

namespace galley::backends::cpu::winograd {
namespace {

inline __m256 v(float f) { return _mm256_set1_ps(f); }

// t = B^T d for six vectors (one column or row of the tile).
inline void input_1d(const __m256 d[6], __m256 t[6]) {
  t[0] = _mm256_fmadd_ps(v(4.0f), d[0], _mm256_fmadd_ps(v(-5.0f), d[2], d[4]));
  t[1] = _mm256_fmadd_ps(v(-4.0f), _mm256_add_ps(d[1], d[2]), _mm256_add_ps(d[3], d[4]));
  t[2] = _mm256_fmadd_ps(v(4.0f), _mm256_sub_ps(d[1], d[2]), _mm256_sub_ps(d[4], d[3]));
  t[3] = _mm256_fmadd_ps(v(2.0f), _mm256_sub_ps(d[3], d[1]), _mm256_sub_ps(d[4], d[2]));
  t[4] = _mm256_fmadd_ps(v(2.0f), _mm256_sub_ps(d[1], d[3]), _mm256_sub_ps(d[4], d[2]));
  t[5] = _mm256_fmadd_ps(v(4.0f), d[1], _mm256_fmadd_ps(v(-5.0f), d[3], d[5]));
}

// o = A^T m: six vectors to four.
inline void output_1d(const __m256 m[6], __m256 o[4]) {
  const __m256 a = _mm256_add_ps(m[1], m[2]), b = _mm256_sub_ps(m[1], m[2]);
  const __m256 c = _mm256_add_ps(m[3], m[4]), d = _mm256_sub_ps(m[3], m[4]);
  o[0] = _mm256_add_ps(_mm256_add_ps(m[0], a), c);
  o[1] = _mm256_fmadd_ps(v(2.0f), d, b);
  o[2] = _mm256_fmadd_ps(v(4.0f), c, a);
  o[3] = _mm256_add_ps(_mm256_fmadd_ps(v(8.0f), d, b), m[5]);
}

// u = G g: three vectors to six.
inline void weight_1d(const __m256 g[3], __m256 u[6]) {
  const __m256 s02 = _mm256_add_ps(g[0], g[2]);
  u[0] = _mm256_mul_ps(v(0.25f), g[0]);
  u[1] = _mm256_mul_ps(v(-1.0f / 6.0f), _mm256_add_ps(s02, g[1]));
  u[2] = _mm256_mul_ps(v(-1.0f / 6.0f), _mm256_sub_ps(s02, g[1]));
  const __m256 p = _mm256_fmadd_ps(v(1.0f / 24.0f), g[0], _mm256_mul_ps(v(1.0f / 6.0f), g[2]));
  u[3] = _mm256_fmadd_ps(v(1.0f / 12.0f), g[1], p);
  u[4] = _mm256_fnmadd_ps(v(1.0f / 12.0f), g[1], p);
  u[5] = g[2];
}

__m256i lane_mask(std::int64_t count) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<std::int64_t>(count, 0, 8))), idx);
}

// 8x8 transpose: r[i] lanes j -> r[j] lanes i.
inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xee);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xee);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

struct TilePos {
  std::int64_t n, ih0, iw0, oh0, ow0;
};

// Tiles run image, row phase, column phase, tile row, tile column.
TilePos tile_pos(const Geometry& g, std::int64_t tile) {
  const ConvShape& s = g.s;
  const std::int64_t per_phase = g.tiles_h * g.tiles_w;
  const std::int64_t tw = tile % g.tiles_w, th = tile / g.tiles_w % g.tiles_h;
  const std::int64_t phase = tile / per_phase % (s.dh * s.dw);
  const std::int64_t n = tile / (per_phase * s.dh * s.dw);
  const std::int64_t oh0 = phase / s.dw + th * 4 * s.dh, ow0 = phase % s.dw + tw * 4 * s.dw;
  return {n, oh0 - s.ph, ow0 - s.pw, oh0, ow0};
}

// d[i][j] = the 6x6 input patch of 8 channels [c0, c0+8) (zero outside the image and past C).
void load_patch(const Geometry& g, const float* x, const TilePos& p, std::int64_t c0, __m256 d[6][6]) {
  const ConvShape& s = g.s;
  const std::int64_t lanes = std::min<std::int64_t>(8, s.c - c0);
  if (s.nhwc) {
    const __m256i mask = lane_mask(lanes);
    #pragma GCC unroll 16
    for (int i = 0; i < 6; ++i) {
      const std::int64_t ih = p.ih0 + i * s.dh;
      #pragma GCC unroll 16
      for (int j = 0; j < 6; ++j) {
        const std::int64_t iw = p.iw0 + j * s.dw;
        if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) {
          d[i][j] = _mm256_setzero_ps();
        } else {
          const float* src = x + ((p.n * s.h + ih) * s.w + iw) * s.c + c0;
          d[i][j] = lanes == 8 ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, mask);
        }
      }
    }
    return;
  }
  const float* xc = x + (p.n * s.c + c0) * s.h * s.w;
  const bool interior = lanes == 8 && s.dw == 1 && p.ih0 >= 0 && p.ih0 + 5 * s.dh < s.h && p.iw0 >= 0 &&
                        p.iw0 + 8 <= s.w;
  if (interior) {
    // Row i of 8 channels: load 8 columns per channel, transpose so lanes become channels.
    #pragma GCC unroll 16
    for (int i = 0; i < 6; ++i) {
      __m256 r[8];
      const std::int64_t ih = p.ih0 + i * s.dh;
      #pragma GCC unroll 16
      for (int l = 0; l < 8; ++l) r[l] = _mm256_loadu_ps(xc + l * s.h * s.w + ih * s.w + p.iw0);
      transpose8(r);
      #pragma GCC unroll 16
      for (int j = 0; j < 6; ++j) d[i][j] = r[j];
    }
    return;
  }
  alignas(32) float stage[6][6][8];
  #pragma GCC unroll 16
  for (int i = 0; i < 6; ++i) {
    const std::int64_t ih = p.ih0 + i * s.dh;
    #pragma GCC unroll 16
    for (int j = 0; j < 6; ++j) {
      const std::int64_t iw = p.iw0 + j * s.dw;
      const bool inside = ih >= 0 && ih < s.h && iw >= 0 && iw < s.w;
      #pragma GCC unroll 16
      for (int l = 0; l < 8; ++l) stage[i][j][l] = inside && l < lanes ? xc[l * s.h * s.w + ih * s.w + iw] : 0.0f;
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < 6; ++i) {
    #pragma GCC unroll 16
    for (int j = 0; j < 6; ++j) d[i][j] = _mm256_load_ps(stage[i][j]);
  }
}

// Writes a 4x4 output tile of 8 channels [k0, k0+8), clipped to Ho x Wo and K.
void store_tile(const Geometry& g, float* y, const TilePos& p, std::int64_t k0, __m256 o[4][4]) {
  const ConvShape& s = g.s;
  const std::int64_t lanes = std::min<std::int64_t>(8, s.k - k0);
  // Outputs (oh0 + i*dh, ow0 + j*dw) that exist.
  const std::int64_t rows = std::clamp<std::int64_t>((s.ho - p.oh0 + s.dh - 1) / s.dh, 0, 4);
  const std::int64_t cols = std::clamp<std::int64_t>((s.wo - p.ow0 + s.dw - 1) / s.dw, 0, 4);
  if (s.nhwc) {
    const __m256i mask = lane_mask(lanes);
    for (std::int64_t i = 0; i < rows; ++i) {
      for (std::int64_t j = 0; j < cols; ++j) {
        float* dst = y + ((p.n * s.ho + p.oh0 + i * s.dh) * s.wo + p.ow0 + j * s.dw) * s.k + k0;
        if (lanes == 8) {
          _mm256_storeu_ps(dst, o[i][j]);
        } else {
          _mm256_maskstore_ps(dst, mask, o[i][j]);
        }
      }
    }
    return;
  }
  const std::int64_t plane = s.ho * s.wo;
  float* yk = y + (p.n * s.k + k0) * plane + p.oh0 * s.wo + p.ow0;
  if (lanes == 8 && cols == 4 && s.dw == 1) {
    // Per row: 4 column vectors of 8 channels -> 8 channel rows of 4 columns.
    for (std::int64_t i = 0; i < rows; ++i) {
      const __m256 t0 = _mm256_unpacklo_ps(o[i][0], o[i][1]), t1 = _mm256_unpackhi_ps(o[i][0], o[i][1]);
      const __m256 t2 = _mm256_unpacklo_ps(o[i][2], o[i][3]), t3 = _mm256_unpackhi_ps(o[i][2], o[i][3]);
      const __m256 c04 = _mm256_shuffle_ps(t0, t2, 0x44), c15 = _mm256_shuffle_ps(t0, t2, 0xee);
      const __m256 c26 = _mm256_shuffle_ps(t1, t3, 0x44), c37 = _mm256_shuffle_ps(t1, t3, 0xee);
      float* row = yk + i * s.dh * s.wo;
      _mm_storeu_ps(row + 0 * plane, _mm256_castps256_ps128(c04));
      _mm_storeu_ps(row + 1 * plane, _mm256_castps256_ps128(c15));
      _mm_storeu_ps(row + 2 * plane, _mm256_castps256_ps128(c26));
      _mm_storeu_ps(row + 3 * plane, _mm256_castps256_ps128(c37));
      _mm_storeu_ps(row + 4 * plane, _mm256_extractf128_ps(c04, 1));
      _mm_storeu_ps(row + 5 * plane, _mm256_extractf128_ps(c15, 1));
      _mm_storeu_ps(row + 6 * plane, _mm256_extractf128_ps(c26, 1));
      _mm_storeu_ps(row + 7 * plane, _mm256_extractf128_ps(c37, 1));
    }
    return;
  }
  alignas(32) float stage[4][4][8];
  #pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) {
    #pragma GCC unroll 16
    for (int j = 0; j < 4; ++j) _mm256_store_ps(stage[i][j], o[i][j]);
  }
  for (std::int64_t l = 0; l < lanes; ++l) {
    for (std::int64_t i = 0; i < rows; ++i) {
      for (std::int64_t j = 0; j < cols; ++j) yk[l * plane + i * s.dh * s.wo + j * s.dw] = stage[i][j][l];
    }
  }
}

// Tiles [0, kW) x 16 channels of one GEMM, over input channels [c0, c1): the partial sum starts
// from zero for the first chunk and from M afterwards. Summing in chunks keeps the rounding
// error of long reductions near that of a blocked GEMM; Winograd's transforms already amplify it.
template <int kW>
void multiply_block(const float* up, const float* vx, std::int64_t c0, std::int64_t c1, std::int64_t cp,
                    std::int64_t k16, float* mx) {
  __m256 acc[kW][2];
  #pragma GCC unroll 16
  for (auto& a : acc) a[0] = a[1] = _mm256_setzero_ps();
  for (std::int64_t c = c0; c < c1; ++c) {
    const __m256 u0 = _mm256_loadu_ps(up + c * 16), u1 = _mm256_loadu_ps(up + c * 16 + 8);
    #pragma GCC unroll 16
    for (int j = 0; j < kW; ++j) {
      const __m256 b = _mm256_broadcast_ss(vx + j * cp + c);
      acc[j][0] = _mm256_fmadd_ps(u0, b, acc[j][0]);
      acc[j][1] = _mm256_fmadd_ps(u1, b, acc[j][1]);
    }
  }
  #pragma GCC unroll 16
  for (int j = 0; j < kW; ++j) {
    if (c0 != 0) {
      acc[j][0] = _mm256_add_ps(acc[j][0], _mm256_loadu_ps(mx + j * k16));
      acc[j][1] = _mm256_add_ps(acc[j][1], _mm256_loadu_ps(mx + j * k16 + 8));
    }
    _mm256_storeu_ps(mx + j * k16, acc[j][0]);
    _mm256_storeu_ps(mx + j * k16 + 8, acc[j][1]);
  }
}

}  // namespace

void transform_weights(const Geometry& g, const float* w, std::int64_t k0, std::int64_t c0, std::int64_t c1,
                       float* u) {
  const ConvShape& s = g.s;
  const std::int64_t lanes = std::min<std::int64_t>(8, s.k - k0);
  const std::int64_t panel = k0 / 16, lane0 = k0 % 16;
  for (std::int64_t c = c0; c < c1; ++c) {
    // Gather the 3x3 filters of 8 output channels so lanes are channels.
    alignas(32) float stage[9][8];
    #pragma GCC unroll 16
    for (int t = 0; t < 9; ++t) {
      for (std::int64_t l = 0; l < 8; ++l) {
        if (l >= lanes) {
          stage[t][l] = 0.0f;
        } else {
          const std::int64_t k = k0 + l;
          stage[t][l] = s.nhwc ? w[(k * 9 + t) * s.c + c] : w[(k * s.c + c) * 9 + t];
        }
      }
    }
    __m256 gcol[3][6];  // G applied down each filter column
    for (int j = 0; j < 3; ++j) {
      const __m256 col[3] = {_mm256_load_ps(stage[j]), _mm256_load_ps(stage[3 + j]), _mm256_load_ps(stage[6 + j])};
      weight_1d(col, gcol[j]);
    }
    #pragma GCC unroll 16
    for (int i = 0; i < 6; ++i) {
      const __m256 row[3] = {gcol[0][i], gcol[1][i], gcol[2][i]};
      __m256 out[6];
      weight_1d(row, out);
      #pragma GCC unroll 16
      for (int j = 0; j < 6; ++j) {
        float* dst = u + (((6 * i + j) * (g.k16 / 16) + panel) * s.c + c) * 16 + lane0;
        _mm256_storeu_ps(dst, out[j]);
      }
    }
  }
}

void transform_input(const Geometry& g, const float* x, std::int64_t first, std::int64_t t0, std::int64_t t1,
                     std::int64_t c0, float* vbuf) {
  for (std::int64_t t = t0; t < t1; ++t) {
    __m256 d[6][6];
    load_patch(g, x, tile_pos(g, first + t), c0, d);
    __m256 cols[6][6];  // B^T applied down each column
    #pragma GCC unroll 16
    for (int j = 0; j < 6; ++j) {
      const __m256 col[6] = {d[0][j], d[1][j], d[2][j], d[3][j], d[4][j], d[5][j]};
      input_1d(col, cols[j]);
    }
    #pragma GCC unroll 16
    for (int i = 0; i < 6; ++i) {
      const __m256 row[6] = {cols[0][i], cols[1][i], cols[2][i], cols[3][i], cols[4][i], cols[5][i]};
      __m256 out[6];
      input_1d(row, out);
      #pragma GCC unroll 16
      for (int j = 0; j < 6; ++j) _mm256_storeu_ps(vbuf + ((6 * i + j) * g.block + t) * g.cp + c0, out[j]);
    }
  }
}

void multiply(const Geometry& g, const float* u, const float* vbuf, std::int64_t xi, std::int64_t kb,
              std::int64_t count, float* m) {
  constexpr std::int64_t kChunk = 64;  // input channels per partial sum (a 4 KiB slice of U)
  const std::int64_t channels = g.s.c;
  const float* up = u + (xi * (g.k16 / 16) + kb) * channels * 16;
  const float* vx = vbuf + xi * g.block * g.cp;
  float* mx = m + xi * g.block * g.k16 + kb * 16;
  for (std::int64_t c0 = 0; c0 < channels; c0 += kChunk) {
    const std::int64_t c1 = std::min(channels, c0 + kChunk);
    std::int64_t t = 0;
    for (; t + 6 <= count; t += 6) multiply_block<6>(up, vx + t * g.cp, c0, c1, g.cp, g.k16, mx + t * g.k16);
    const float* vt = vx + t * g.cp;
    float* mt = mx + t * g.k16;
    switch (count - t) {
      case 5: multiply_block<5>(up, vt, c0, c1, g.cp, g.k16, mt); break;
      case 4: multiply_block<4>(up, vt, c0, c1, g.cp, g.k16, mt); break;
      case 3: multiply_block<3>(up, vt, c0, c1, g.cp, g.k16, mt); break;
      case 2: multiply_block<2>(up, vt, c0, c1, g.cp, g.k16, mt); break;
      case 1: multiply_block<1>(up, vt, c0, c1, g.cp, g.k16, mt); break;
      default: break;
    }
  }
}

void transform_output(const Geometry& g, const float* m, std::int64_t first, std::int64_t t0, std::int64_t t1,
                      std::int64_t k0, float* y) {
  for (std::int64_t t = t0; t < t1; ++t) {
    __m256 cols[6][4];  // A^T applied down each column
    #pragma GCC unroll 16
    for (int j = 0; j < 6; ++j) {
      __m256 col[6];
      #pragma GCC unroll 16
      for (int i = 0; i < 6; ++i) col[i] = _mm256_loadu_ps(m + ((6 * i + j) * g.block + t) * g.k16 + k0);
      output_1d(col, cols[j]);
    }
    __m256 o[4][4];
    #pragma GCC unroll 16
    for (int i = 0; i < 4; ++i) {
      const __m256 row[6] = {cols[0][i], cols[1][i], cols[2][i], cols[3][i], cols[4][i], cols[5][i]};
      output_1d(row, o[i]);
    }
    store_tile(g, y, tile_pos(g, first + t), k0, o);
  }
}

}  // namespace galley::backends::cpu::winograd
