// The two loops batch and group norm are made of on the cpu, for NCHW and NHWC alike: a reduction
// of every (image, channel) plane over its pixels, and a per-plane affine map of one or two
// tensors. Batch norm sums the planes of a channel over images, group norm over the channels of a
// group; both then map x (forward) or dy and x (backward) with per-plane coefficients.
#pragma once

#include <cstdint>
#include <utility>

#include "galley/core/dtype.hpp"

namespace galley::backends::cpu::norm {

/// A packed 4-D activation as n x c planes of hw pixels.
struct PlaneShape {
  std::int64_t n = 1, c = 1, hw = 1;
  bool nhwc = false;
  DType dtype = DType::f32;
};

enum class PlaneSum {
  sum,               ///< out0[p] = sum x
  centered_squares,  ///< out0[p] = sum (x - center[p])^2
  shifted_moments,   ///< out0[p] = sum (x - center[p]), out1[p] = sum (x - center[p])^2
  gradient,          ///< out0[p] = sum dy, out1[p] = sum dy * (x - center[p])
};

/// The sums of v - center and of (v - center)^2 over v[0, n), in double, in one pass (four lanes
/// each, added in a fixed order): the scalar loop behind the cpu norms' statistics.
std::pair<double, double> shifted_moments_of(const float* v, std::int64_t n, double center);

/// Per plane p = image * c + channel, in double, summed in an order fixed by the shape alone (so
/// results never depend on the thread count). Parallel over the cpu pool.
void plane_reduce(const PlaneShape& shape, PlaneSum what, const void* x, const void* dy, const double* center,
                  double* out0, double* out1);

/// Element `pixel` of plane p as f32, whatever the layout and dtype.
float plane_value(const PlaneShape& shape, const void* x, std::int64_t plane, std::int64_t pixel);

/// out = a[p] * ((u - center[p]) - center_lo[p]) + c0[p], or with v: a[p] * u + b[p] * (v - center[p])
/// + c0[p], elementwise in f32 and rounded once to the shape's dtype. Subtracting the centre first
/// keeps a large mean from cancelling against the offset, and center_lo (may be null) carries what
/// a mean computed in double loses when rounded to f32. out may alias u or v. Parallel over the cpu pool;
/// f32 outputs of kBypassCacheBytes or more are written around the caches (non-temporal stores).
void plane_map(const PlaneShape& shape, const void* u, const void* v, const float* a, const float* b,
               const float* center, const float* center_lo, const float* c0, void* out);

}  // namespace galley::backends::cpu::norm
