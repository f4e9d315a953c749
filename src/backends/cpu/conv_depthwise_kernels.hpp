// Inner loops of cpu.conv.depthwise, one scalar and one AVX2 version of each (the AVX2 ones in
// conv_depthwise_avx2.cpp, called only after cpu_has_avx2_fma()), and AVX-512 versions of the
// in-place loops for width strides 1 and 2 (conv_depthwise_avx512.cpp, only after
// cpu_has_avx512()), which also finish the plane with the convolution's epilogue as they store it.
#pragma once

#include <cstdint>

#include "backends/cpu/conv_base.hpp"
#include "backends/cpu/sgemm_avx512.hpp"

namespace galley::backends::cpu::depthwise {

/// One NCHW channel plane, padded and split by column phase so that every stride reads its
/// input contiguously: phase j holds padded columns j, j+sw, j+2sw, ...; output column ow, tap
/// s reads phase (s*dw) % sw at position ow + (s*dw) / sw. Rows and positions past the image
/// are zero; each row has slack after the last needed position for whole-vector loads.
struct Plane {
  std::int64_t rows;          ///< padded rows kept: (Ho-1)*sh + (R-1)*dh + 1
  std::int64_t row_stride;    ///< floats per row of one phase
  std::int64_t phase_stride;  ///< floats per phase = rows * row_stride
  std::int64_t phases;        ///< sw
  std::int64_t floats() const { return phase_stride * phases; }
  static Plane of(const ConvShape& s);
};

/// Fills `plane` from the input channel `xc` (H x W).
void build_plane(const ConvShape& s, const Plane& plane, const float* xc, float* out);

/// All Ho x Wo outputs of one channel from its built plane; `w` is that channel's R x S filter.
void nchw_plane_scalar(const ConvShape& s, const Plane& plane, const float* in, const float* w, float* out);
void nchw_plane_avx2(const ConvShape& s, const Plane& plane, const float* in, const float* w, float* out);

/// Stride-1 (in width) channels straight from the input plane `xc` (H x W), no copy: masked
/// loads at the left and right edges, skipped taps at the top and bottom. AVX2 only.
void nchw_plane_s1_avx2(const ConvShape& s, const float* xc, const float* w, float* out);
/// The same with 16-column AVX-512 steps (conv_depthwise_avx512.cpp, after cpu_has_avx512()).
/// `post` (null: none) is the plane's epilogue as a one-row C[1 x Ho*Wo] (bias_per_row, its
/// bias and residual pointers at this channel: ConvEpilogueRunner::gemm_post_ops(n, c, 0)),
/// applied in registers before each store.
void nchw_plane_s1_avx512(const ConvShape& s, const float* xc, const float* w, float* out,
                          const avx512::PostOps* post);

/// Width stride 2 with unit width dilation (any filter, height stride, height dilation, padding)
/// straight from the input plane: each tap's 16 columns are the even or odd lanes of two masked
/// loads, split with one permute, so no strided copy of the plane is made. `post` as above.
inline bool nchw_plane_s2_fits(const ConvShape& s) { return s.sw == 2 && s.dw == 1; }
void nchw_plane_s2_avx512(const ConvShape& s, const float* xc, const float* w, float* out,
                          const avx512::PostOps* post);

/// One output row (oh) of one NHWC image: y_row[Wo][C]. `xn` is the image, `wt` the filter
/// repacked tap-major ([R*S][C]) so a vector of channels is contiguous.
void nhwc_row_scalar(const ConvShape& s, const float* xn, const float* wt, std::int64_t oh, float* y_row);
void nhwc_row_avx2(const ConvShape& s, const float* xn, const float* wt, std::int64_t oh, float* y_row);

}  // namespace galley::backends::cpu::depthwise
