// cuda.gemm.cublas: a GEMM problem of any direction lowered to one strided-batched product
// (dnn/gemm_lowering.hpp) and issued as cublasGemmStridedBatchedEx. cuBLAS is column-major, so the
// row-major out = op(X) op(Y) is issued as its transpose, out^T = op(Y)^T op(X)^T, which swaps the
// operands and keeps each one's transpose flag. Compute is CUBLAS_COMPUTE_32F: FMA for f32 (the
// handle's math mode stays the default, so never TF32), tensor cores for f16/bf16. The bias is a
// second pass (gpu/gemm_simt.cu), as is the bias gradient's column sum. A gradient summed over the
// batch that cannot fold into k is a loop of GEMMs accumulating into the output (through an f32
// staging buffer for f16/bf16, so the sum is rounded once).
#include <cublas_v2.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backends/cuda/vendor_dtypes.hpp"
#include "backends/cuda/runtime_check.hpp"
#include "backends/cuda/stream_identity.hpp"
#include "backends/cuda/vendor_exit.hpp"
#include "backends/cuda/vendor_gemm_solvers.hpp"
#include "backends/gpu/gemm_kernels.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::cuda {
namespace {

using dnn::Applicability;
using dnn::GemmArgs;
using dnn::GemmCall;
using dnn::GemmProblem;

constexpr const char* kName = "cuda.gemm.cublas";

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(Status::backend_error, std::string(kName) + ": " + call + ": " + cublasGetStatusName(status) + " (" +
                                           cublasGetStatusString(status) + ")");
}

std::size_t align_up256(std::size_t bytes) { return (bytes + 255) & ~std::size_t{255}; }

// f32 staging of an f16/bf16 output that sums over the batch in a loop of GEMMs.
std::size_t staging_bytes(const GemmProblem& p, const GemmCall& c) {
  if (!c.sum_batches || p.dtype == DType::f32) return 0;
  return align_up256(std::size_t(c.m) * std::size_t(c.ldo) * sizeof(float));
}

std::size_t reduction_bytes(const GemmProblem& p) {
  return dnn::has_bias_reduction(p) ? gpu::column_sums_workspace(p.batch * p.m, p.n) : 0;
}

struct Handle {
  std::mutex mutex;
  cublasHandle_t handle = nullptr;  // destroyed at exit (vendor_exit.hpp)
  StreamIdentity stream;

  /// cublasSetStream only when the stream changed. `mutex` held.
  void set_stream(cudaStream_t s, std::uint64_t galley_id) {
    if (stream.same_as(s, galley_id)) return;
    if (const cublasStatus_t st = cublasSetStream(handle, s); st != CUBLAS_STATUS_SUCCESS) {
      stream.forget();
      check_cublas(st, "cublasSetStream");
    }
  }
};

class CublasGemmSolver final : public dnn::GemmSolver {
 public:
  std::string_view name() const override { return kName; }

  Applicability check(const GemmProblem& p, const runtime::Device& device) const override {
    if (device.backend() != "cuda") return Applicability::no("runs on cuda devices, not " + device.name());
    if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
      return Applicability::no(std::string("dtype ") + to_string(p.dtype) + " (needs f32, f16 or bf16)");
    const GemmCall c = dnn::lower_gemm(p);
    for (const std::int64_t v : {c.m, c.n, c.k, c.ldx, c.ldy, c.ldo, c.batch}) {
      if (v > INT32_MAX) return Applicability::no("a size, row pitch or batch of " + std::to_string(v) + " exceeds cuBLAS's int");
    }
    return Applicability::yes();
  }

  std::size_t workspace_bytes(const GemmProblem& p, const runtime::Device&) const override {
    return staging_bytes(p, dnn::lower_gemm(p)) + reduction_bytes(p);
  }

