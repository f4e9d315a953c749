// cpu.lnorm.rows: layer norm over the cpu pool, a row at a time (AVX-512 row loops where the cpu has
// them). Row statistics in double, in one pass about the row's first value (its differences from
// the row are exact in f32 for values near it, so large means cost no precision); the backward's
// dscale and dshift are column sums kept per fixed block of rows as the rows go by, then added
// block after block in double, so the result does not depend on the thread count. Short f32 rows
// (channels-last layer norm over C) on AVX-512 stay in registers instead: their two passes over
// registers cost less than the double sums' set-up (lnorm_rows_avx512.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cpu/broadcast_fill.hpp"
#include "backends/cpu/conv_convert.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/lnorm_rows_avx512.hpp"
#include "backends/cpu/norm_planes.hpp"
#include "backends/cpu/norm_solvers.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu {
namespace {

using dnn::Applicability;
using dnn::LayerNormProblem;
using dnn::NormArgs;

// The backward's column partials: one per block of this many rows, a block per task.
constexpr std::int64_t kRowsPerBlock = 32;

char* at(DType dtype, const void* base, std::int64_t element) {
  return static_cast<char*>(const_cast<void*>(base)) + element * static_cast<std::int64_t>(size_of(dtype));
}

/// Row `row` of a tensor of rows of `len` as floats: its own memory for f32, else converted into
/// `buffer`.
const float* row_floats(DType dtype, const void* base, std::int64_t row, std::int64_t len, float* buffer) {
  if (dtype == DType::f32) return static_cast<const float*>(base) + row * len;
  convert_to_f32(dtype, at(dtype, base, row * len), buffer, static_cast<std::size_t>(len));
  return buffer;
}

/// Where row `row`'s f32 results go: the tensor itself for f32, else `buffer` (then store_row).
float* row_out(DType dtype, void* base, std::int64_t row, std::int64_t len, float* buffer) {
  return dtype == DType::f32 ? static_cast<float*>(base) + row * len : buffer;
}
void store_row(DType dtype, const float* values, void* base, std::int64_t row, std::int64_t len) {
  if (dtype != DType::f32)
    convert_from_f32(dtype, values, at(dtype, base, row * len), static_cast<std::size_t>(len));
}

/// Scratch rows for the f16 and bf16 conversions, none for f32.
struct RowBuffers {
  std::unique_ptr<float[]> a, b, c;
  RowBuffers(DType dtype, std::int64_t len) {
    if (dtype == DType::f32) return;
    a.reset(new float[static_cast<std::size_t>(len)]);
    b.reset(new float[static_cast<std::size_t>(len)]);
    c.reset(new float[static_cast<std::size_t>(len)]);
  }
};

// The scalar row loops, for cpus without AVX-512: the same sums and maps (the moments are
// norm::shifted_moments_of).
void row_affine(const float* x, const float* scale, const float* shift, float* y, std::int64_t n, float m,
                float m_lo, float r) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = ((x[i] - m) - m_lo) * r * scale[i] + shift[i];
}
void row_gradient_sums(const float* x, const float* dy, const float* scale, std::int64_t n, float m, float r,
                       double& sum_g, double& sum_gx, float* dscale, float* dshift) {
  double sg = 0, sgx = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float xhat = (x[i] - m) * r, g = dy[i] * scale[i];
    sg += g;
    sgx += static_cast<double>(g * xhat);
    dscale[i] += dy[i] * xhat;
    dshift[i] += dy[i];
  }
  sum_g = sg;
  sum_gx = sgx;
}
void row_dx(const float* x, const float* dy, const float* scale, float* dx, std::int64_t n, float m, float r,
            float kg, float kx) {
  for (std::int64_t i = 0; i < n; ++i) dx[i] = r * (dy[i] * scale[i] - kg - (x[i] - m) * r * kx);
}

/// Whether an f32 output of rows x len at `out` is written with non-temporal stores: far beyond the
/// caches (a plain store would first read each line), in whole 64-byte-aligned vectors.
bool stream_rows(std::int64_t rows, std::int64_t len, const void* out) {
  return rows * len * std::int64_t{4} >= kBypassCacheBytes && len % 16 == 0 &&
         reinterpret_cast<std::uintptr_t>(out) % 64 == 0;
}

void forward(const LayerNormProblem& p, const NormArgs& a) {
  const std::int64_t rows = p.outer(), len = p.inner();
  const auto* scale = static_cast<const float*>(a.scale);
  const auto* shift = static_cast<const float*>(a.shift);
  const bool avx512 = cpu_has_avx512();
  if (avx512 && p.dtype == DType::f32 && len <= avx512::kShortRow) {
    const bool stream = stream_rows(rows, len, a.y);
    parallel_for(0, rows, [&](std::int64_t lo, std::int64_t hi) {
      avx512::lnorm_short_rows_forward(static_cast<const float*>(a.x) + lo * len, scale, shift,
                                       static_cast<float*>(a.y) + lo * len, hi - lo, len, p.epsilon,
                                       static_cast<float*>(a.saved_mean) + lo,
                                       static_cast<float*>(a.saved_invstd) + lo, stream);
    });
    return;
  }
  parallel_for(0, rows, [&](std::int64_t lo, std::int64_t hi) {
    RowBuffers buffers(p.dtype, len);
    for (std::int64_t row = lo; row < hi; ++row) {
      const float* x = row_floats(p.dtype, a.x, row, len, buffers.a.get());
      const double c = x[0];
      double s1 = 0, s2 = 0;
      if (avx512) {
        avx512::lnorm_row_moments(x, len, x[0], s1, s2);
      } else {
        std::tie(s1, s2) = norm::shifted_moments_of(x, len, c);
      }
      const double d = s1 / static_cast<double>(len);
      const double mean = c + d;
      const double var = std::max(0.0, s2 / static_cast<double>(len) - d * d);
      const double invstd = 1.0 / std::sqrt(var + p.epsilon);
      static_cast<float*>(a.saved_mean)[row] = static_cast<float>(mean);
      static_cast<float*>(a.saved_invstd)[row] = static_cast<float>(invstd);
      // The mean as f32 plus what rounding it lost: (v - m) is exact for v near m, and the low
      // part keeps y as exact as with the mean in double.
      const float m = static_cast<float>(mean), m_lo = static_cast<float>(mean - m),
                  r = static_cast<float>(invstd);
      float* y = row_out(p.dtype, a.y, row, len, buffers.b.get());
      if (avx512) {
        avx512::lnorm_row_affine(x, scale, shift, y, len, m, m_lo, r);
      } else {
        row_affine(x, scale, shift, y, len, m, m_lo, r);
      }
      store_row(p.dtype, y, a.y, row, len);
    }
  });
}

