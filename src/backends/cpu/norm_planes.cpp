#include "backends/cpu/norm_planes.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "backends/cpu/broadcast_fill.hpp"
#include "backends/cpu/conv_convert.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/norm_planes_avx512.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu::norm {
namespace {

// Elements converted at a time: two float blocks on the stack stay in L1.
constexpr std::int64_t kBlock = 2048;
// Pixel chunks per image for NHWC partial sums; fixed, so the summation order is too.
constexpr std::int64_t kChunksPerBatch = 64;

const char* at(DType dtype, const void* base, std::int64_t element) {
  return static_cast<const char*>(base) + element * static_cast<std::int64_t>(size_of(dtype));
}

/// Calls fn(values, count, offset) over [first, first + count) of `base` as floats, kBlock at a time.
template <class Fn>
void as_floats(DType dtype, const void* base, std::int64_t first, std::int64_t count, float* buffer,
               Fn&& fn) {
  for (std::int64_t done = 0; done < count; done += kBlock) {
    const std::int64_t len = std::min(kBlock, count - done);
    if (dtype == DType::f32) {
      fn(reinterpret_cast<const float*>(at(dtype, base, first + done)), len, done);
    } else {
      convert_to_f32(dtype, at(dtype, base, first + done), buffer, static_cast<std::size_t>(len));
      fn(static_cast<const float*>(buffer), len, done);
    }
  }
}

// 8 independent lanes so the compiler keeps several adds in flight; the order stays fixed.
double sum_of(const float* v, std::int64_t n) {
  double lane[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] += v[i + j];
  }
  for (; i < n; ++i) lane[0] += v[i];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

double centered_squares_of(const float* v, std::int64_t n, double center) {
  double lane[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const double d = v[i + j] - center;
      lane[j] += d * d;
    }
  }
  for (; i < n; ++i) {
    const double d = v[i] - center;
    lane[0] += d * d;
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

void plane_reduce_nchw(const PlaneShape& s, PlaneSum what, const void* x, const void* dy,
                       const double* center, double* out0, double* out1) {
  if (s.dtype == DType::f32 && cpu_has_avx512()) {
    // A plane is one contiguous run: summed whole, 16 double lanes at a time.
    const auto* xf = static_cast<const float*>(x);
    const auto* gf = static_cast<const float*>(dy);
    parallel_for(0, s.n * s.c, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t p = lo; p < hi; ++p) {
        const float* xp = xf + p * s.hw;
        if (what == PlaneSum::sum) {
          out0[p] = avx512::plane_sum(xp, s.hw);
        } else if (what == PlaneSum::centered_squares) {
          out0[p] = avx512::plane_centered_squares(xp, s.hw, center[p]);
        } else if (what == PlaneSum::shifted_moments) {
          avx512::plane_shifted_moments(xp, s.hw, (hi - p) * s.hw, center[p], out0[p], out1[p]);
        } else {
          avx512::plane_gradient_sums(gf + p * s.hw, xp, s.hw, (hi - p) * s.hw, center[p], out0[p], out1[p]);
        }
      }
    });
    return;
  }
  parallel_for(0, s.n * s.c, [&](std::int64_t lo, std::int64_t hi) {
    std::vector<float> bx(kBlock), bdy(kBlock);
    for (std::int64_t p = lo; p < hi; ++p) {
      const std::int64_t first = p * s.hw;
      double a = 0, b = 0;
      if (what == PlaneSum::sum) {
        as_floats(s.dtype, x, first, s.hw, bx.data(),
                  [&](const float* v, std::int64_t n, std::int64_t) { a += sum_of(v, n); });
      } else if (what == PlaneSum::centered_squares) {
        as_floats(s.dtype, x, first, s.hw, bx.data(), [&](const float* v, std::int64_t n, std::int64_t) {
          a += centered_squares_of(v, n, center[p]);
        });
      } else if (what == PlaneSum::shifted_moments) {
        as_floats(s.dtype, x, first, s.hw, bx.data(), [&](const float* v, std::int64_t n, std::int64_t) {
          const auto [m1, m2] = shifted_moments_of(v, n, center[p]);
          a += m1;
          b += m2;
        });
      } else {
        const double m = center[p];
        as_floats(
            s.dtype, dy, first, s.hw, bdy.data(), [&](const float* g, std::int64_t n, std::int64_t off) {
              std::vector<float>& xs = bx;
              const float* xv = xs.data();
              if (s.dtype == DType::f32) {
                xv = static_cast<const float*>(x) + first + off;
              } else {
                convert_to_f32(s.dtype, at(s.dtype, x, first + off), xs.data(), static_cast<std::size_t>(n));
              }
              double la[4] = {}, lb[4] = {};
              std::int64_t i = 0;
              for (; i + 4 <= n; i += 4) {
                for (int j = 0; j < 4; ++j) {
                  la[j] += g[i + j];
                  lb[j] += static_cast<double>(g[i + j]) * (xv[i + j] - m);
                }
              }
              for (; i < n; ++i) {
                la[0] += g[i];
                lb[0] += static_cast<double>(g[i]) * (xv[i] - m);
              }
              a += (la[0] + la[1]) + (la[2] + la[3]);
              b += (lb[0] + lb[1]) + (lb[2] + lb[3]);
            });
      }
      out0[p] = a;
      if (out1 != nullptr) out1[p] = b;
    }
  });
}

