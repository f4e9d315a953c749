// The scratch geometry both AVX-512 plane kernels of cpu.pool.direct lay out (pool_avg_avx512.cpp,
// pool_max_backward_avx512.cpp): a row of stride 2 split into its even and odd columns as
// zero- or -inf-padded streams, and output rows padded so every tap is one unaligned vector load.
// Include it only from those files: everything here has internal linkage, so an AVX-512 file's
// copy is never merged with another file's.
#pragma once

#include <cstdint>

#include "backends/cpu/avx512_lanes.hpp"
#include "backends/cpu/pool_plane_windows.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

std::int64_t round16(std::int64_t n) { return (n + 15) / 16 * 16; }

// floor(a / stride) for the strides the kernels take (1 and 2), without a division: this runs for
// every tap of every plane.
std::int64_t floor_div(std::int64_t a, std::int64_t stride) { return stride == 1 ? a : a >> 1; }

/// The padded streams of one plane, in 4-byte elements, each a whole number of vectors.
struct PlaneStreams {
  std::int64_t stream_pitch;  ///< one stream's elements (an input row's columns / stride)
  std::int64_t out_pitch;     ///< output columns
  std::int64_t in_margin;     ///< padding before an input stream, for taps left of column 0
  std::int64_t in_stream;     ///< an input stream with its margin and room for the rightmost taps
  std::int64_t out_margin;    ///< padding before an output row, for the rightmost taps
  std::int64_t out_row;       ///< an output row with its margin and room for the leftmost taps
};

PlaneStreams plane_streams(const PoolPlaneWindows& g) {
  const std::int64_t s = g.stride_w;
  const std::int64_t shift_min = floor_div(-g.pad_w, s), shift_max = floor_div(g.kernel_w - 1 - g.pad_w, s);
  PlaneStreams p{};
  p.stream_pitch = round16(floor_div(g.w + s - 1, s));
  p.out_pitch = round16(g.ow);
  p.in_margin = round16(max64(0, -shift_min));
  p.in_stream = p.in_margin + round16(max64(p.stream_pitch, p.out_pitch + max64(0, shift_max)));
  p.out_margin = round16(max64(0, shift_max));
  p.out_row = p.out_margin + round16(max64(p.out_pitch, p.stream_pitch + max64(0, -shift_min)));
  return p;
}

// The scratch from its first 64-byte boundary.
float* aligned(float* scratch) {
  const auto line = reinterpret_cast<std::uintptr_t>(scratch) % 64;
  return scratch + (line == 0 ? 0 : (64 - line) / sizeof(float));
}

}  // namespace
}  // namespace galley::backends::cpu::avx512