void backward(const LayerNormProblem& p, const NormArgs& a) {
  const std::int64_t rows = p.outer(), len = p.inner();
  const auto* scale = static_cast<const float*>(a.scale);
  const auto* mean = static_cast<const float*>(a.saved_mean);
  const auto* invstd = static_cast<const float*>(a.saved_invstd);
  const bool avx512 = cpu_has_avx512();
  const std::int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  // partial[(block * 2 + 0) * len + col]: the block's dscale sums, then its dshift sums.
  std::vector<float> partial(static_cast<std::size_t>(blocks * 2 * len), 0.f);
  const bool stream = avx512 && p.dtype == DType::f32 && stream_rows(rows, len, a.dx);
  parallel_for(0, blocks, [&](std::int64_t lo, std::int64_t hi) {
    RowBuffers buffers(p.dtype, len);
    for (std::int64_t block = lo; block < hi; ++block) {
      float* ds = partial.data() + block * 2 * len;
      float* db = ds + len;
      if (avx512 && p.dtype == DType::f32 && len <= avx512::kShortBackwardRow) {
        const std::int64_t first = block * kRowsPerBlock, count = std::min(rows - first, kRowsPerBlock);
        avx512::lnorm_short_rows_backward(
            static_cast<const float*>(a.x) + first * len, static_cast<const float*>(a.dy) + first * len,
            scale, static_cast<float*>(a.dx) + first * len, count, len, mean + first, invstd + first, ds, db);
        continue;
      }
      for (std::int64_t row = block * kRowsPerBlock; row < std::min(rows, (block + 1) * kRowsPerBlock);
           ++row) {
        const float* x = row_floats(p.dtype, a.x, row, len, buffers.a.get());
        const float* dy = row_floats(p.dtype, a.dy, row, len, buffers.b.get());
        const float m = mean[row], r = invstd[row];
        double sg = 0, sgx = 0;
        if (avx512) {
          avx512::lnorm_row_gradient_sums(x, dy, scale, len, m, r, sg, sgx, ds, db);
        } else {
          row_gradient_sums(x, dy, scale, len, m, r, sg, sgx, ds, db);
        }
        const float kg = static_cast<float>(sg / static_cast<double>(len));
        const float kx = static_cast<float>(sgx / static_cast<double>(len));
        float* dx = row_out(p.dtype, a.dx, row, len, buffers.c.get());
        if (avx512) {
          avx512::lnorm_row_dx(x, dy, scale, dx, len, m, r, kg, kx, stream);
        } else {
          row_dx(x, dy, scale, dx, len, m, r, kg, kx);
        }
        store_row(p.dtype, dx, a.dx, row, len);
      }
    }
    if (stream) avx512::lnorm_stream_fence();
  });
  // dscale, dshift: columns split among threads, the blocks added in order in double.
  parallel_for(0, len, [&](std::int64_t c0, std::int64_t c1) {
    std::vector<double> ds(static_cast<std::size_t>(c1 - c0), 0.0), db(ds.size(), 0.0);
    for (std::int64_t block = 0; block < blocks; ++block) {
      const float* s = partial.data() + block * 2 * len;
      for (std::int64_t col = c0; col < c1; ++col) {
        ds[static_cast<std::size_t>(col - c0)] += s[col];
        db[static_cast<std::size_t>(col - c0)] += s[len + col];
      }
    }
    for (std::int64_t col = c0; col < c1; ++col) {
      static_cast<float*>(a.dscale)[col] = static_cast<float>(ds[static_cast<std::size_t>(col - c0)]);
      static_cast<float*>(a.dshift)[col] = static_cast<float>(db[static_cast<std::size_t>(col - c0)]);
    }
  });
}

class LnormRows final : public dnn::LayerNormSolver {
 public:
  std::string_view name() const override { return "cpu.lnorm.rows"; }
  Applicability check(const LayerNormProblem& p, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16) {
      return Applicability::no(std::string("dtype ") + to_string(p.dtype) + " is not f32, f16 or bf16");
    }
    return Applicability::yes();
  }
  void run(runtime::Stream& stream, const LayerNormProblem& p, const NormArgs& a) const override {
    stream.launch(name(), [&] {
      stream.host_task([p, a] {
        if (p.direction == dnn::NormDirection::backward) {
          backward(p, a);
        } else {
          forward(p, a);
        }
      });
    });
  }
  std::string detail(const LayerNormProblem&, const runtime::Device&) const override {
    return "rows over the pool, one-pass statistics about the row's first value in double (f32 rows of up to "
           "256 held in AVX-512 registers: two passes in f32)";
  }
};

}  // namespace

std::unique_ptr<dnn::LayerNormSolver> make_lnorm_rows() { return std::make_unique<LnormRows>(); }

}  // namespace galley::backends::cpu