  void run(runtime::Stream& stream, const GemmProblem& p, const GemmArgs& a) const override {
    const GemmCall c = dnn::lower_gemm(p);
    const std::size_t staging = staging_bytes(p, c), need = staging + reduction_bytes(p);
    if (a.workspace_bytes < need)
      throw Error(Status::invalid_argument, std::string(kName) + ": workspace of " + std::to_string(a.workspace_bytes) +
                                                " bytes, needs " + std::to_string(need));
    Handle& h = handle(stream.device());
    stream.launch(kName, [&] {
      DeviceGuard guard(stream.device().index());
      const auto s = static_cast<cudaStream_t>(stream.native_handle());
      std::lock_guard lock(h.mutex);
      h.set_stream(s, stream.id());
      const void* x = dnn::gemm_pointer(a, c.x_role);
      const void* y = dnn::gemm_pointer(a, c.y_role);
      void* out = const_cast<void*>(dnn::gemm_pointer(a, c.out_role));
      product(h.handle, p.dtype, c, x, y, out, staging > 0 ? static_cast<float*>(a.workspace) : nullptr, s);
      if (c.bias) gpu::launch_add_bias(p.dtype, out, a.bias, c.batch * c.m, c.n, c.ldo, s);
      if (dnn::has_bias_reduction(p)) {
        gpu::launch_column_sums(p.dtype, a.dc, p.batch * p.m, p.n, a.dbias,
                                static_cast<std::byte*>(a.workspace) + staging, s);
      }
    });
  }

  std::string detail(const GemmProblem& p, const runtime::Device&) const override {
    const GemmCall c = dnn::lower_gemm(p);
    std::string s = c.sum_batches ? "cublasGemmEx over the batch, accumulating" : "cublasGemmStridedBatchedEx";
    return s + ", fp32 compute" + (p.bias ? ", bias as a second pass" : "");
  }

 private:
  // out^T (n x m, column-major, ld ldo) = op(Y)^T op(X)^T: cuBLAS's A is Y, its B is X.
  static void product(cublasHandle_t h, DType dtype, const GemmCall& c, const void* x, const void* y, void* out,
                      float* staging, cudaStream_t s) {
    const cudaDataType_t dt = cuda_data_type(dtype, kName);
    const cublasOperation_t op_y = c.trans_y ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_x = c.trans_x ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int m = int(c.n), n = int(c.m), k = int(c.k);
    if (!c.sum_batches) {
      check_cublas(cublasGemmStridedBatchedEx(h, op_y, op_x, m, n, k, &c.alpha, y, dt, int(c.ldy), c.stride_y, x, dt,
                                              int(c.ldx), c.stride_x, &c.beta, out, dt, int(c.ldo), c.stride_o,
                                              int(c.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx");
      return;
    }
    void* target = staging != nullptr ? static_cast<void*>(staging) : out;
    const cudaDataType_t target_type = staging != nullptr ? CUDA_R_32F : dt;
    const auto elem = static_cast<std::int64_t>(size_of(dtype));
    for (std::int64_t b = 0; b < c.batch; ++b) {
      const float beta = b == 0 ? c.beta : 1.f;
      const auto* yb = static_cast<const std::byte*>(y) + b * c.stride_y * elem;
      const auto* xb = static_cast<const std::byte*>(x) + b * c.stride_x * elem;
      check_cublas(cublasGemmEx(h, op_y, op_x, m, n, k, &c.alpha, yb, dt, int(c.ldy), xb, dt, int(c.ldx), &beta, target,
                                target_type, int(c.ldo), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx");
    }
    if (staging != nullptr) gpu::launch_from_f32(dtype, staging, out, c.m * c.ldo, s);
  }

  Handle& handle(const runtime::Device& device) const {
    std::lock_guard lock(mutex_);
    auto& slot = handles_[device.index()];
    if (!slot) {
      auto h = std::make_unique<Handle>();
      DeviceGuard guard(device.index());
      check_cublas(cublasCreate(&h->handle), "cublasCreate");
      release_at_exit([handle = h->handle] { cublasDestroy(handle); });
      slot = std::move(h);
    }
    return *slot;
  }

  mutable std::mutex mutex_;
  mutable std::map<int, std::unique_ptr<Handle>> handles_;
};

}  // namespace

std::unique_ptr<dnn::GemmSolver> make_cublas_gemm_solver() { return std::make_unique<CublasGemmSolver>(); }

}  // namespace galley::backends::cuda
