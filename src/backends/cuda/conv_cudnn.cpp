// cuda.conv.cudnn: cuDNN 9's legacy convolution API, the vendor baseline every own solver is
// measured against. Algorithms are chosen as PyTorch does with cudnn.benchmark=True: cuDNN times
// every algorithm once per problem (cudnnFindConvolutionForwardAlgorithm) and the fastest that
// fits the workspace cap wins; the choice is cached per (device, problem key).
//
// Math: f32 uses CUDNN_FMA_MATH (no TF32, so comparisons with fp32 peers are fair); f16/bf16
// use tensor-op math with fp32 accumulation (compute type float).
#include <cudnn.h>

#include <map>
#include <memory>
#include <cstdio>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <string>

#include "backends/cuda/vendor_conv_solvers.hpp"
#include "backends/cuda/cudnn_handle.hpp"
#include "backends/gpu/problem_key.hpp"
#include "backends/cuda/runtime_check.hpp"
#include "backends/gpu/conv_params.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::cuda {
namespace {

using dnn::Applicability;
using dnn::ConvProblem;

constexpr std::size_t kWorkspaceCap = std::size_t(1) << 30;  // 1 GiB, about what frameworks allow

void check_cudnn(cudnnStatus_t status, const char* call) { check_cudnn_status(status, "cuda.conv.cudnn", call); }

const char* algo_name(cudnnConvolutionFwdAlgo_t algo) {
  switch (algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "UNKNOWN";
  }
}

const char* math_name(cudnnMathType_t math) {
  switch (math) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor-op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor-op+conversion";
    case CUDNN_FMA_MATH: return "fma";
    default: return "?";
  }
}

cudnnDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    default: throw Error(Status::unsupported, std::string("cuda.conv.cudnn: dtype ") + to_string(dtype));
  }
}

/// Descriptors and the chosen algorithm for one problem on one device. Immutable once built.
struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::size_t workspace = 0;
  float find_ms = 0;  // cuDNN's own timing of the winner
  int candidates = 0;  // 0 when the choice was stored (use_tuned_params), not found here

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

