// cpu.lnorm.rows: layer norm one row at a time over the cpu pool. Row statistics are two-pass in
// double (a row is re-read from cache); the backward's dscale and dshift are column sums, done by a
// second pass that splits the columns among threads and walks the rows in order, so the result
// does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/conv_convert.hpp"
#include "backends/cpu/norm_solvers.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu {
namespace {

using dnn::Applicability;
using dnn::LayerNormProblem;
using dnn::NormArgs;

// Rows longer than this are staged in pieces; the stage buffers stay in L2.
constexpr std::int64_t kBlock = 4096;

const char* at(DType dtype, const void* base, std::int64_t element) {
  return static_cast<const char*>(base) + element * static_cast<std::int64_t>(size_of(dtype));
}

/// Calls fn(values, count, offset) over [first, first + count) as floats, kBlock at a time.
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

const float* floats_of(DType dtype, const void* base, std::int64_t first, std::int64_t n, float* buffer) {
  if (dtype == DType::f32) return static_cast<const float*>(base) + first;
  convert_to_f32(dtype, at(dtype, base, first), buffer, static_cast<std::size_t>(n));
  return buffer;
}

void forward(const LayerNormProblem& p, const NormArgs& a) {
  const std::int64_t rows = p.outer(), len = p.inner();
  const auto* scale = static_cast<const float*>(a.scale);
  const auto* shift = static_cast<const float*>(a.shift);
  parallel_for(0, rows, [&](std::int64_t lo, std::int64_t hi) {
    std::vector<float> bx(kBlock), by(kBlock);
    for (std::int64_t row = lo; row < hi; ++row) {
      const std::int64_t first = row * len;
      double sum[4] = {};
      as_floats(p.dtype, a.x, first, len, bx.data(), [&](const float* v, std::int64_t n, std::int64_t) {
        std::int64_t i = 0;
        for (; i + 4 <= n; i += 4)
          for (int j = 0; j < 4; ++j) sum[j] += v[i + j];
        for (; i < n; ++i) sum[0] += v[i];
      });
      const double mean = ((sum[0] + sum[1]) + (sum[2] + sum[3])) / static_cast<double>(len);
      double sq[4] = {};
      as_floats(p.dtype, a.x, first, len, bx.data(), [&](const float* v, std::int64_t n, std::int64_t) {
        std::int64_t i = 0;
        for (; i + 4 <= n; i += 4) {
          for (int j = 0; j < 4; ++j) {
            const double d = v[i + j] - mean;
            sq[j] += d * d;
          }
        }
        for (; i < n; ++i) sq[0] += (v[i] - mean) * (v[i] - mean);
      });
      const double var = ((sq[0] + sq[1]) + (sq[2] + sq[3])) / static_cast<double>(len);
      const double invstd = 1.0 / std::sqrt(var + p.epsilon);
      static_cast<float*>(a.saved_mean)[row] = static_cast<float>(mean);
      static_cast<float*>(a.saved_invstd)[row] = static_cast<float>(invstd);
      // The mean as f32 plus what rounding it lost: (v - m) is exact for v near m, and the low
      // part keeps y as exact as with the mean in double.
      const float m = static_cast<float>(mean), m_lo = static_cast<float>(mean - m),
                  r = static_cast<float>(invstd);
      as_floats(p.dtype, a.x, first, len, bx.data(), [&](const float* v, std::int64_t n, std::int64_t off) {
        float* o = p.dtype == DType::f32 ? static_cast<float*>(a.y) + first + off : by.data();
        for (std::int64_t i = 0; i < n; ++i) o[i] = ((v[i] - m) - m_lo) * r * scale[off + i] + shift[off + i];
        if (p.dtype != DType::f32) {
          convert_from_f32(p.dtype, o, const_cast<char*>(at(p.dtype, a.y, first + off)),
                           static_cast<std::size_t>(n));
        }
      });
    }
  });
}

void backward(const LayerNormProblem& p, const NormArgs& a) {
  const std::int64_t rows = p.outer(), len = p.inner();
  const auto* scale = static_cast<const float*>(a.scale);
  const auto* mean = static_cast<const float*>(a.saved_mean);
  const auto* invstd = static_cast<const float*>(a.saved_invstd);
  // dx, row by row.
  parallel_for(0, rows, [&](std::int64_t lo, std::int64_t hi) {
    std::vector<float> bx(kBlock), bdy(kBlock), bo(kBlock);
    for (std::int64_t row = lo; row < hi; ++row) {
      const std::int64_t first = row * len;
      const float m = mean[row], r = invstd[row];
      // Four independent lanes per sum: one chain of dependent double adds would bound the loop.
      double sg4[4] = {}, sgx4[4] = {};
      for (std::int64_t off = 0; off < len; off += kBlock) {
        const std::int64_t n = std::min(kBlock, len - off);
        const float* x = floats_of(p.dtype, a.x, first + off, n, bx.data());
        const float* dy = floats_of(p.dtype, a.dy, first + off, n, bdy.data());
        const float* sc = scale + off;
        std::int64_t i = 0;
        for (; i + 4 <= n; i += 4) {
          for (int j = 0; j < 4; ++j) {
            const float g = dy[i + j] * sc[i + j];
            sg4[j] += g;
            sgx4[j] += static_cast<double>(g * ((x[i + j] - m) * r));
          }
        }
        for (; i < n; ++i) {
          const float g = dy[i] * sc[i];
          sg4[0] += g;
          sgx4[0] += static_cast<double>(g * ((x[i] - m) * r));
        }
      }
      const double sg = (sg4[0] + sg4[1]) + (sg4[2] + sg4[3]);
      const double sgx = (sgx4[0] + sgx4[1]) + (sgx4[2] + sgx4[3]);
      const float kg = static_cast<float>(sg / static_cast<double>(len));
      const float kx = static_cast<float>(sgx / static_cast<double>(len));
      for (std::int64_t off = 0; off < len; off += kBlock) {
        const std::int64_t n = std::min(kBlock, len - off);
        const float* x = floats_of(p.dtype, a.x, first + off, n, bx.data());
        const float* dy = floats_of(p.dtype, a.dy, first + off, n, bdy.data());
        float* o = p.dtype == DType::f32 ? static_cast<float*>(a.dx) + first + off : bo.data();
        for (std::int64_t i = 0; i < n; ++i) o[i] = r * (dy[i] * scale[off + i] - kg - (x[i] - m) * r * kx);
        if (p.dtype != DType::f32) {
          convert_from_f32(p.dtype, o, const_cast<char*>(at(p.dtype, a.dx, first + off)),
                           static_cast<std::size_t>(n));
        }
      }
    }
  });
  // dscale, dshift: columns split among threads, rows in order.
  const std::int64_t col_blocks = (len + 255) / 256;
  parallel_for(0, col_blocks, [&](std::int64_t lo, std::int64_t hi) {
    const std::int64_t c0 = lo * 256, c1 = std::min(len, hi * 256), n = c1 - c0;
    std::vector<double> ds(static_cast<std::size_t>(n), 0.0), db(static_cast<std::size_t>(n), 0.0);
    std::vector<float> bx(static_cast<std::size_t>(std::min(n, kBlock))), bdy(bx.size());
    for (std::int64_t row = 0; row < rows; ++row) {
      const float m = mean[row], r = invstd[row];
      for (std::int64_t off = 0; off < n; off += kBlock) {
        const std::int64_t k = std::min(kBlock, n - off);
        const float* x = floats_of(p.dtype, a.x, row * len + c0 + off, k, bx.data());
        const float* dy = floats_of(p.dtype, a.dy, row * len + c0 + off, k, bdy.data());
        for (std::int64_t i = 0; i < k; ++i) {
          ds[static_cast<std::size_t>(off + i)] += static_cast<double>(dy[i]) * ((x[i] - m) * r);
          db[static_cast<std::size_t>(off + i)] += dy[i];
        }
      }
    }
    for (std::int64_t i = 0; i < n; ++i) {
      static_cast<float*>(a.dscale)[c0 + i] = static_cast<float>(ds[static_cast<std::size_t>(i)]);
      static_cast<float*>(a.dshift)[c0 + i] = static_cast<float>(db[static_cast<std::size_t>(i)]);
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
    return "a row per task, two-pass statistics in double";
  }
};

}  // namespace

std::unique_ptr<dnn::LayerNormSolver> make_lnorm_rows() { return std::make_unique<LnormRows>(); }

}  // namespace galley::backends::cpu
