// Max pooling backward of NCHW f32 planes with AVX-512 for the windows 3 columns wide, column
// stride 2, padded by 1 column (ResNet's stem pooling, any row windows), found from x in one pass
// over the plane (pool_max_backward_k3s2_avx512.cpp, entered only after cpu_has_avx512()).
//
// The rule's maximum is separable: over the windows' rows in order, each row's first maximum, and of
// those rows the first that holds the largest. So each input row is split once into its even and
// odd columns and reduced to its three-column maxima and which column won, shared by the output
// rows whose windows hold it; each output row then picks its winning row with one comparison per
// further row, which gives each output a code of where its maximum lies, and adds its gradients
// into the dx rows of its window by comparing codes: dx column 2j takes output j's gradient,
// column 2j + 1 those of outputs j and j + 1. A dx row that a later output row still reaches waits
// in a small ring; every dx element is stored once, with no zero-fill pass, no scratch of the
// whole plane's positions and no position compares per tap. The stem's own row windows (3 rows, row
// stride 2, row padding 1) take a tighter pass without the ring: a dx row of even index lies in one
// output row's window, one of odd index in two, so each output row reduces its two new input rows,
// keeps the lower one's maxima and dx sums for the next output row and writes its other dx rows
// straight out. A plane whose x holds a NaN is left to the general kernel
// (pool_max_backward_avx512.hpp).
#pragma once

#include <cstdint>

#include "backends/cpu/pool_plane_windows.hpp"

namespace galley::backends::cpu::avx512 {

/// True for the windows max_pool_plane_backward_k3s2() takes: 3 columns wide, column stride 2,
/// column padding 1, and every output row's window holding at least one input row.
bool max_pool_backward_k3s2_fits(const PoolPlaneWindows& g);

/// Floats of scratch max_pool_plane_backward_k3s2() needs (no preparation).
std::int64_t max_pool_backward_k3s2_scratch(const PoolPlaneWindows& g);

/// The plane a caller runs next, whose lines the kernel prefetches while it works; all null for
/// none.
struct NextPlane {
  const float* x = nullptr;
  const float* dy = nullptr;
  const float* dx = nullptr;
};

/// dx = the gradient of max pooling given dy, each output's maximum found from x under the forward
/// rule (a larger value wins, of equal values the first in row-major window order). Returns false
/// when x holds a NaN: the caller then takes the general kernel, which writes all of dx. dx is then
/// unwritten if it shares storage with x or dy, and may be partly written otherwise. scratch
/// belongs to one caller at a time; its contents on entry do not matter.
bool max_pool_plane_backward_k3s2(const PoolPlaneWindows& g, const float* x, const float* dy, float* dx,
                                  const NextPlane& next, float* scratch);

}  // namespace galley::backends::cpu::avx512
