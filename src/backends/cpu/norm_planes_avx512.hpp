// The per-plane loops of norm_planes.cpp for f32 nchw with AVX-512 (norm_planes_avx512.cpp, entered
// only after cpu_has_avx512()). The sums keep 16 double lanes in four accumulators, so consecutive
// vectors' additions overlap, merged in a fixed order, so a result depends on the data and its
// length alone; the maps take 16 floats a step.
#pragma once

#include <cstdint>

namespace galley::backends::cpu::avx512 {

/// The sum of v[0, n) in double.
double plane_sum(const float* v, std::int64_t n);

/// The sum of (v - center)^2 over v[0, n) in double.
double plane_centered_squares(const float* v, std::int64_t n, double center);

/// s1 = the sum of v - center, s2 = the sum of (v - center)^2 over v[0, n), in double, in one pass.
/// v[0, readable) (readable >= n) may be prefetched: the loop asks for lines 4 KB ahead, past the
/// plane into the next one where the caller reads that next.
void plane_shifted_moments(const float* v, std::int64_t n, std::int64_t readable, double center, double& s1,
                           double& s2);

/// sum_g = the sum of g[0, n), sum_gx = the sum of g * (x - center), in double; g[0, readable) and
/// x[0, readable) may be prefetched, as above.
void plane_gradient_sums(const float* g, const float* x, std::int64_t n, std::int64_t readable, double center,
                         double& sum_g, double& sum_gx);

/// o[i] = a * ((u[i] - center) - center_lo) + c0 for i in [0, n); o may be u. With `stream`, o's
/// whole 64-byte lines are written with non-temporal stores (for outputs far beyond the caches,
/// where a plain store would first read each line) and fenced before the call returns.
void plane_map_one(const float* u, float* o, std::int64_t n, float a, float center, float center_lo, float c0,
                   bool stream);

/// o[i] = a * u[i] + b * (v[i] - center) + c0 for i in [0, n); o may be u or v; `stream` as above.
void plane_map_two(const float* u, const float* v, float* o, std::int64_t n, float a, float b, float center,
                   float c0, bool stream);

/// The two sums of norm::PlaneSum that batch and group norm take, over NHWC rows (channels innermost).
enum class RowSum { shifted_moments, gradient };

/// For rows x[r][0, c) (and dy[r][0, c) for the gradient), r in [0, rows), per channel k, into
/// acc0[k] and acc1[k], in double: shifted_moments: the sums of x - center[k] and of its square;
/// gradient: the sums of dy and of dy * (x - center[k]). The sums go through f32 runs of rows about
/// the centres rounded to f32, moved to the centres at the end, so acc0 and acc1 must start at 0.
void nhwc_row_sums(RowSum what, const float* x, const float* dy, std::int64_t rows, std::int64_t c,
                   const double* center, double* acc0, double* acc1);

/// o[r][k] = a[k] * ((u[r][k] - center[k]) - center_lo[k]) + c0[k] over `rows` rows of c channels
/// that share the coefficients; center_lo may be null (0); o may be u. With `stream` (only where c
/// is a multiple of 16 and o 64-byte aligned) o is written with non-temporal stores, fenced.
void nhwc_rows_map_one(const float* u, float* o, std::int64_t rows, std::int64_t c, const float* a,
                       const float* center, const float* center_lo, const float* c0, bool stream);

/// o[r][k] = a[k] * u[r][k] + b[k] * (v[r][k] - center[k]) + c0[k] over `rows` rows of c channels that
/// share the coefficients; o may be u or v; `stream` as for nhwc_rows_map_one.
void nhwc_rows_map_two(const float* u, const float* v, float* o, std::int64_t rows, std::int64_t c,
                       const float* a, const float* b, const float* center, const float* c0, bool stream);

}  // namespace galley::backends::cpu::avx512
