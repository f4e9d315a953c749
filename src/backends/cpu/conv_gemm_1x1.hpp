// cpu.conv.gemm_1x1's product on pixels already laid out as a unit-stride 1x1 convolution reads
// them, for the solvers that lay them out first: gemm_1x1 itself for a strided 1x1 (the pixels on
// the stride's grid) and im2col_gemm for an image whose columns it gathers whole.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/conv_base.hpp"
#include "backends/cpu/conv_epilogue.hpp"

namespace galley::backends::cpu {

/// Workspace of gemm_1x1_unit_stride() for `s`.
std::size_t gemm_1x1_unit_stride_workspace_bytes(const ConvShape& s);

/// y = W * x for s.n images of s.h * s.w pixels and s.c channels (s.g groups, NCHW or NHWC as
/// s.nhwc says), the filter size, strides and padding of `s` not read: x [C x HW] per image, w
/// [K x Cg] per group, y [K x HW] per image. The images are [n_first, n_first + s.n) of the
/// problem `epilogue` was made for, which addresses its residual by them. `prepared` (null: none)
/// keeps w packed for the AVX-512 SGEMM across calls, as pack_weight_groups() packs it.
void gemm_1x1_unit_stride(const ConvShape& s, const float* x, const float* w, float* y, void* ws,
                          const ConvEpilogueRunner* epilogue, const PreparedSlot* prepared,
                          std::int64_t n_first);

}  // namespace galley::backends::cpu
