// Inner loops of cpu.conv.direct: one output row of one block of output channels, scalar and AVX2
// (conv_direct_avx2.cpp, entered only after cpu_has_avx2_fma()).
#pragma once

#include <cstdint>

#include "backends/cpu/conv_base.hpp"

namespace galley::backends::cpu::direct {

/// Where things are. Weights are repacked per (group, block of `kbw` output channels) as
/// [Cg][R][S][kbw], zero past Kg, so one aligned vector load gives a tap for kbw channels.
struct Geometry {
  ConvShape s;
  std::int64_t kbw;                 ///< output channels per block: 8 or 16
  std::int64_t kblocks;             ///< blocks per group: ceil(Kg / kbw)
  std::int64_t x_cs, x_hs, x_ws;    ///< input strides (elements) for channel, row, column
  std::int64_t ow_lo, ow_hi;        ///< outputs whose every tap column lies inside the image
  std::int64_t rows_per_task;       ///< output rows (over the batch, image-major) one task computes
  std::int64_t block_floats() const { return s.cg * s.r * s.s * kbw; }
  std::int64_t row_groups() const { return (s.n * s.ho + rows_per_task - 1) / rows_per_task; }
  std::int64_t tasks() const { return s.g * kblocks * row_groups(); }
  std::int64_t tile_floats() const { return rows_per_task * s.wo * kbw; }
  static Geometry of(const ConvShape& s, std::int64_t workers);
};

/// tile[row - row0][ow][kbw] for the flattened output rows [row0, row1) (row = n*Ho + oh) of
/// group `gi` and the channel block whose packed weights are `wp`.
void rows_scalar(const Geometry& g, const float* x, std::int64_t gi, const float* wp, std::int64_t row0,
                 std::int64_t row1, float* tile);
void rows_avx2(const Geometry& g, const float* x, std::int64_t gi, const float* wp, std::int64_t row0,
               std::int64_t row1, float* tile);

}  // namespace galley::backends::cpu::direct