void plane_reduce_nhwc(const PlaneShape& s, PlaneSum what, const void* x, const void* dy,
                       const double* center, double* out0, double* out1) {
  const std::int64_t chunks = std::clamp<std::int64_t>((kChunksPerBatch + s.n - 1) / s.n, 1, s.hw);
  const std::int64_t per_chunk = (s.hw + chunks - 1) / chunks;
  const bool two = what == PlaneSum::gradient || what == PlaneSum::shifted_moments;
  const auto plane_count = static_cast<std::size_t>(s.c);
  std::vector<double> partial(static_cast<std::size_t>(s.n * chunks) * plane_count * (two ? 2 : 1), 0.0);
  const bool avx512 = cpu_has_avx512();
  parallel_for(0, s.n * chunks, [&](std::int64_t lo, std::int64_t hi) {
    std::vector<float> bx(kBlock), bdy(kBlock);
    for (std::int64_t task = lo; task < hi; ++task) {
      const std::int64_t image = task / chunks, chunk = task % chunks;
      const std::int64_t p0 = chunk * per_chunk, p1 = std::min(s.hw, p0 + per_chunk);
      double* acc0 = partial.data() + static_cast<std::size_t>(task) * plane_count * (two ? 2 : 1);
      double* acc1 = acc0 + plane_count;
      const double* ctr = center != nullptr ? center + image * s.c : nullptr;
      if (s.dtype == DType::f32 && avx512 &&
          (what == PlaneSum::shifted_moments || what == PlaneSum::gradient)) {
        const std::int64_t first = (image * s.hw + p0) * s.c;
        avx512::nhwc_row_sums(
            what == PlaneSum::gradient ? avx512::RowSum::gradient : avx512::RowSum::shifted_moments,
            static_cast<const float*>(x) + first,
            dy != nullptr ? static_cast<const float*>(dy) + first : nullptr, p1 - p0, s.c, ctr, acc0, acc1);
        continue;
      }
      for (std::int64_t pix = p0; pix < p1; ++pix) {
        const std::int64_t first = (image * s.hw + pix) * s.c;
        if (what == PlaneSum::sum) {
          as_floats(s.dtype, x, first, s.c, bx.data(), [&](const float* v, std::int64_t n, std::int64_t off) {
            for (std::int64_t i = 0; i < n; ++i) acc0[off + i] += v[i];
          });
        } else if (what == PlaneSum::centered_squares) {
          as_floats(s.dtype, x, first, s.c, bx.data(), [&](const float* v, std::int64_t n, std::int64_t off) {
            for (std::int64_t i = 0; i < n; ++i) {
              const double d = v[i] - ctr[off + i];
              acc0[off + i] += d * d;
            }
          });
        } else if (what == PlaneSum::shifted_moments) {
          as_floats(s.dtype, x, first, s.c, bx.data(), [&](const float* v, std::int64_t n, std::int64_t off) {
            for (std::int64_t i = 0; i < n; ++i) {
              const double d = v[i] - ctr[off + i];
              acc0[off + i] += d;
              acc1[off + i] += d * d;
            }
          });
        } else {
          as_floats(s.dtype, dy, first, s.c, bdy.data(),
                    [&](const float* g, std::int64_t n, std::int64_t off) {
                      const float* xv = bx.data();
                      if (s.dtype == DType::f32) {
                        xv = static_cast<const float*>(x) + first + off;
                      } else {
                        convert_to_f32(s.dtype, at(s.dtype, x, first + off), bx.data(),
                                       static_cast<std::size_t>(n));
                      }
                      for (std::int64_t i = 0; i < n; ++i) {
                        acc0[off + i] += g[i];
                        acc1[off + i] += static_cast<double>(g[i]) * (xv[i] - ctr[off + i]);
                      }
                    });
        }
      }
    }
  });
  for (std::int64_t image = 0; image < s.n; ++image) {
    for (std::int64_t ch = 0; ch < s.c; ++ch) {
      double a = 0, b = 0;
      for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
        const double* acc =
            partial.data() + static_cast<std::size_t>(image * chunks + chunk) * plane_count * (two ? 2 : 1);
        a += acc[ch];
        if (two) b += acc[plane_count + static_cast<std::size_t>(ch)];
      }
      out0[image * s.c + ch] = a;
      if (two) out1[image * s.c + ch] = b;
    }
  }
}

}  // namespace

