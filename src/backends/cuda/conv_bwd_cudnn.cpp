// cuda.conv.cudnn_bwd_data and cuda.conv.cudnn_bwd_weights: cuDNN 9's legacy backward convolutions
// (cudnnConvolutionBackwardData / cudnnConvolutionBackwardFilter), the vendor baselines of the
// backward directions. The algorithm is cuDNN's own heuristic pick (cudnnGet...Algorithm_v7): it
// runs nothing on the device and allocates nothing, so building a plan stays cheap and the tuner,
// which owns all timing, measures the solver as a whole. Math as cuda.conv.cudnn: FMA for f32 (no
// TF32), tensor ops with fp32 accumulation for f16/bf16. Tensors: dnn/conv_backward_args.hpp.
#include <cudnn.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "backends/cuda/vendor_dtypes.hpp"
#include "backends/cuda/vendor_conv_solvers.hpp"
#include "backends/cuda/cudnn_handle.hpp"
#include "backends/cuda/runtime_check.hpp"
#include "dnn/conv_backward_args.hpp"
#include "backends/gpu/conv_params.hpp"
#include "backends/gpu/problem_key.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::cuda {
namespace {

using dnn::Applicability;
using dnn::ConvDirection;
using dnn::ConvProblem;

constexpr std::size_t kWorkspaceCap = std::size_t(1) << 30;  // 1 GiB, as cuda.conv.cudnn

/// Descriptors and the chosen algorithm (a cudnnConvolutionBwdDataAlgo_t or BwdFilterAlgo_t) for
/// one problem on one device. Immutable once built.
struct BwdPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::size_t workspace = 0;
  int candidates = 0;  // usable algorithms the heuristic offered

  BwdPlan() = default;
  BwdPlan(const BwdPlan&) = delete;
  BwdPlan& operator=(const BwdPlan&) = delete;
  ~BwdPlan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

class CudnnBwdSolver final : public dnn::ConvSolver {
 public:
  explicit CudnnBwdSolver(ConvDirection direction)
      : direction_(direction),
        name_(direction == ConvDirection::backward_data ? "cuda.conv.cudnn_bwd_data"
                                                        : "cuda.conv.cudnn_bwd_weights") {}

