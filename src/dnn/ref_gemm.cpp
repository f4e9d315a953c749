// ref.gemm: the plainest correct GEMM in double. Operands are staged as floats in the layout that
// makes each output a contiguous dot product, so the inner loop has no dtype or stride dispatch.
#include "ref_gemm.hpp"

#include <cstddef>
#include <string>
#include <vector>

#include "dnn/reference_threads.hpp"
#include "galley/core/error.hpp"
#include "tensor_data.hpp"

namespace galley::dnn {
namespace {

using Floats = std::vector<float>;

Floats load(DType dtype, const void* data, std::int64_t count) {
  Floats out(static_cast<std::size_t>(count));
  to_float(dtype, data, out.data(), count);
  return out;
}

// `batches` row-major rows x cols matrices, each transposed (when `transpose`) or copied.
Floats arrange(const Floats& src, std::int64_t batches, std::int64_t rows, std::int64_t cols, bool transpose) {
  if (!transpose) return src;
  Floats out(src.size());
  for (std::int64_t b = 0; b < batches; ++b) {
    const float* s = src.data() + b * rows * cols;
    float* d = out.data() + b * rows * cols;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) d[c * rows + r] = s[r * cols + c];
  }
  return out;
}

double dot(const float* x, const float* y, std::int64_t count) {
  double acc[4] = {0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 4 <= count; i += 4) {
    for (int j = 0; j < 4; ++j) acc[j] += static_cast<double>(x[i + j]) * y[i + j];
  }
  for (; i < count; ++i) acc[0] += static_cast<double>(x[i]) * y[i];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

class RefGemm final : public GemmSolver {
 public:
  std::string_view name() const override { return kRefGemmName; }
  bool is_reference() const override { return true; }

  Applicability check(const GemmProblem& p, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16) {
      return Applicability::no(std::string("dtype ") + to_string(p.dtype) + " is not f32, f16 or bf16");
    }
    return Applicability::yes();
  }

  void run(runtime::Stream& stream, const GemmProblem& problem, const GemmArgs& args) const override {
    stream.launch(name(), [&] { stream.host_task([problem, args] { reference_gemm(problem, args); }); });
  }
};

}  // namespace

void reference_gemm(const GemmProblem& p, const GemmArgs& args) {
  p.validate();
  const std::int64_t m = p.m, n = p.n, k = p.k, batch = p.batch;
  const std::int64_t ab = p.a_batches(), bb = p.b_batches();
  const auto a_of = [&](std::int64_t b) { return p.shared_a ? 0 : b; };
  const auto b_of = [&](std::int64_t b) { return p.shared_b ? 0 : b; };
  const unsigned threads = reference_threads();
  const std::size_t elem = size_of(p.dtype);

  switch (p.direction) {
    case GemmDirection::forward: {
      // Aop [ab][m][k] and op(B)^T [bb][n][k]: each output is a dot over k.
      const Floats a = arrange(load(p.dtype, args.a, ab * m * k), ab, k, m, p.trans_a);
      const Floats bt = arrange(load(p.dtype, args.b, bb * k * n), bb, k, n, !p.trans_b);
      const Floats bias = p.bias ? load(p.dtype, args.bias, n) : Floats(static_cast<std::size_t>(n), 0.f);
      const Floats old = p.beta != 0 ? load(p.dtype, args.c, batch * m * n) : Floats();
      reference_fan_out(batch * m, threads, [&](std::int64_t row) {
        const std::int64_t b = row / m, i = row % m;
        Floats out(static_cast<std::size_t>(n));
        const float* ar = a.data() + (a_of(b) * m + i) * k;
        for (std::int64_t j = 0; j < n; ++j) {
          double v = p.alpha * dot(ar, bt.data() + (b_of(b) * n + j) * k, k) + bias[static_cast<std::size_t>(j)];
          if (p.beta != 0) v += p.beta * static_cast<double>(old[static_cast<std::size_t>(row * n + j)]);
          out[static_cast<std::size_t>(j)] = static_cast<float>(v);
        }
        from_float(p.dtype, out.data(), static_cast<std::byte*>(args.c) + static_cast<std::size_t>(row * n) * elem, n);
      });
      return;
    }
    case GemmDirection::backward_data: {
      // dA_op[i][kk] = alpha * sum over the batches of this A of dot_j(dC[b][i][:], op(B)[b][kk][:]).
      const Floats dc = load(p.dtype, args.dc, batch * m * n);
      const Floats bop = arrange(load(p.dtype, args.b, bb * k * n), bb, n, k, p.trans_b);  // [bb][k][n]
      Floats da(static_cast<std::size_t>(ab * m * k));
      reference_fan_out(ab * m, threads, [&](std::int64_t row) {
        const std::int64_t a_batch = row / m, i = row % m;
        for (std::int64_t kk = 0; kk < k; ++kk) {
          double acc = 0;
          for (std::int64_t b = 0; b < batch; ++b) {
            if (a_of(b) != a_batch) continue;
            acc += dot(dc.data() + (b * m + i) * n, bop.data() + (b_of(b) * k + kk) * n, n);
          }
          const std::int64_t at = p.trans_a ? kk * m + i : i * k + kk;
          da[static_cast<std::size_t>(a_batch * m * k + at)] = static_cast<float>(p.alpha * acc);
        }
      });
      from_float(p.dtype, da.data(), args.da, ab * m * k);
      return;
    }
    case GemmDirection::backward_weights: {
      // dB_op[kk][j] = alpha * sum over the batches of this B of dot_i(op(A)^T[b][kk][:], dC^T[b][j][:]).
      const Floats dc = load(p.dtype, args.dc, batch * m * n);
      const Floats at = arrange(load(p.dtype, args.a, ab * m * k), ab, m, k, !p.trans_a);  // [ab][k][m]
      const Floats dct = arrange(dc, batch, m, n, true);                                     // [batch][n][m]
      Floats db(static_cast<std::size_t>(bb * k * n));
      reference_fan_out(bb * k, threads, [&](std::int64_t row) {
        const std::int64_t b_batch = row / k, kk = row % k;
        for (std::int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (std::int64_t b = 0; b < batch; ++b) {
            if (b_of(b) != b_batch) continue;
            acc += dot(at.data() + (a_of(b) * k + kk) * m, dct.data() + (b * n + j) * m, m);
          }
          const std::int64_t pos = p.trans_b ? j * k + kk : kk * n + j;
          db[static_cast<std::size_t>(b_batch * k * n + pos)] = static_cast<float>(p.alpha * acc);
        }
      });
      from_float(p.dtype, db.data(), args.db, bb * k * n);
      if (p.bias) {
        Floats dbias(static_cast<std::size_t>(n));
        for (std::int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (std::int64_t b = 0; b < batch; ++b)
            for (std::int64_t i = 0; i < m; ++i) acc += dct[static_cast<std::size_t>((b * n + j) * m + i)];
          dbias[static_cast<std::size_t>(j)] = static_cast<float>(acc);
        }
        from_float(p.dtype, dbias.data(), args.dbias, n);
      }
      return;
    }
  }
  throw Error(Status::invalid_argument, "reference_gemm: unknown direction");
}

std::unique_ptr<GemmSolver> make_ref_gemm() { return std::make_unique<RefGemm>(); }

}  // namespace galley::dnn
