// cuda.conv.cublas_gemm: convolution as cuBLAS matrix products (groups == 1).
//   1x1, stride 1, no padding: the input already is the GEMM operand, no workspace.
//     nchw: per image y_n[k][hw] = w[k][c] * x_n[c][hw]  (one strided-batched GEMM over n)
//     nhwc: y[nhw][k] = x[nhw][c] * w[k][c]^T           (one GEMM)
//   anything else: im2col into the workspace (gpu/conv_im2col.cu), then the same GEMMs with
//   c*r*s in place of c.
// cuBLAS is column-major, so each row-major product above is issued as its transpose.
// Compute is fp32 everywhere (CUBLAS_COMPUTE_32F: FMA for f32, no TF32; tensor cores for f16/bf16).
// A call (im2col and GEMM) is replayed as a CUDA graph from its pointer set's third call on, as
// cuda.conv.cudnn_graph's are (graph_replay.hpp): cuBLAS's host work per call is as long as the
// kernels of small 1x1 layers.
#include <cublas_v2.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/cuda/vendor_dtypes.hpp"
#include "backends/cuda/vendor_conv_solvers.hpp"
#include "backends/cuda/vendor_exit.hpp"
#include "backends/cuda/graph_replay.hpp"
#include "backends/cuda/runtime_check.hpp"
#include "backends/cuda/stream_identity.hpp"
#include "backends/gpu/conv_params.hpp"
#include "backends/gpu/recent_cache.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::cuda {
namespace {

using dnn::Applicability;
using dnn::ConvProblem;

// im2col buffers beyond this are refused: the GEMM would not be worth that much memory traffic.
constexpr std::size_t kMaxWorkspace = std::size_t(4) << 30;

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(Status::backend_error, std::string("cuda.conv.cublas_gemm: ") + call + ": " +
                                           cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
}

bool is_plain_1x1(const gpu::ConvParams& p) {
  return p.r == 1 && p.s == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0;
}

std::size_t col_bytes(const gpu::ConvParams& p) {
  return is_plain_1x1(p) ? 0 : std::size_t(p.pixels()) * std::size_t(p.kred()) * size_of(p.dtype);
}

struct Handle {
  std::mutex mutex;
  cublasHandle_t handle = nullptr;  // destroyed at exit (vendor_exit.hpp)
  StreamIdentity stream;            // what the handle was last set to
  // Per problem, the replay state of its recent pointer sets. `mutex` held.
  std::unordered_map<dnn::ConvProblem, gpu::RecentCache<CallPointers, GraphReplay>, dnn::ConvProblemHash> replays;

  /// The replay state of `p`'s calls on `pointers`, made on first use. `mutex` held.
  GraphReplay& replay(const ConvProblem& p, const CallPointers& pointers) {
    auto& recent = replays.try_emplace(p, kPointerSetsKept).first->second;
    if (GraphReplay* known = recent.find(pointers)) return *known;
    return recent.insert(pointers, GraphReplay{});
  }

