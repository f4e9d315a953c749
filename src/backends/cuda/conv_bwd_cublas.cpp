// cuda.conv.cublas_bwd_data and cuda.conv.cublas_bwd_weights: the backward convolutions as cuBLAS
// matrix products around the column matrix of gpu/conv_im2col.cu (groups == 1), the GEMM baselines
// of the backward directions. cuBLAS is column-major, so each row-major product below is issued as
// its transpose. Compute is fp32 (CUBLAS_COMPUTE_32F: FMA for f32, no TF32; tensor cores for
// f16/bf16), and every sum that spans several cuBLAS calls or passes stays in fp32 until the end.
//   backward-data:    col = w^T * dy in fp32 (nhwc: col[npq][rsc] = dy[npq][k] * w[k][rsc]; nchw: per
//                     image col_n[crs][pq] = w[k][crs]^T * dy_n[k][pq]), then col2im folds col into dx.
//   backward-weights: im2col(x), then dw[k][crs] = dy^T * col (nhwc: one GEMM over all n*p*q pixels;
//                     nchw: one GEMM per image, accumulated), through an fp32 buffer for f16/bf16.
// Workspace: the column matrix (fp32 for backward-data, the dtype for backward-weights) and, for
// f16/bf16 backward-weights, the fp32 dw. Tensors: dnn/conv_backward_args.hpp.
#include <cublas_v2.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backends/cuda/vendor_dtypes.hpp"
#include "backends/cuda/vendor_conv_solvers.hpp"
#include "backends/cuda/vendor_exit.hpp"
#include "backends/cuda/runtime_check.hpp"
#include "dnn/conv_backward_args.hpp"
#include "backends/gpu/conv_bwd_kernels.hpp"
#include "backends/gpu/conv_params.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::cuda {
namespace {

using dnn::Applicability;
using dnn::ConvDirection;
using dnn::ConvProblem;

constexpr std::size_t kMaxWorkspace = std::size_t(4) << 30;  // as cuda.conv.cublas_gemm

/// Where the pieces sit in the workspace.
struct Layout {
  std::size_t col_bytes = 0;  // the column matrix
  std::size_t acc_bytes = 0;  // fp32 dw (backward-weights, f16/bf16)
  std::size_t total() const { return col_bytes + acc_bytes; }
};

Layout workspace_layout(const gpu::ConvParams& p, ConvDirection direction) {
  const std::size_t cells = std::size_t(p.pixels()) * std::size_t(p.kred());
  Layout l;
  if (direction == ConvDirection::backward_data) {
    l.col_bytes = cells * sizeof(float);
  } else {
    // Rounded up so the fp32 buffer after it starts aligned (a half column matrix can end on any
    // 2-byte boundary).
    l.col_bytes = (cells * size_of(p.dtype) + 255) / 256 * 256;
    if (p.dtype != DType::f32) l.acc_bytes = std::size_t(p.w_elems()) * sizeof(float);
  }
  return l;
}

class CublasBwdSolver final : public dnn::ConvSolver {
 public:
  explicit CublasBwdSolver(ConvDirection direction)
      : direction_(direction),
        name_(direction == ConvDirection::backward_data ? "cuda.conv.cublas_bwd_data"
                                                        : "cuda.conv.cublas_bwd_weights") {}