std::pair<double, double> shifted_moments_of(const float* v, std::int64_t n, double center) {
  double l1[4] = {}, l2[4] = {};
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int j = 0; j < 4; ++j) {
      const double d = v[i + j] - center;
      l1[j] += d;
      l2[j] += d * d;
    }
  }
  for (; i < n; ++i) {
    const double d = v[i] - center;
    l1[0] += d;
    l2[0] += d * d;
  }
  return {(l1[0] + l1[1]) + (l1[2] + l1[3]), (l2[0] + l2[1]) + (l2[2] + l2[3])};
}

void plane_reduce(const PlaneShape& shape, PlaneSum what, const void* x, const void* dy, const double* center,
                  double* out0, double* out1) {
  if (shape.nhwc) {
    plane_reduce_nhwc(shape, what, x, dy, center, out0, out1);
  } else {
    plane_reduce_nchw(shape, what, x, dy, center, out0, out1);
  }
}

float plane_value(const PlaneShape& s, const void* x, std::int64_t plane, std::int64_t pixel) {
  const std::int64_t image = plane / s.c, channel = plane % s.c;
  const std::int64_t element = s.nhwc ? (image * s.hw + pixel) * s.c + channel : plane * s.hw + pixel;
  float value;
  convert_to_f32(s.dtype, at(s.dtype, x, element), &value, 1);
  return value;
}