  /// cublasSetStream, only when the stream changed: it also resets cuBLAS's workspace to its default
  /// pool, work a network's calls on one stream need not repeat per layer. `mutex` held.
  void set_stream(cudaStream_t s, std::uint64_t galley_id) {
    if (stream.same_as(s, galley_id)) return;
    if (const cublasStatus_t st = cublasSetStream(handle, s); st != CUBLAS_STATUS_SUCCESS) {
      stream.forget();
      check_cublas(st, "cublasSetStream");
    }
  }
};

class CublasGemmSolver final : public dnn::ConvSolver {
 public:
  std::string_view name() const override { return kName; }

  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (device.backend() != "cuda") return Applicability::no("runs on cuda devices, not " + device.name());
    if (p.direction != dnn::ConvDirection::forward) return Applicability::no("forward only");
    if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
      return Applicability::no(std::string("dtype ") + to_string(p.dtype) + " (needs f32, f16 or bf16)");
    if (p.groups != 1) return Applicability::no("groups " + std::to_string(p.groups) + " (needs 1)");
    try {
      const gpu::ConvParams cp = gpu::make_params(p);
      if (auto why = gpu::too_large_for_int32(cp); !why.empty()) return Applicability::no(why);
      if (cp.kred() * std::int64_t(cp.pixels()) > std::int64_t(1) << 31)
        return Applicability::no("im2col matrix exceeds 2^31 elements");
      if (col_bytes(cp) > kMaxWorkspace)
        return Applicability::no("im2col workspace of " + std::to_string(col_bytes(cp)) + " bytes exceeds 4 GiB");
    } catch (const Error& e) {
      return Applicability::no(e.what());
    }
    return Applicability::yes();
  }

  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device&) const override {
    return col_bytes(gpu::make_params(p));
  }

  void run(runtime::Stream& stream, const ConvProblem& p, const dnn::ConvArgs& a) const override {
    const gpu::ConvParams cp = gpu::make_params(p);
    const std::size_t need = col_bytes(cp);
    if (a.workspace_bytes < need)
      throw Error(Status::invalid_argument, "cuda.conv.cublas_gemm: workspace of " + std::to_string(a.workspace_bytes) +
                                                " bytes, needs " + std::to_string(need));
    Handle& h = handle(stream.device());
    stream.launch(kName, [&] {
      DeviceGuard guard(stream.device().index());
      const auto s = static_cast<cudaStream_t>(stream.native_handle());
      std::lock_guard lock(h.mutex);
      h.set_stream(s, stream.id());
      void* ws = need > 0 ? a.workspace : nullptr;
      h.replay(p, CallPointers{a.x, a.w, a.y, ws}).run(s, kName, [&] { enqueue(h, cp, a.x, a.w, a.y, ws, s); });
    });
  }

  std::string detail(const ConvProblem& p, const runtime::Device&) const override {
    const gpu::ConvParams cp = gpu::make_params(p);
    std::string s = is_plain_1x1(cp) ? "1x1 as GEMM, " : "im2col (" + std::to_string(col_bytes(cp)) + " B) + ";
    s += cp.nhwc ? "cublasGemmEx" : "cublasGemmStridedBatchedEx over the batch";
    return s + ", fp32 compute";
  }

  ~CublasGemmSolver() override {
    // Graphs may hold device code of a context that is gone at process exit: leak them.
    for (auto& [index, h] : handles_)
      for (auto& [problem, recent] : h->replays) recent.for_each_value([](GraphReplay& r) { r.release(); });
  }

 private:
  static constexpr const char* kName = "cuda.conv.cublas_gemm";

  /// im2col (when the filter is not a plain 1x1) and the GEMM on `s`; `h.mutex` held.
  static void enqueue(Handle& h, const gpu::ConvParams& cp, const void* x, const void* w, void* y, void* ws,
                      cudaStream_t s) {
    const void* b = x;  // the GEMM's activation operand
    if (ws != nullptr) {
      gpu::launch_im2col(cp, x, ws, s);
      b = ws;
    }
    const cudaDataType_t dt = cuda_data_type(cp.dtype, "cuda.conv.cublas_gemm");
    const float alpha = 1.f, beta = 0.f;
    const int kred = int(cp.kred());
    if (cp.nhwc) {
      // col-major: Y^T (k x npq) = W^T... : C[k][npq] = op(A)=W (k x kred, stored kred-major) * B (kred x npq)
      check_cublas(cublasGemmEx(h.handle, CUBLAS_OP_T, CUBLAS_OP_N, cp.k, int(cp.pixels()), kred, &alpha, w, dt, kred,
                                b, dt, kred, &beta, y, dt, cp.k, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx");
    } else {
      // col-major per image: C (pq x k, ld pq) = A (pq x kred, ld pq) * B (kred x k, ld kred)
      const int pq = cp.p * cp.q;
      check_cublas(cublasGemmStridedBatchedEx(h.handle, CUBLAS_OP_N, CUBLAS_OP_N, pq, cp.k, kred, &alpha, b, dt, pq,
                                              std::int64_t(kred) * pq, w, dt, kred, 0, &beta, y, dt, pq,
                                              std::int64_t(cp.k) * pq, cp.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx");
    }
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

std::unique_ptr<dnn::ConvSolver> make_cublas_gemm_conv_solver() { return std::make_unique<CublasGemmSolver>(); }

}  // namespace galley::backends::cuda
