// The per-plane sums of norm_planes.cpp for f32 with AVX-512 (norm_planes_avx512.cpp, entered only
// after cpu_has_avx512()): 16 double lanes, in four accumulators so consecutive vectors' additions
// overlap, merged in a fixed order, so a result depends on the data and its length alone.
#pragma once

#include <cstdint>

namespace galley::backends::cpu::avx512 {

/// The sum of v[0, n) in double.
double plane_sum(const float* v, std::int64_t n);

/// The sum of (v - center)^2 over v[0, n) in double.
double plane_centered_squares(const float* v, std::int64_t n, double center);

/// sum_g = the sum of g[0, n), sum_gx = the sum of g * (x - center), in double.
void plane_gradient_sums(const float* g, const float* x, std::int64_t n, double center, double& sum_g,
                         double& sum_gx);

}  // namespace galley::backends::cpu::avx512
