// Transforms and the batched GEMM of cpu.conv.winograd_f4x3, F(4x4, 3x3) (Lavin & Gray 2016):
// a 6x6 input tile d gives a 4x4 output tile Y = A^T [ (G g G^T) (.) (B^T d B) ] A, 36
// multiplications per output tile instead of 144. Everything runs 8 channels per AVX2 vector
// (conv_winograd_avx2.cpp, entered only after cpu_has_avx2_fma()), except that the batched GEMM
// has an AVX-512 twin taking two 16-channel panels at a time (conv_winograd_avx512.cpp).
//
// Dilation d is handled by phases: the outputs with oh % dh == a and ow % dw == b form an
// ordinary dense 3x3 convolution of the input rows and columns of the same phase, so a tile
// covers outputs (oh0 + i*dh, ow0 + j*dw) and reads inputs (ih0 + i*dh, iw0 + j*dw).
//
// Buffers, xi = 6*i + j indexing the 36 transformed positions:
//   U[xi][K16/16][C][16]  weights, in 16-output-channel panels (the GEMM's vector operand)
//   V[xi][T][Cp]          inputs of a block of T tiles, Cp = C rounded up to 8
//   M[xi][T][K16]         products, K16 = K rounded up to 16
#pragma once

#include <cstdint>

#include "backends/cpu/conv_base.hpp"

namespace galley::backends::cpu::winograd {

struct Geometry {
  ConvShape s;
  std::int64_t tiles_h, tiles_w;  ///< 4x4 tiles per phase: ceil(ceil(Ho/dh)/4) x ceil(ceil(Wo/dw)/4)
  std::int64_t tiles;             ///< over the batch: N * dh * dw * tiles_h * tiles_w
  std::int64_t cp, k16;           ///< C rounded up to 8, K rounded up to 16
  std::int64_t block;             ///< tiles per pass (V and M hold one pass)
  std::int64_t u_floats() const { return 36 * k16 * s.c; }
  std::int64_t v_floats() const { return 36 * block * cp; }
  std::int64_t m_floats() const { return 36 * block * k16; }
  static Geometry of(const ConvShape& s);
};

/// U for output channels [k0, k0+8) (k0 a multiple of 8), input channels [c0, c1).
void transform_weights(const Geometry& g, const float* w, std::int64_t k0, std::int64_t c0, std::int64_t c1, float* u);
/// V for tiles [t0, t1) of the pass starting at tile `first` and channels [c0, c0+8).
void transform_input(const Geometry& g, const float* x, std::int64_t first, std::int64_t t0, std::int64_t t1,
                     std::int64_t c0, float* v);
/// M[xi][t][kb*16 .. +16] = V[xi][t][:] * U[xi][kb] for all `count` tiles of the pass.
void multiply(const Geometry& g, const float* u, const float* v, std::int64_t xi, std::int64_t kb,
              std::int64_t count, float* m);
/// The same for `panels` (1 or 2) consecutive panels kb, kb+1 with AVX-512
/// (conv_winograd_avx512.cpp, only after cpu_has_avx512()).
void multiply_avx512(const Geometry& g, const float* u, const float* v, std::int64_t xi, std::int64_t kb,
                     std::int64_t panels, std::int64_t count, float* m);
/// y for tiles [t0, t1) of the pass starting at `first` and output channels [k0, k0+8).
void transform_output(const Geometry& g, const float* m, std::int64_t first, std::int64_t t0, std::int64_t t1,
                      std::int64_t k0, float* y);

}  // namespace galley::backends::cpu::winograd
