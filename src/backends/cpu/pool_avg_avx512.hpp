// Average pooling of NCHW f32 planes with AVX-512 (pool_avg_avx512.cpp, entered only after
// cpu_has_avx512()) for cpu.pool.direct, forward and backward, windows of column stride 1 or 2.
// Both directions are separable. Forward adds, for each output row, its window's input rows (16
// columns per vector) and then sums that one row over each window's columns; backward spreads each
// output row's scaled gradient over its windows' columns and then adds, for each input row, the
// spread rows of the outputs covering it. A row of stride 2 is split into its even and odd
// columns, so every tap is one unaligned load of a zero-padded stream: no per-element index
// arithmetic, no scatter, and padding is zeros that need no masks. ResNet's window (3 wide, stride
// 2, padded by 1) shifts the streams in registers instead of storing and reloading them. Its
// backward under the stem's row windows too (3 rows, row stride 2, row padding 1) takes one pass
// with no spread rows stored: a dx row of even index lies in one output row's window, one of odd
// index in two, so each output row's spread columns, kept in registers for the next output row,
// give its two dx rows, each written once straight out.
#pragma once

#include <cstdint>

#include "backends/cpu/pool_plane_windows.hpp"

namespace galley::backends::cpu::avx512 {

/// One plane's average pooling: its windows and 1 / the divisor of each output ([oh * ow]).
struct AvgPoolPlane : PoolPlaneWindows {
  const float* inverse_divisor;
};

/// Floats of scratch avg_pool_plane_forward() and avg_pool_plane_backward() need.
std::int64_t avg_pool_plane_scratch(const AvgPoolPlane& g);

/// Zeroes the scratch before a caller's first plane: the margins of the padded streams are read as
/// padding and never written again, so one call serves every later plane of the same geometry. It
/// also notes there which backward pass the geometry takes, so call it before either direction.
void avg_pool_plane_prepare(const AvgPoolPlane& g, float* scratch);

/// y[oh][ow] = the sum of x over the window times inverse_divisor[oh * ow + ow].
void avg_pool_plane_forward(const AvgPoolPlane& g, const float* x, float* y, float* scratch);

/// dx[ih][iw] = the sum, over the outputs whose windows hold (ih, iw), of dy times the output's
/// inverse divisor.
void avg_pool_plane_backward(const AvgPoolPlane& g, const float* dy, float* dx, float* scratch);

}  // namespace galley::backends::cpu::avx512
