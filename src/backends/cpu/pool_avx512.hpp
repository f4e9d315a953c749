// Pooling of NCHW f32 planes with AVX-512 (pool_avx512.cpp, entered only after cpu_has_avx512())
// for cpu.pool.direct's forward: max values without indices (inference) and averages over whole
// planes. Max pooling is separable: each input row a window holds is reduced once over the window's
// columns, 16 outputs per vector, and each output row is the maximum of those column maxima over
// its window's rows, so an input element is loaded once per row rather than once per tap of every
// window that holds it, and the rows neighbouring windows share are reduced once. For the common
// windows (3 wide padded by 1 or 0, 2 wide unpadded) a row is split into even and odd columns
// (stride 2) and each tap is one of them shifted by a constant number of lanes; other windows load
// each tap. Rows without NaNs fold with one max instruction; a row with one takes the full rule.
#pragma once

#include <cstdint>

#include "backends/cpu/pool_plane_windows.hpp"

namespace galley::backends::cpu::avx512 {

/// The geometry of one plane's max pooling: the windows the other plane kernels take, of which max
/// pooling reads the rows and columns (not the cover tables). The row windows move down
/// monotonically (both ends nondecreasing in oh), as every window kind's do.
using MaxPoolPlane = PoolPlaneWindows;

/// True for the column strides max_pool_plane() takes (1 and 2).
inline bool max_pool_plane_fits(std::int64_t stride_w) { return stride_w == 1 || stride_w == 2; }

/// Output columns rounded up to whole vectors: the row pitch of the column maxima.
inline std::int64_t max_pool_plane_pitch(const MaxPoolPlane& g) { return (g.ow + 15) / 16 * 16; }

/// Floats of scratch that max_pool_plane() needs: every input row's column maxima, and room to
/// start them on a cache line.
inline std::int64_t max_pool_plane_scratch(const MaxPoolPlane& g) {
  return g.h * max_pool_plane_pitch(g) + 15;
}

/// Lane masks of the taps that reach past a row's ends, the same for every plane of a problem: one
/// per tap of each vector of windows.
inline std::int64_t max_pool_plane_masks(const MaxPoolPlane& g) {
  return max_pool_plane_pitch(g) / 16 * g.stride_w * g.kernel_w;
}

/// Fills masks[max_pool_plane_masks(g)] for max_pool_plane().
void max_pool_plane_edge_masks(const MaxPoolPlane& g, std::uint16_t* masks);

/// y[oh][ow] = the maximum of x over the window under cpu.pool.direct's rule, by value: a NaN beats
/// any number and an earlier NaN, a larger value wins, and of equal values (+0 and -0) the first in
/// row-major window order; -inf for an empty window. scratch (max_pool_plane_scratch(g) floats)
/// belongs to one caller at a time; its contents on entry do not matter. next_x, when not null, is
/// the plane to be taken next, which this call prefetches a share per output row.
void max_pool_plane(const MaxPoolPlane& g, const std::uint16_t* masks, const float* x, float* y,
                    float* scratch, const float* next_x = nullptr);

/// Elements that row_max_lanes() scans at a time: two vectors, whose 32 lanes run independently.
inline constexpr std::int64_t kRowMaxLanes = 32;

/// The scan of a wide row (global windows) by cpu.pool.direct's rule, kRowMaxLanes lanes at a
/// time: lane l takes row[l], row[l + 32], ... of row[0, n) (n a multiple of 32) in order, keeping
/// the last NaN it meets or else its first largest value, in best[l] and its position base + i in
/// at[l]. The caller merges the lanes by the rule, which gives the sequential scan's result.
void row_max_lanes(const float* row, std::int64_t base, std::int64_t n, float* best, std::int32_t* at);

/// The largest of x[0, n) (n >= 1) into `out` by value alone (global max pooling without indices),
/// true when that is the rule's result: false when x holds a NaN or the largest value is a zero (+0
/// and -0 compare equal, and the rule keeps the first of them, which the lanes do not track), for
/// the caller to scan under the full rule. next_x, when not null, is the next plane of n floats to
/// be taken, whose lines this call asks for as it goes.
bool plane_max(const float* x, std::int64_t n, const float* next_x, float& out);

/// The sum of x[0, n), 16 lanes at a time in a fixed order (the same for every call with that n):
/// a plane's sum for global average pooling, where a scalar chain per row would serialise.
float sum(const float* x, std::int64_t n);

}  // namespace galley::backends::cpu::avx512