  std::string_view name() const override { return name_; }

  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (device.backend() != "cuda") return Applicability::no("runs on cuda devices, not " + device.name());
    if (p.direction != direction_)
      return Applicability::no(std::string(dnn::to_string(direction_)) + " only, not " +
                               dnn::to_string(p.direction));
    if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
      return Applicability::no(std::string("dtype ") + to_string(p.dtype) + " (needs f32, f16 or bf16)");
    try {
      const gpu::ConvParams cp = gpu::make_params(p);
      if (auto why = gpu::too_large_for_int32(cp); !why.empty()) return Applicability::no(why);
    } catch (const Error& e) {
      return Applicability::no(e.what());
    }
    return Applicability::yes();
  }

  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device) const override {
    return plan(p, device).workspace;
  }

  void run(runtime::Stream& stream, const ConvProblem& p, const dnn::ConvArgs& a) const override {
    const BwdPlan& pl = plan(p, stream.device());
    if (a.workspace_bytes < pl.workspace)
      throw Error(Status::invalid_argument, name_ + ": workspace of " + std::to_string(a.workspace_bytes) +
                                                " bytes, needs " + std::to_string(pl.workspace));
    CudnnHandle& h = cudnn_handle(stream.device());
    void* ws = pl.workspace ? a.workspace : nullptr;
    stream.launch(name_, [&] {
      DeviceGuard guard(stream.device().index());
      std::lock_guard lock(h.mutex);
      check(h.set_stream(static_cast<cudaStream_t>(stream.native_handle()), stream.id()), "cudnnSetStream");
      const float alpha = 1.f, beta = 0.f;
      if (direction_ == ConvDirection::backward_data) {
        const dnn::BackwardDataArgs t = dnn::backward_data_args(a);
        check(cudnnConvolutionBackwardData(h.handle, &alpha, pl.w, t.w, pl.y, t.dy, pl.conv,
                                           static_cast<cudnnConvolutionBwdDataAlgo_t>(pl.algo), ws,
                                           pl.workspace, &beta, pl.x, t.dx),
              "cudnnConvolutionBackwardData");
      } else {
        const dnn::BackwardWeightsArgs t = dnn::backward_weights_args(a);
        check(cudnnConvolutionBackwardFilter(h.handle, &alpha, pl.x, t.x, pl.y, t.dy, pl.conv,
                                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(pl.algo), ws,
                                             pl.workspace, &beta, pl.w, t.dw),
              "cudnnConvolutionBackwardFilter");
      }
    });
  }

  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const BwdPlan& pl = plan(p, device);
    return "algo " + std::to_string(pl.algo) + (pl.math == CUDNN_FMA_MATH ? ", fma" : ", tensor-op") +
           " math, workspace " + std::to_string(pl.workspace) + " B, first usable of " +
           std::to_string(pl.candidates) + " by cuDNN's heuristic";
  }

 private:
  void check(cudnnStatus_t status, const char* call) const { check_cudnn_status(status, name_, call); }

  const BwdPlan& plan(const ConvProblem& p, const runtime::Device& device) const {
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

  std::unique_ptr<BwdPlan> describe(const ConvProblem& p) const {
    const gpu::ConvParams cp = gpu::make_params(p);
    auto pl = std::make_unique<BwdPlan>();
    const cudnnDataType_t dt = cudnn_data_type(cp.dtype, name_);
    const cudnnTensorFormat_t fmt = cp.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    check(cudnnCreateTensorDescriptor(&pl->x), "cudnnCreateTensorDescriptor");
    check(cudnnCreateTensorDescriptor(&pl->y), "cudnnCreateTensorDescriptor");
    check(cudnnCreateFilterDescriptor(&pl->w), "cudnnCreateFilterDescriptor");
    check(cudnnCreateConvolutionDescriptor(&pl->conv), "cudnnCreateConvolutionDescriptor");
    check(cudnnSetTensor4dDescriptor(pl->x, fmt, dt, cp.n, cp.c, cp.h, cp.w),
          "cudnnSetTensor4dDescriptor(x)");
    check(cudnnSetTensor4dDescriptor(pl->y, fmt, dt, cp.n, cp.k, cp.p, cp.q),
          "cudnnSetTensor4dDescriptor(dy)");
    check(cudnnSetFilter4dDescriptor(pl->w, dt, fmt, cp.k, cp.cg, cp.r, cp.s), "cudnnSetFilter4dDescriptor");
    check(cudnnSetConvolution2dDescriptor(pl->conv, cp.pad_h, cp.pad_w, cp.stride_h, cp.stride_w, cp.dil_h,
                                          cp.dil_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "cudnnSetConvolution2dDescriptor");
    check(cudnnSetConvolutionGroupCount(pl->conv, cp.groups), "cudnnSetConvolutionGroupCount");
    pl->math = cp.dtype == DType::f32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    check(cudnnSetConvolutionMathType(pl->conv, pl->math), "cudnnSetConvolutionMathType");
    int n = 0, c = 0, h = 0, w = 0;
    check(cudnnGetConvolution2dForwardOutputDim(pl->conv, pl->x, pl->w, &n, &c, &h, &w),
          "cudnnGetConvolution2dForwardOutputDim");
    if (n != cp.n || c != cp.k || h != cp.p || w != cp.q)
      throw Error(Status::internal,
                  name_ + ": cuDNN's output size disagrees with the problem's for " + p.key());
    return pl;
  }

  // The first algorithm of the heuristic's ranking that succeeds, fits the cap and keeps f32 off
  // TF32; then the size cuDNN reports for it with the final math type is the workspace contract.
  template <typename Perf>
  void choose(BwdPlan& pl, const Perf* perf, int returned, DType dtype, const ConvProblem& p) const {
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kWorkspaceCap) continue;
      if (dtype == DType::f32 && perf[i].mathType != CUDNN_FMA_MATH && perf[i].mathType != CUDNN_DEFAULT_MATH)
        continue;
      if (++pl.candidates == 1) {
        pl.algo = int(perf[i].algo);
        pl.math = dtype == DType::f32 ? CUDNN_FMA_MATH : perf[i].mathType;
        pl.workspace = perf[i].memory;
      }
    }
    if (pl.candidates == 0)
      throw Error(Status::unsupported, name_ + ": no cuDNN algorithm supports " + p.key());
  }

  std::unique_ptr<BwdPlan> build_plan(const ConvProblem& p, const runtime::Device& device) const {
    auto pl = describe(p);
    CudnnHandle& hd = cudnn_handle(device);
    DeviceGuard guard(device.index());
    std::lock_guard lock(hd.mutex);
    std::size_t ws = 0;
    if (direction_ == ConvDirection::backward_data) {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      int returned = 0;
      check(
          cudnnGetConvolutionBackwardDataAlgorithm_v7(hd.handle, pl->w, pl->y, pl->conv, pl->x,
                                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf),
          "cudnnGetConvolutionBackwardDataAlgorithm_v7");
      choose(*pl, perf, returned, p.dtype, p);
      check(cudnnSetConvolutionMathType(pl->conv, pl->math), "cudnnSetConvolutionMathType");
      check(cudnnGetConvolutionBackwardDataWorkspaceSize(hd.handle, pl->w, pl->y, pl->conv, pl->x,
                                                         static_cast<cudnnConvolutionBwdDataAlgo_t>(pl->algo),
                                                         &ws),
            "cudnnGetConvolutionBackwardDataWorkspaceSize");
    } else {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      int returned = 0;
      check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(hd.handle, pl->x, pl->y, pl->conv, pl->w,
                                                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned,
                                                          perf),
            "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
      choose(*pl, perf, returned, p.dtype, p);
      check(cudnnSetConvolutionMathType(pl->conv, pl->math), "cudnnSetConvolutionMathType");
      check(cudnnGetConvolutionBackwardFilterWorkspaceSize(
                hd.handle, pl->x, pl->y, pl->conv, pl->w,
                static_cast<cudnnConvolutionBwdFilterAlgo_t>(pl->algo), &ws),
            "cudnnGetConvolutionBackwardFilterWorkspaceSize");
    }
    pl->workspace = std::max(pl->workspace, ws);
    return pl;
  }

  ConvDirection direction_;
  std::string name_;
  mutable std::mutex plans_mutex_;
  mutable std::unordered_map<gpu::ProblemKey, std::unique_ptr<BwdPlan>, gpu::ProblemKeyHash> plans_;
};

}  // namespace

std::unique_ptr<dnn::ConvSolver> make_cudnn_bwd_data_conv_solver() {
  return std::make_unique<CudnnBwdSolver>(ConvDirection::backward_data);
}
std::unique_ptr<dnn::ConvSolver> make_cudnn_bwd_weights_conv_solver() {
  return std::make_unique<CudnnBwdSolver>(ConvDirection::backward_weights);
}

}  // namespace galley::backends::cuda
