// The window geometry the AVX-512 plane kernels of cpu.pool.direct share (pool_avg_avx512.hpp,
// pool_max_backward_avx512.hpp): NCHW f32 planes, windows of column stride 1 or 2.
#pragma once

#include <cstdint>

namespace galley::backends::cpu::avx512 {

/// One plane's pooling windows, the same for every plane of a problem. The window of output
/// (oh, ow) is rows [row_begin[oh], row_end[oh]) and columns ow * stride_w - pad_w + [0, kernel_w)
/// clipped to [0, w); input row ih lies in the windows of output rows [cover_first[ih],
/// cover_last[ih]] (empty when first > last).
struct PoolPlaneWindows {
  std::int64_t h, w, oh, ow;
  std::int64_t kernel_w, stride_w, pad_w;
  const std::int64_t* row_begin;    ///< [oh]
  const std::int64_t* row_end;      ///< [oh]
  const std::int64_t* cover_first;  ///< [h]
  const std::int64_t* cover_last;   ///< [h]
};

/// The widest window the plane kernels take.
inline constexpr std::int64_t kMaxTaps = 64;

/// True for the windows the plane kernels take: column stride 1 or 2, at most kMaxTaps columns.
inline bool pool_plane_fits(std::int64_t stride_w, std::int64_t kernel_w) {
  return (stride_w == 1 || stride_w == 2) && kernel_w <= kMaxTaps;
}

}  // namespace galley::backends::cpu::avx512