void plane_map(const PlaneShape& s, const void* u, const void* v, const float* a, const float* b,
               const float* center, const float* center_lo, const float* c0, void* out) {
  // Rows of one plane (nchw: a plane's pixels) or of one pixel (nhwc: its channels).
  const std::int64_t rows = s.nhwc ? s.n * s.hw : s.n * s.c;
  const std::int64_t len = s.nhwc ? s.c : s.hw;
  const std::int64_t grain = std::max<std::int64_t>(1, 16384 / len);
  // Outputs far beyond the caches are written around them: a plain store first reads its line.
  const bool beyond_caches = rows * len * std::int64_t{4} >= kBypassCacheBytes;
  if (s.dtype == DType::f32 && s.nhwc && cpu_has_avx512()) {
    // Streamed only as whole aligned vectors: every row must start on a 64-byte line.
    const bool stream = beyond_caches && len % 16 == 0 && reinterpret_cast<std::uintptr_t>(out) % 64 == 0;
    // A pixel's channels, with the coefficients of its image's planes: runs of rows within one image.
    parallel_for(0, (rows + grain - 1) / grain, [&](std::int64_t lo, std::int64_t hi) {
      const std::int64_t end = std::min(rows, hi * grain);
      for (std::int64_t row = lo * grain; row < end;) {
        const std::int64_t image = row / s.hw, run = std::min(end, (image + 1) * s.hw) - row;
        const std::int64_t first = row * len, base = image * s.c;
        float* o = static_cast<float*>(out) + first;
        const float* uv = static_cast<const float*>(u) + first;
        if (v != nullptr) {
          avx512::nhwc_rows_map_two(uv, static_cast<const float*>(v) + first, o, run, len, a + base, b + base,
                                    center + base, c0 + base, stream);
        } else {
          avx512::nhwc_rows_map_one(uv, o, run, len, a + base, center + base,
                                    center_lo != nullptr ? center_lo + base : nullptr, c0 + base, stream);
        }
        row += run;
      }
    });
    return;
  }
  if (s.dtype == DType::f32 && !s.nhwc && cpu_has_avx512()) {
    parallel_for(0, (rows + grain - 1) / grain, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t row = lo * grain; row < std::min(rows, hi * grain); ++row) {
        const std::int64_t first = row * len;
        float* o = static_cast<float*>(out) + first;
        const float* uv = static_cast<const float*>(u) + first;
        if (v != nullptr) {
          avx512::plane_map_two(uv, static_cast<const float*>(v) + first, o, len, a[row],
                                b != nullptr ? b[row] : 0.f, center[row], c0[row], beyond_caches);
        } else {
          avx512::plane_map_one(uv, o, len, a[row], center[row], center_lo != nullptr ? center_lo[row] : 0.f,
                                c0[row], beyond_caches);
        }
      }
    });
    return;
  }
  parallel_for(0, (rows + grain - 1) / grain, [&](std::int64_t lo, std::int64_t hi) {
    std::vector<float> bu(kBlock), bv(kBlock), bo(kBlock);
    for (std::int64_t row = lo * grain; row < std::min(rows, hi * grain); ++row) {
      const std::int64_t first = row * len;
      as_floats(s.dtype, u, first, len, bu.data(), [&](const float* uv, std::int64_t n, std::int64_t off) {
        const float* vv = nullptr;
        if (v != nullptr) {
          if (s.dtype == DType::f32) {
            vv = static_cast<const float*>(v) + first + off;
          } else {
            convert_to_f32(s.dtype, at(s.dtype, v, first + off), bv.data(), static_cast<std::size_t>(n));
            vv = bv.data();
          }
        }
        // o may be u or v itself (in place) but only ever at the same index, so the loops below
        // carry no dependence (ivdep): without it the coefficient streams defeat vectorisation.
        float* o = s.dtype == DType::f32 ? static_cast<float*>(out) + first + off : bo.data();
        if (!s.nhwc) {
          const float ka = a[row], kb = b != nullptr ? b[row] : 0.f, km = center[row], kc = c0[row];
          const float kl = center_lo != nullptr ? center_lo[row] : 0.f;
          if (vv != nullptr) {
#pragma GCC ivdep
            for (std::int64_t i = 0; i < n; ++i) o[i] = ka * uv[i] + kb * (vv[i] - km) + kc;
          } else {
#pragma GCC ivdep
            for (std::int64_t i = 0; i < n; ++i) o[i] = ka * ((uv[i] - km) - kl) + kc;
          }
        } else {
          const std::int64_t base = (row / s.hw) * s.c + off;
          const float* ka = a + base;
          const float* km = center + base;
          const float* kc = c0 + base;
          if (vv != nullptr) {
            const float* kb = b + base;
#pragma GCC ivdep
            for (std::int64_t i = 0; i < n; ++i) o[i] = ka[i] * uv[i] + kb[i] * (vv[i] - km[i]) + kc[i];
          } else {
            if (center_lo != nullptr) {
              const float* kl = center_lo + base;
#pragma GCC ivdep
              for (std::int64_t i = 0; i < n; ++i) o[i] = ka[i] * ((uv[i] - km[i]) - kl[i]) + kc[i];
            } else {
#pragma GCC ivdep
              for (std::int64_t i = 0; i < n; ++i) o[i] = ka[i] * (uv[i] - km[i]) + kc[i];
            }
          }
        }
        if (s.dtype != DType::f32) {
          convert_from_f32(s.dtype, bo.data(), const_cast<char*>(at(s.dtype, out, first + off)),
                           static_cast<std::size_t>(n));
        }
      });
    }
  });
}

}  // namespace galley::backends::cpu::norm
