// Max pooling backward of NCHW f32 planes with AVX-512 (pool_max_backward_avx512.cpp, entered
// only after cpu_has_avx512()) for cpu.pool.direct, windows of column stride 1 or 2. Without kept
// indices it first finds each output's maximum position again, 16 outputs per vector under the
// forward rule; then it gathers: each input element adds the gradients of the outputs whose
// windows hold it and whose maximum position is that element. An output reaches an input through
// exactly one tap, so nothing is written twice and no scatter is needed; a kept index outside its
// output's window matches no element and contributes nothing, as the problem requires.
#pragma once

#include <cstdint>

#include "backends/cpu/pool_plane_windows.hpp"

namespace galley::backends::cpu::avx512 {

using MaxPoolBackwardPlane = PoolPlaneWindows;

/// Floats of scratch max_pool_plane_backward() needs.
std::int64_t max_pool_backward_scratch(const MaxPoolBackwardPlane& g);

/// Fills the padding of the scratch before a caller's first plane; later planes of the same
/// geometry leave it as it is.
void max_pool_backward_prepare(const MaxPoolBackwardPlane& g, float* scratch);

/// dx = the gradient of max pooling given dy. The maximum positions (ih * w + iw) are `indices`
/// when not null, else found from x under the forward rule (a NaN beats any number and an earlier
/// NaN, a larger value wins, of equal values the first in row-major window order; the window's
/// first element when none beats -inf).
void max_pool_plane_backward(const MaxPoolBackwardPlane& g, const float* x, const std::int32_t* indices,
                             const float* dy, float* dx, float* scratch);

}  // namespace galley::backends::cpu::avx512
