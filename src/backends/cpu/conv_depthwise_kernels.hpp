// Inner loops of cpu.conv.depthwise, one scalar and one AVX2 version of each (the AVX2 ones in
// conv_depthwise_avx2.cpp, called only after cpu_has_avx2_fma()), and AVX-512 versions of the
// in-place loops for width strides 1 and 2 (conv_depthwise_avx512.cpp, only after
// cpu_has_avx512()), which also finish the plane with the convolution's epilogue as they store it,
// as do the AVX-512 loops for small planes (conv_depthwise_packed_avx512.cpp,
// conv_depthwise_channel_block_avx512.cpp).
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

/// Asks for the cache lines of `bytes` from `p` in a writable state (PREFETCHW, which every
/// AVX-512 CPU has; conv_depthwise_avx512.cpp, after cpu_has_avx512()). Inside a network another
/// core read a plane's output lines last (the 1x1 layer after a depthwise one reads every
/// channel), so each first store would wait for the line to be taken back from it; asked for a
/// few planes ahead, that wait overlaps the planes in between.
void prefetch_for_write_avx512(const void* p, std::int64_t bytes);

/// Width stride 2 with unit width dilation (any filter, height stride, height dilation, padding)
/// straight from the input plane: each tap's 16 columns are the even or odd lanes of two masked
/// loads, split with one permute, so no strided copy of the plane is made. `post` as above.
inline bool nchw_plane_s2_fits(const ConvShape& s) { return s.sw == 2 && s.dw == 1; }
void nchw_plane_s2_avx512(const ConvShape& s, const float* xc, const float* w, float* out,
                          const avx512::PostOps* post);

/// A small 3x3 "same" plane (padding 1, unit strides and dilation) read as one flat run of
/// H*W floats, 16 consecutive pixels per vector whatever the width, so a 7x7 plane takes 4
/// vectors where one per row takes 7. The input pixel of output pixel p under tap (dy, dx) is
/// p + dy*W + dx; `masks[v][t]` keeps the lanes of vector v whose tap t lies inside the image, so
/// each tap is one in-register shift and one masked FMA. Widths 2 to 15, so that a shift of
/// W + 1 stays within the next vector. Built once per problem.
struct PackedPlane {
  static constexpr std::int64_t kMaxVectors = 16;
  std::int64_t vectors;                 ///< ceil(H*W / 16)
  std::uint16_t masks[kMaxVectors][9];  ///< per vector and tap (dy+1)*3 + dx+1
  static bool fits(const ConvShape& s) {
    return !s.nhwc && s.r == 3 && s.s == 3 && s.ph == 1 && s.pw == 1 && s.sh == 1 && s.sw == 1 && s.dh == 1 &&
           s.dw == 1 && s.w >= 2 && s.w <= 15 && s.h * s.w <= 16 * kMaxVectors;
  }
  static PackedPlane of(const ConvShape& s);
};
/// `planes` consecutive planes of one image from channel c0 (`x`, `y` at its plane, `w` at its
/// filter). `post` (null: none) as in nchw_channel_block_avx512: row i is channel c0 + i. AVX-512
/// only (conv_depthwise_packed_avx512.cpp).
void nchw_planes_packed_avx512(const ConvShape& s, const PackedPlane& packed, const float* x, const float* w,
                               std::int64_t planes, float* y, const avx512::PostOps* post);

/// Sixteen channels of one NCHW image at a time, for small strided planes: their planes are
/// transposed into a zero-padded copy laid out [rows][cols][16 channels], where each tap of a 3x3
/// filter is one FMA over 16 channels for one output pixel, so no lane is spent on a row's width
/// or edges and a stride is only addressing; the sums, 16 pixels at a time, are transposed back
/// into the 16 output planes with the epilogue applied before the stores. 3x3 filters with unit
/// dilation, any stride and padding.
struct ChannelBlock {
  std::int64_t rows;        ///< padded rows: every input row a tap reads, zero outside the image
  std::int64_t cols;        ///< padded columns, likewise
  std::int64_t sum_floats;  ///< the outputs' sums, pixel-major, rounded up to whole transposes
  std::int64_t padded_floats() const { return rows * cols * 16; }
  std::int64_t floats() const { return padded_floats() + sum_floats; }
  static ChannelBlock of(const ConvShape& s);
};
inline bool channel_block_fits(const ConvShape& s) {
  return !s.nhwc && s.r == 3 && s.s == 3 && s.dh == 1 && s.dw == 1;
}
/// Channels [c0, c0 + channels) of one image, channels <= 16: `x` and `y` at channel c0's plane,
/// `w` at its filter (KCRS, one 3x3 per channel), `scratch` ChannelBlock::floats() floats private
/// to the caller (best on a cache line). `post` (null: none) is the epilogue as a C[channels x Ho*Wo]
/// with a bias per row (ConvEpilogueRunner::gemm_post_ops(n, c0, 0)). AVX-512 only
/// (conv_depthwise_channel_block_avx512.cpp).
void nchw_channel_block_avx512(const ConvShape& s, const ChannelBlock& block, const float* x, const float* w,
                               std::int64_t channels, float* y, float* scratch, const avx512::PostOps* post);

/// One output row (oh) of one NHWC image: y_row[Wo][C]. `xn` is the image, `wt` the filter
/// repacked tap-major ([R*S][C]) so a vector of channels is contiguous.
void nhwc_row_scalar(const ConvShape& s, const float* xn, const float* wt, std::int64_t oh, float* y_row);
void nhwc_row_avx2(const ConvShape& s, const float* xn, const float* wt, std::int64_t oh, float* y_row);

}  // namespace galley::backends::cpu::depthwise