  std::string_view name() const override { return name_; }

  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (device.backend() != "cuda") return Applicability::no("runs on cuda devices, not " + device.name());
    if (p.direction != direction_)
      return Applicability::no(std::string(dnn::to_string(direction_)) + " only, not " +
                               dnn::to_string(p.direction));
    if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
      return Applicability::no(std::string("dtype ") + to_string(p.dtype) + " (needs f32, f16 or bf16)");
    if (p.groups != 1) return Applicability::no("groups " + std::to_string(p.groups) + " (needs 1)");
    try {
      const gpu::ConvParams cp = gpu::make_params(p);
      if (auto why = gpu::too_large_for_int32(cp); !why.empty()) return Applicability::no(why);
      if (cp.kred() * std::int64_t(cp.pixels()) > std::int64_t(1) << 31)
        return Applicability::no("column matrix exceeds 2^31 elements");
      const std::size_t bytes = workspace_layout(cp, direction_).total();
      if (bytes > kMaxWorkspace)
        return Applicability::no("workspace of " + std::to_string(bytes) + " bytes exceeds 4 GiB");
    } catch (const Error& e) {
      return Applicability::no(e.what());
    }
    return Applicability::yes();
  }

  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device&) const override {
    return workspace_layout(gpu::make_params(p), direction_).total();
  }

  void run(runtime::Stream& stream, const ConvProblem& p, const dnn::ConvArgs& a) const override {
    const gpu::ConvParams cp = gpu::make_params(p);
    const Layout layout = workspace_layout(cp, direction_);
    if (a.workspace_bytes < layout.total())
      throw Error(Status::invalid_argument, name_ + ": workspace of " + std::to_string(a.workspace_bytes) +
                                                " bytes, needs " + std::to_string(layout.total()));
    Handle& h = handle(stream.device());
    stream.launch(name_, [&] {
      DeviceGuard guard(stream.device().index());
      const auto s = static_cast<cudaStream_t>(stream.native_handle());
      std::lock_guard lock(h.mutex);
      check(cublasSetStream(h.handle, s), "cublasSetStream");
      char* ws = static_cast<char*>(a.workspace);
      if (direction_ == ConvDirection::backward_data)
        backward_data(h.handle, cp, dnn::backward_data_args(a), reinterpret_cast<float*>(ws), s);
      else
        backward_weights(h.handle, cp, dnn::backward_weights_args(a), ws,
                         layout.acc_bytes ? reinterpret_cast<float*>(ws + layout.col_bytes) : nullptr, s);
    });
  }

  std::string detail(const ConvProblem& p, const runtime::Device&) const override {
    const gpu::ConvParams cp = gpu::make_params(p);
    const std::string gemm = cp.nhwc ? "cublasGemmEx"
                             : direction_ == ConvDirection::backward_data
                                 ? "cublasGemmStridedBatchedEx over the batch"
                                 : "cublasGemmEx per image";
    return direction_ == ConvDirection::backward_data ? gemm + " into an fp32 column matrix + col2im"
                                                      : "im2col + " + gemm + ", fp32 compute";
  }

 private:
  struct Handle {
    std::mutex mutex;
    cublasHandle_t handle = nullptr;  // destroyed at exit (vendor_exit.hpp)
  };

  void check(cublasStatus_t status, const char* call) const {
    if (status != CUBLAS_STATUS_SUCCESS)
      throw Error(Status::backend_error, name_ + ": " + call + ": " + cublasGetStatusName(status) + " (" +
                                             cublasGetStatusString(status) + ")");
  }

  void backward_data(cublasHandle_t h, const gpu::ConvParams& cp, const dnn::BackwardDataArgs& t, float* col,
                     cudaStream_t s) const {
    const cudaDataType_t dt = cuda_data_type(cp.dtype, "cuBLAS backward");
    const float alpha = 1.f, beta = 0.f;
    const int kred = int(cp.kred());
    if (cp.nhwc) {
      // col-major: col (kred x npq, ld kred) = w (kred x k, ld kred) * dy (k x npq, ld k)
      check(
          cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, kred, int(cp.pixels()), cp.k, &alpha, t.w, dt, kred, t.dy,
                       dt, cp.k, &beta, col, CUDA_R_32F, kred, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
    } else {
      // col-major per image: col_n (pq x kred, ld pq) = dy_n (pq x k, ld pq) * w^T (k x kred; w is kred x k,
      // ld kred)
      const int pq = cp.p * cp.q;
      check(
          cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_T, pq, kred, cp.k, &alpha, t.dy, dt, pq,
                                     std::int64_t(cp.k) * pq, t.w, dt, kred, 0, &beta, col, CUDA_R_32F, pq,
                                     std::int64_t(kred) * pq, cp.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
    }
    gpu::launch_bwd_col2im(cp, col, t.dx, s);
  }

  void backward_weights(cublasHandle_t h, const gpu::ConvParams& cp, const dnn::BackwardWeightsArgs& t,
                        void* col, float* acc, cudaStream_t s) const {
    const cudaDataType_t dt = cuda_data_type(cp.dtype, "cuBLAS backward");
    gpu::launch_im2col(cp, t.x, col, s);
    // f16/bf16 sum into the fp32 buffer, converted once at the end; f32 straight into dw.
    void* out = acc != nullptr ? static_cast<void*>(acc) : t.dw;
    const cudaDataType_t out_type = acc != nullptr ? CUDA_R_32F : dt;
    const float alpha = 1.f, zero = 0.f, one = 1.f;
    const int kred = int(cp.kred());
    if (cp.nhwc) {
      // col-major: dw (kred x k, ld kred) = col (kred x npq, ld kred) * dy^T (npq x k; dy is k x npq, ld k)
      check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, kred, cp.k, int(cp.pixels()), &alpha, col, dt, kred,
                         t.dy, dt, cp.k, &zero, out, out_type, kred, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
    } else {
      // col-major per image: dw (kred x k, ld kred) += col_n^T (kred x pq; col_n is pq x kred, ld pq) *
      // dy_n (pq x k, ld pq)
      const int pq = cp.p * cp.q;
      for (int n = 0; n < cp.n; ++n) {
        const char* col_n = static_cast<const char*>(col) + std::size_t(n) * kred * pq * size_of(cp.dtype);
        const char* dy_n = static_cast<const char*>(t.dy) + std::size_t(n) * cp.k * pq * size_of(cp.dtype);
        check(
            cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, kred, cp.k, pq, &alpha, col_n, dt, pq, dy_n, dt, pq,
                         n == 0 ? &zero : &one, out, out_type, kred, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
      }
    }
    if (acc != nullptr) gpu::launch_bwd_splitk_sum(cp.dtype, cp.w_elems(), 1, acc, t.dw, s);
  }

  Handle& handle(const runtime::Device& device) const {
    std::lock_guard lock(mutex_);
    auto& slot = handles_[device.index()];
    if (!slot) {
      auto h = std::make_unique<Handle>();
      DeviceGuard guard(device.index());
      check(cublasCreate(&h->handle), "cublasCreate");
      release_at_exit([handle = h->handle] { cublasDestroy(handle); });
      slot = std::move(h);
    }
    return *slot;
  }

  ConvDirection direction_;
  std::string name_;
  mutable std::mutex mutex_;
  mutable std::map<int, std::unique_ptr<Handle>> handles_;
};

}  // namespace

std::unique_ptr<dnn::ConvSolver> make_cublas_bwd_data_conv_solver() {
  return std::make_unique<CublasBwdSolver>(ConvDirection::backward_data);
}
std::unique_ptr<dnn::ConvSolver> make_cublas_bwd_weights_conv_solver() {
  return std::make_unique<CublasBwdSolver>(ConvDirection::backward_weights);
}

}  // namespace galley::backends::cuda
