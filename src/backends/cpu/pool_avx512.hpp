// Max pooling of NCHW f32 planes with AVX-512 (pool_avx512.cpp, entered only after
// cpu_has_avx512()), for cpu.pool.direct's forward without indices (inference): 16 outputs of a row
// per vector, each tap one or two loads (a permute takes every second float for stride 2), where the
// generic path blends an index beside every value, eight outputs at a time.
#pragma once

#include <cstdint>

namespace galley::backends::cpu::avx512 {

/// The geometry of one plane's max pooling; the window of output (oh, ow) is rows [row_begin[oh],
/// row_end[oh]) and columns ow * stride_w - pad_w + [0, kernel_w) clipped to [0, w).
struct MaxPoolPlane {
  std::int64_t h, w, oh, ow;
  std::int64_t kernel_w, stride_w, pad_w;
  const std::int64_t* row_begin;  ///< [oh]
  const std::int64_t* row_end;    ///< [oh]
};

/// True for the column strides max_pool_plane() takes (1 and 2).
inline bool max_pool_plane_fits(std::int64_t stride_w) { return stride_w == 1 || stride_w == 2; }

/// y[oh][ow] = the maximum of x over the window under cpu.pool.direct's rule, by value: a NaN beats
/// any number and an earlier NaN, a larger value wins, and of equal values (+0 and -0) the first in
/// row-major window order; -inf for an empty window.
void max_pool_plane(const MaxPoolPlane& g, const float* x, float* y);

}  // namespace galley::backends::cpu::avx512
