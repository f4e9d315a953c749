// cpu.gemm.avx512 and cpu.gemm.openblas: a GEMM problem of any direction lowered to one
// strided-batched product (dnn/gemm_lowering.hpp), cut into row x column blocks of every batch
// that the pool's workers take, each block one single-threaded sgemm with its bias added while it
// is still in cache. f16/bf16 operands are converted to f32 in the workspace and the result back.
// A shared operand's gradient (the batch reduces into one output) runs the batches one after the
// other, each block accumulating, unless the batch folds into k.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cpu/conv_base.hpp"
#include "backends/cpu/conv_blas.hpp"
#include "backends/cpu/conv_convert.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/gemm_solvers.hpp"
#include "backends/cpu/sgemm_avx512.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "dnn/gemm_lowering.hpp"
#include "galley/core/error.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

namespace galley::backends::cpu {
namespace {

using dnn::Applicability;
using dnn::ArgId;
using dnn::GemmArgs;
using dnn::GemmCall;
using dnn::GemmProblem;

// A block narrower than this wastes the kernel's packing; rows in multiples of the register tile.
constexpr std::int64_t kMinBlockRows = 96;
constexpr std::int64_t kMinBlockCols = 256;
// A one-row product (a linear layer at batch 1) packs nothing and streams k floats of the weights
// per column from memory: narrow blocks cost nothing there, and as many blocks as the pool splits
// into keep every worker streaming until the end.
constexpr std::int64_t kMinBlockColsOneRow = 32;
// Blocks per worker: more than one, so a worker that wakes late still takes a share.
constexpr std::int64_t kTasksPerWorker = 4;

enum class Kernel { avx512, openblas };

float* pack_buffer() {
  thread_local std::vector<float> storage(static_cast<std::size_t>(avx512::kPackFloats + 16));
  const auto addr = reinterpret_cast<std::uintptr_t>(storage.data());
  return reinterpret_cast<float*>((addr + 63) & ~std::uintptr_t{63});
}

void openblas_setup() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(blas_threaded() ? pool_size() : 1); });
}

void block_gemm(Kernel kernel, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                const float* x, std::int64_t ldx, const float* y, std::int64_t ldy, float beta, float* o,
                std::int64_t ldo) {
  if (kernel == Kernel::avx512) {
    avx512::sgemm(ta, tb, m, n, k, alpha, x, ldx, y, ldy, beta, o, ldo, pack_buffer());
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, x, static_cast<int>(ldx),
              y, static_cast<int>(ldy), beta, o, static_cast<int>(ldo));
}

// Elements of the problem's tensor of `role` (0 when it has none).
std::int64_t elements_of(const GemmProblem& p, ArgId role) {
  for (const dnn::TensorArg& t : p.tensors()) {
    if (t.id == role) return t.desc.elements();
  }
  return 0;
}

// Column sums of a rows x cols matrix into `out` (f32), in double, split over column blocks.
void column_sums(const float* src, std::int64_t rows, std::int64_t cols, float* out) {
  constexpr std::int64_t kCols = 64;
  parallel_for(0, (cols + kCols - 1) / kCols, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t blk = lo; blk < hi; ++blk) {
      const std::int64_t c0 = blk * kCols, c1 = std::min(cols, c0 + kCols);
      double acc[kCols] = {};
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* row = src + r * cols;
        for (std::int64_t c = c0; c < c1; ++c) acc[c - c0] += row[c];
      }
      for (std::int64_t c = c0; c < c1; ++c) out[c] = static_cast<float>(acc[c - c0]);
    }
  });
}

class CpuGemm final : public dnn::GemmSolver {
 public:
  CpuGemm(std::string name, Kernel kernel) : name_(std::move(name)), kernel_(kernel) {}
  std::string_view name() const override { return name_; }

