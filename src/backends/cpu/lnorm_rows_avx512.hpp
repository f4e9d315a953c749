// The row loops of lnorm_rows.cpp for f32 rows with AVX-512 (lnorm_rows_avx512.cpp, entered only
// after cpu_has_avx512()): 16 floats a step, the row sums in f32 over short runs of vectors and
// then in double, so a row's statistics keep double's robustness at a fraction of its cost.
#pragma once

#include <cstdint>

namespace galley::backends::cpu::avx512 {

/// s1 = the sum of x - pivot, s2 = the sum of (x - pivot)^2 over x[0, n), in double, in one pass.
void lnorm_row_moments(const float* x, std::int64_t n, float pivot, double& s1, double& s2);

/// Rows of n <= kShortRow floats (`rows` of them back to back), each held in registers: its mean
/// and inverse std (two passes over the registers, the sums in f32 about the row's first value)
/// into mean[r] and invstd[r], then y = (x - mean) * invstd * scale + shift. With `stream` (n a
/// multiple of 16, y 64-byte aligned) y is written with non-temporal stores, fenced before returning.
constexpr std::int64_t kShortRow = 256;
void lnorm_short_rows_forward(const float* x, const float* scale, const float* shift, float* y,
                              std::int64_t rows, std::int64_t n, double epsilon, float* mean, float* invstd,
                              bool stream);

/// The backward of rows of n <= kShortBackwardRow floats, each held in registers: dx from x, dy,
/// scale and the row's saved mean and inverse std, and each row's dy * xhat and dy added to
/// dscale[0, n) and dshift[0, n). The sums in f32.
constexpr std::int64_t kShortBackwardRow = 128;
void lnorm_short_rows_backward(const float* x, const float* dy, const float* scale, float* dx,
                               std::int64_t rows, std::int64_t n, const float* mean, const float* invstd,
                               float* dscale, float* dshift);

/// y[i] = (((x[i] - m) - m_lo) * r) * scale[i] + shift[i] for i in [0, n).
void lnorm_row_affine(const float* x, const float* scale, const float* shift, float* y, std::int64_t n,
                      float m, float m_lo, float r);

/// With g = dy * scale and xhat = (x - m) * r over [0, n): sum_g = the sum of g and sum_gx the sum of
/// g * xhat (double), and dscale[i] += dy[i] * xhat[i], dshift[i] += dy[i].
void lnorm_row_gradient_sums(const float* x, const float* dy, const float* scale, std::int64_t n, float m,
                             float r, double& sum_g, double& sum_gx, float* dscale, float* dshift);

/// dx[i] = r * (dy[i] * scale[i] - kg - (x[i] - m) * r * kx) for i in [0, n). With `stream` (n a
/// multiple of 16, dx 64-byte aligned) dx is written with non-temporal stores, which the caller
/// fences (lnorm_stream_fence) before the rows are used.
void lnorm_row_dx(const float* x, const float* dy, const float* scale, float* dx, std::int64_t n, float m,
                  float r, float kg, float kx, bool stream);

/// Orders the calling thread's non-temporal stores before its later ones (sfence).
void lnorm_stream_fence();

}  // namespace galley::backends::cpu::avx512