class CudnnSolver final : public dnn::ConvSolver {
 public:
  std::string_view name() const override { return "cuda.conv.cudnn"; }

  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    return cudnn_can_take(p, device);
  }

  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device) const override {
    return plan(p, device).workspace;
  }

  void run(runtime::Stream& stream, const ConvProblem& p, const dnn::ConvArgs& a) const override {
    const Plan& pl = plan(p, stream.device());
    if (a.workspace_bytes < pl.workspace)
      throw Error(Status::invalid_argument, "cuda.conv.cudnn: workspace of " + std::to_string(a.workspace_bytes) +
                                                " bytes, needs " + std::to_string(pl.workspace));
    CudnnHandle& h = handle(stream.device());
    stream.launch("cuda.conv.cudnn", [&] {
      DeviceGuard guard(stream.device().index());
      std::lock_guard lock(h.mutex);
      check_cudnn(h.set_stream(static_cast<cudaStream_t>(stream.native_handle()), stream.id()), "cudnnSetStream");
      const float alpha = 1.f, beta = 0.f;
      check_cudnn(cudnnConvolutionForward(h.handle, &alpha, pl.x, a.x, pl.w, a.w, pl.conv, pl.algo,
                                          pl.workspace ? a.workspace : nullptr, pl.workspace, &beta, pl.y, a.y),
                  "cudnnConvolutionForward");
    });
  }

  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const Plan& pl = plan(p, device);
    const std::string head = std::string("algo ") + algo_name(pl.algo) + ", " + math_name(pl.math) +
                             " math, workspace " + std::to_string(pl.workspace) + " B, ";
    if (pl.candidates == 0) return head + "the stored choice (find-db params), no cudnnFind in this process";
    return head + "fastest of " + std::to_string(pl.candidates) + " by cudnnFind (" + std::to_string(pl.find_ms) +
           " ms)";
  }

  // The inner choice is cudnnFind's winner, "algo<N>-math<M>" (cuDNN's enum values), so a new
  // process skips cudnnFind, which runs every algorithm and can cost many times the call it picks for.
  std::string tuned_params(const ConvProblem& p, const runtime::Device& device) const override {
    const Plan& pl = plan(p, device);
    return "algo" + std::to_string(int(pl.algo)) + "-math" + std::to_string(int(pl.math));
  }

  bool use_tuned_params(const ConvProblem& p, const runtime::Device& device, std::string_view params) const override {
    int algo = -1, math = -1;
    char tail = 0;
    if (std::sscanf(std::string(params).c_str(), "algo%d-math%d%c", &algo, &math, &tail) != 2) return false;
    if (algo < 0 || algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT || math < 0 || math > int(CUDNN_FMA_MATH)) return false;
    if (p.dtype == DType::f32 && math != int(CUDNN_FMA_MATH)) return false;  // never TF32 for f32
    const gpu::ProblemKey key{device.index(), p};
    {
      std::lock_guard lock(plans_mutex_);
      if (plans_.count(key) != 0) return true;  // this process chose already
    }
    try {
      auto pl = describe(p);
      pl->algo = static_cast<cudnnConvolutionFwdAlgo_t>(algo);
      pl->math = static_cast<cudnnMathType_t>(math);
      check_cudnn(cudnnSetConvolutionMathType(pl->conv, pl->math), "cudnnSetConvolutionMathType");
      CudnnHandle& hd = handle(device);
      DeviceGuard guard(device.index());
      // cuDNN answers the size only for an algorithm it supports on these descriptors.
      if (cudnnGetConvolutionForwardWorkspaceSize(hd.handle, pl->x, pl->w, pl->conv, pl->y, pl->algo,
                                                  &pl->workspace) != CUDNN_STATUS_SUCCESS ||
          pl->workspace > kWorkspaceCap)
        return false;
      std::lock_guard lock(plans_mutex_);
      plans_.emplace(key, std::move(pl));
      return true;
    } catch (const Error&) {
      return false;
    }
  }

 private:
  CudnnHandle& handle(const runtime::Device& device) const { return cudnn_handle(device); }

  const Plan& plan(const ConvProblem& p, const runtime::Device& device) const {
    const gpu::ProblemKey key{device.index(), p};
    {
      std::lock_guard lock(plans_mutex_);
      auto it = plans_.find(key);
      if (it != plans_.end()) return *it->second;
    }
    auto pl = build_plan(p, device);
    std::lock_guard lock(plans_mutex_);
    auto [it, inserted] = plans_.emplace(key, std::move(pl));
    return *it->second;
  }

  /// The descriptors of `p`, with the math type f32 must keep (FMA) or tensor ops for f16/bf16.
  static std::unique_ptr<Plan> describe(const ConvProblem& p) {
    const gpu::ConvParams cp = gpu::make_params(p);
    auto pl = std::make_unique<Plan>();
    const cudnnDataType_t dt = data_type(cp.dtype);
    const cudnnTensorFormat_t fmt = cp.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    check_cudnn(cudnnCreateTensorDescriptor(&pl->x), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateTensorDescriptor(&pl->y), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateFilterDescriptor(&pl->w), "cudnnCreateFilterDescriptor");
    check_cudnn(cudnnCreateConvolutionDescriptor(&pl->conv), "cudnnCreateConvolutionDescriptor");
    check_cudnn(cudnnSetTensor4dDescriptor(pl->x, fmt, dt, cp.n, cp.c, cp.h, cp.w), "cudnnSetTensor4dDescriptor(x)");
    check_cudnn(cudnnSetTensor4dDescriptor(pl->y, fmt, dt, cp.n, cp.k, cp.p, cp.q), "cudnnSetTensor4dDescriptor(y)");
    check_cudnn(cudnnSetFilter4dDescriptor(pl->w, dt, fmt, cp.k, cp.cg, cp.r, cp.s), "cudnnSetFilter4dDescriptor");
    check_cudnn(cudnnSetConvolution2dDescriptor(pl->conv, cp.pad_h, cp.pad_w, cp.stride_h, cp.stride_w, cp.dil_h,
                                                cp.dil_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                "cudnnSetConvolution2dDescriptor");
    check_cudnn(cudnnSetConvolutionGroupCount(pl->conv, cp.groups), "cudnnSetConvolutionGroupCount");
    const cudnnMathType_t wanted = cp.dtype == DType::f32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    check_cudnn(cudnnSetConvolutionMathType(pl->conv, wanted), "cudnnSetConvolutionMathType");
    int n = 0, c = 0, h = 0, w = 0;
    check_cudnn(cudnnGetConvolution2dForwardOutputDim(pl->conv, pl->x, pl->w, &n, &c, &h, &w),
                "cudnnGetConvolution2dForwardOutputDim");
    if (n != cp.n || c != cp.k || h != cp.p || w != cp.q)
      throw Error(Status::internal, "cuda.conv.cudnn: cuDNN's output size disagrees with the problem's for " + p.key());
    return pl;
  }

  std::unique_ptr<Plan> build_plan(const ConvProblem& p, const runtime::Device& device) const {
    const gpu::ConvParams cp = gpu::make_params(p);
    auto pl = describe(p);

    CudnnHandle& hd = handle(device);
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    {
      DeviceGuard guard(device.index());
      std::lock_guard lock(hd.mutex);
      // Find runs on the handle's stream and blocks; reset to the default stream first.
      check_cudnn(hd.set_stream(nullptr), "cudnnSetStream");
      check_cudnn(cudnnFindConvolutionForwardAlgorithm(hd.handle, pl->x, pl->w, pl->conv, pl->y,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
                  "cudnnFindConvolutionForwardAlgorithm");
    }
    for (int i = 0; i < returned; ++i) {  // sorted by time, fastest first
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kWorkspaceCap) continue;
      // f32 must stay on FMA math even if cuDNN offers a tensor-op (TF32) variant.
      if (cp.dtype == DType::f32 && perf[i].mathType != CUDNN_FMA_MATH && perf[i].mathType != CUDNN_DEFAULT_MATH)
        continue;
      ++pl->candidates;
      if (pl->candidates == 1) {
        pl->algo = perf[i].algo;
        pl->math = cp.dtype == DType::f32 ? CUDNN_FMA_MATH : perf[i].mathType;
        pl->workspace = perf[i].memory;
        pl->find_ms = perf[i].time;
      }
    }
    if (pl->candidates == 0)
      throw Error(Status::unsupported, "cuda.conv.cudnn: no cuDNN algorithm supports " + p.key());
    check_cudnn(cudnnSetConvolutionMathType(pl->conv, pl->math), "cudnnSetConvolutionMathType");
    // The size cuDNN reports for the chosen algorithm with the final math type is the contract.
    std::size_t ws = 0;
    check_cudnn(cudnnGetConvolutionForwardWorkspaceSize(hd.handle, pl->x, pl->w, pl->conv, pl->y, pl->algo, &ws),
                "cudnnGetConvolutionForwardWorkspaceSize");
    pl->workspace = std::max(pl->workspace, ws);
    return pl;
  }

  mutable std::mutex plans_mutex_;
  mutable std::unordered_map<gpu::ProblemKey, std::unique_ptr<Plan>, gpu::ProblemKeyHash> plans_;  // see problem_key.hpp
};

}  // namespace

std::unique_ptr<dnn::ConvSolver> make_cudnn_conv_solver() { return std::make_unique<CudnnSolver>(); }

}  // namespace galley::backends::cuda