  Applicability check(const GemmProblem& p, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16) {
      return Applicability::no(std::string("dtype ") + to_string(p.dtype) + " is not f32, f16 or bf16");
    }
    if (kernel_ == Kernel::avx512 && !cpu_has_avx512()) return Applicability::no("the CPU has no AVX-512");
    const GemmCall c = dnn::lower_gemm(p);
    for (const std::int64_t v : {c.m, c.n, c.k, c.ldx, c.ldy, c.ldo}) {
      if (v > INT_MAX)
        return Applicability::no("a size or row pitch of " + std::to_string(v) + " exceeds BLAS's int");
    }
    return Applicability::yes();
  }

  std::size_t workspace_bytes(const GemmProblem& p, const runtime::Device&) const override {
    if (p.dtype == DType::f32) return 0;
    const GemmCall c = dnn::lower_gemm(p);
    return floats_bytes(p, c.x_role) + floats_bytes(p, c.y_role) + floats_bytes(p, c.out_role) +
           (p.bias ? align_up64(static_cast<std::size_t>(p.n) * sizeof(float)) : 0);
  }

  void run(runtime::Stream& stream, const GemmProblem& problem, const GemmArgs& args) const override {
    const std::size_t need = workspace_bytes(problem, stream.device());
    if (args.workspace_bytes < need) {
      throw Error(Status::invalid_argument, name_ + ": workspace of " + std::to_string(args.workspace_bytes) +
                                                " bytes, needs " + std::to_string(need));
    }
    stream.launch(name_, [&] { stream.host_task([this, problem, args] { compute(problem, args); }); });
  }

  std::string detail(const GemmProblem& p, const runtime::Device&) const override {
    const GemmCall c = dnn::lower_gemm(p);
    std::string s = std::string(kernel_ == Kernel::avx512 ? "AVX-512 sgemm" : "OpenBLAS sgemm") + " " +
                    std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k);
    if (c.batch > 1) s += (c.sum_batches ? " summed over " : " x ") + std::to_string(c.batch);
    if (p.dtype != DType::f32) s += ", f32 staging";
    return s;
  }

 private:
  static std::size_t floats_bytes(const GemmProblem& p, ArgId role) {
    return align_up64(static_cast<std::size_t>(elements_of(p, role)) * sizeof(float));
  }

  void compute(const GemmProblem& p, const GemmArgs& args) const {
    if (kernel_ == Kernel::openblas) openblas_setup();
    const GemmCall c = dnn::lower_gemm(p);
    const void* x = dnn::gemm_pointer(args, c.x_role);
    const void* y = dnn::gemm_pointer(args, c.y_role);
    void* out = const_cast<void*>(dnn::gemm_pointer(args, c.out_role));
    const std::int64_t out_elems = elements_of(p, c.out_role);
    if (p.dtype == DType::f32) {
      product(c, static_cast<const float*>(x), static_cast<const float*>(y), static_cast<float*>(out),
              static_cast<const float*>(args.bias));
      if (dnn::has_bias_reduction(p))
        column_sums(static_cast<const float*>(args.dc), p.batch * p.m, p.n, static_cast<float*>(args.dbias));
      return;
    }
    auto* base = static_cast<std::byte*>(args.workspace);
    const auto carve = [&](ArgId role) {
      auto* f = reinterpret_cast<float*>(base);
      base += floats_bytes(p, role);
      return f;
    };
    float* xf = carve(c.x_role);
    float* yf = carve(c.y_role);
    float* of = carve(c.out_role);
    float* bias = p.bias ? reinterpret_cast<float*>(base) : nullptr;
    convert_to_f32(p.dtype, x, xf, static_cast<std::size_t>(elements_of(p, c.x_role)));
    convert_to_f32(p.dtype, y, yf, static_cast<std::size_t>(elements_of(p, c.y_role)));
    if (c.beta != 0) convert_to_f32(p.dtype, out, of, static_cast<std::size_t>(out_elems));
    if (c.bias) convert_to_f32(p.dtype, args.bias, bias, static_cast<std::size_t>(p.n));
    product(c, xf, yf, of, c.bias ? bias : nullptr);
    convert_from_f32(p.dtype, of, out, static_cast<std::size_t>(out_elems));
    if (dnn::has_bias_reduction(p)) {
      const float* dc = c.x_role == ArgId::diff_dst ? xf : yf;
      column_sums(dc, p.batch * p.m, p.n, bias);
      convert_from_f32(p.dtype, bias, args.dbias, static_cast<std::size_t>(p.n));
    }
  }

  // out[b] = alpha op(X[b]) op(Y[b]) + beta out[b] (+ bias), or the sum over b into one out.
  void product(const GemmCall& c, const float* x, const float* y, float* out, const float* bias) const {
    const std::int64_t workers = kernel_ == Kernel::openblas ? gemm_workers() : pool_size();
    const std::int64_t parallel = c.sum_batches ? 1 : c.batch;
    const std::int64_t want =
        std::max<std::int64_t>(1, (kTasksPerWorker * workers + parallel - 1) / parallel);
    const std::int64_t rb = block_count(c.m, kMinBlockRows, want);
    const std::int64_t cb =
        block_count(c.n, c.m == 1 ? kMinBlockColsOneRow : kMinBlockCols, (want + rb - 1) / rb);
    const auto block = [&](std::int64_t b, std::int64_t blk, float beta, bool add_bias) {
      const std::int64_t r = blk / cb, col = blk % cb;
      const std::int64_t r0 = c.m * r / rb, r1 = c.m * (r + 1) / rb;
      const std::int64_t c0 = c.n * col / cb, c1 = c.n * (col + 1) / cb;
      const float* xb = x + b * c.stride_x + (c.trans_x ? r0 : r0 * c.ldx);
      const float* yb = y + b * c.stride_y + (c.trans_y ? c0 * c.ldy : c0);
      float* ob = out + b * c.stride_o + r0 * c.ldo + c0;
      block_gemm(kernel_, c.trans_x, c.trans_y, r1 - r0, c1 - c0, c.k, c.alpha, xb, c.ldx, yb, c.ldy, beta,
                 ob, c.ldo);
      if (add_bias) {
        for (std::int64_t i = 0; i < r1 - r0; ++i)
          for (std::int64_t j = 0; j < c1 - c0; ++j) ob[i * c.ldo + j] += bias[c0 + j];
      }
    };
    const auto tasks = [&](std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& body) {
      if (kernel_ == Kernel::openblas) {
        for_gemm_tasks(0, count, body);
      } else {
        parallel_for(0, count, body);
      }
    };
    if (!c.sum_batches) {
      tasks(c.batch * rb * cb, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t t = lo; t < hi; ++t) block(t / (rb * cb), t % (rb * cb), c.beta, bias != nullptr);
      });
      return;
    }
    // Each block accumulates the batches itself, so no two threads write one element.
    tasks(rb * cb, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t t = lo; t < hi; ++t) {
        for (std::int64_t b = 0; b < c.batch; ++b) block(b, t, b == 0 ? c.beta : 1.f, false);
      }
    });
  }

  std::string name_;
  Kernel kernel_;
};

}  // namespace

std::unique_ptr<dnn::GemmSolver> make_gemm_avx512() {
  return std::make_unique<CpuGemm>("cpu.gemm.avx512", Kernel::avx512);
}
std::unique_ptr<dnn::GemmSolver> make_gemm_openblas() {
  return std::make_unique<CpuGemm>("cpu.gemm.openblas", Kernel::openblas);
}

}  // namespace galley::backends::cpu
