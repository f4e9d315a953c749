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
  std::int64_t block_floats() const { return s.cg * s.r * s.s * kbw; }
  static Geometry of(const ConvShape& s);
};

/// tile[ow][kbw] = output row `oh` for the channel block whose packed weights are `wp`; `xg` is
/// the input of this image at this group's first channel.
void row_scalar(const Geometry& g, const float* xg, const float* wp, std::int64_t oh, float* tile);
void row_avx2(const Geometry& g, const float* xg, const float* wp, std::int64_t oh, float* tile);

}  // namespace galley::backends::cpu::direct
