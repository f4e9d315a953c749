// cuda.conv.cudnn: cuDNN 9's legacy convolution API, the vendor baseline every own solver is
// measured against. Its inner choice is a cuDNN algorithm with a math type ("algo<N>-math<M>",
// cuDNN's enum values): the candidates are the first kMaxAlgos usable ones of cuDNN's own ranking
// (cudnnGetConvolutionForwardAlgorithm_v7, which runs nothing), and the tuner times them beside
// every other solver, as it does any TunableSolver. The solver never times anything itself: with
// cudnnFind it ran every algorithm of every problem once more, a dilated problem's slow GEMM and FFT
// algorithms for over half a second, where cuDNN's ranking puts the winner among its first few. A
// stored choice of any algorithm cuDNN supports for the problem is valid (valid() asks cuDNN), so
// the find-db rows written when cudnnFind chose inside the solver, in the same text, keep working.
//
// Math: f32 uses CUDNN_FMA_MATH (no TF32, so comparisons with fp32 peers are fair); f16/bf16
// use tensor-op math with fp32 accumulation (compute type float).
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <vector>
#include <memory>
#include <cstdio>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <string>

#include "backends/cuda/vendor_dtypes.hpp"
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

/// One cuDNN algorithm with the math type it runs in: the solver's inner choice.
struct CudnnAlgo {
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;

  bool operator==(const CudnnAlgo&) const = default;
  std::string to_string() const { return "algo" + std::to_string(int(algo)) + "-math" + std::to_string(int(math)); }
  static std::optional<CudnnAlgo> parse(std::string_view text) {
    int algo = -1, math = -1;
    char tail = 0;
    if (std::sscanf(std::string(text).c_str(), "algo%d-math%d%c", &algo, &math, &tail) != 2) return std::nullopt;
    if (algo < 0 || algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT || math < 0 || math > int(CUDNN_FMA_MATH))
      return std::nullopt;
    return CudnnAlgo{static_cast<cudnnConvolutionFwdAlgo_t>(algo), static_cast<cudnnMathType_t>(math)};
  }
};

// cuDNN's ranking puts the fastest algorithm among its first few; the tuner times these.
constexpr int kMaxAlgos = 4;
constexpr int kMathTypes = int(CUDNN_FMA_MATH) + 1;

/// A convolution's geometry, from which a descriptor of each math type is made.
struct ConvSettings {
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1, groups = 1;
};

cudnnStatus_t set_convolution(const ConvSettings& c, cudnnMathType_t math, cudnnConvolutionDescriptor_t conv) {
  cudnnStatus_t st = cudnnSetConvolution2dDescriptor(conv, c.pad_h, c.pad_w, c.stride_h, c.stride_w, c.dil_h,
                                                     c.dil_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnSetConvolutionGroupCount(conv, c.groups);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnSetConvolutionMathType(conv, math);
  return st;
}

/// One problem's descriptors on one device (a convolution descriptor per math type, made on first
/// use), cuDNN's ranked candidates and the workspace of each choice asked about. Descriptors are
/// never changed once made, so run() reads them without a lock.
struct ProblemState {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  ConvSettings settings;
  std::array<cudnnConvolutionDescriptor_t, kMathTypes> conv{};
  std::mutex mutex;  // guards the members below and the creation of conv[]
  bool ranked = false;
  std::vector<CudnnAlgo> candidates;
  std::map<int, std::optional<std::size_t>> workspace;  // by algo * kMathTypes + math; nullopt: unsupported

  ProblemState() = default;
  ProblemState(const ProblemState&) = delete;
  ProblemState& operator=(const ProblemState&) = delete;
  ~ProblemState() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    for (cudnnConvolutionDescriptor_t c : conv)
      if (c) cudnnDestroyConvolutionDescriptor(c);
  }
};

class CudnnSolver final : public dnn::TunableSolver<ConvProblem, CudnnAlgo> {
 public:
  // The config-less forms (list order, a named solver) run cuDNN's first-ranked algorithm.
  using dnn::TunableSolver<ConvProblem, CudnnAlgo>::run;
  using dnn::TunableSolver<ConvProblem, CudnnAlgo>::workspace_bytes;
  std::string_view name() const override { return "cuda.conv.cudnn"; }

  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    return cudnn_can_take(p, device);
  }

  std::vector<CudnnAlgo> candidates(const ConvProblem& p, const runtime::Device& device) const override {
    ProblemState& st = state(p, device);
    std::lock_guard lock(st.mutex);
    if (!st.ranked) rank(p, device, st);
    return st.candidates;
  }

  bool valid(const ConvProblem& p, const runtime::Device& device, const CudnnAlgo& config) const override {
    // f32 must stay on FMA math: a tensor-op (TF32) choice would make comparisons with fp32 peers unfair.
    if (p.dtype == DType::f32 && config.math != CUDNN_FMA_MATH) return false;
    return workspace_of(p, device, config).has_value();
  }

  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device,
                              const CudnnAlgo& config) const override {
    const std::optional<std::size_t> ws = workspace_of(p, device, config);
    if (!ws) {
      throw Error(Status::unsupported, "cuda.conv.cudnn: cuDNN does not support " + config.to_string() + " (" +
                                           algo_name(config.algo) + ", " + math_name(config.math) + " math) for " +
                                           p.key());
    }
    return *ws;
  }

  void run(runtime::Stream& stream, const ConvProblem& p, const dnn::ConvArgs& a,
           const CudnnAlgo& config) const override {
    const std::size_t ws = workspace_bytes(p, stream.device(), config);
    if (a.workspace_bytes < ws)
      throw Error(Status::invalid_argument, "cuda.conv.cudnn: workspace of " + std::to_string(a.workspace_bytes) +
                                                " bytes, needs " + std::to_string(ws));
    ProblemState& st = state(p, stream.device());
    const cudnnConvolutionDescriptor_t conv = conv_for(st, config.math);
    CudnnHandle& h = handle(stream.device());
    stream.launch("cuda.conv.cudnn", [&] {
      DeviceGuard guard(stream.device().index());
      std::lock_guard lock(h.mutex);
      check_cudnn(h.set_stream(static_cast<cudaStream_t>(stream.native_handle()), stream.id()), "cudnnSetStream");
      const float alpha = 1.f, beta = 0.f;
      check_cudnn(cudnnConvolutionForward(h.handle, &alpha, st.x, a.x, st.w, a.w, conv, config.algo,
                                          ws ? a.workspace : nullptr, ws, &beta, st.y, a.y),
                  "cudnnConvolutionForward");
    });
  }

  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    std::string out = "cuDNN's ranking (cudnnGetConvolutionForwardAlgorithm_v7), timed by the tuner:";
    for (const CudnnAlgo& c : candidates(p, device)) {
      out += std::string(" ") + algo_name(c.algo) + "/" + math_name(c.math) + " (" +
             std::to_string(workspace_bytes(p, device, c)) + " B)";
    }
    return out;
  }

 private:
  CudnnHandle& handle(const runtime::Device& device) const { return cudnn_handle(device); }

  ProblemState& state(const ConvProblem& p, const runtime::Device& device) const {
    const gpu::ProblemKey key{device.index(), p};
    std::lock_guard lock(states_mutex_);
    auto it = states_.find(key);
    if (it == states_.end()) it = states_.emplace(key, describe(p)).first;
    return *it->second;
  }

  /// The convolution descriptor of `math`, made on first use.
  static cudnnConvolutionDescriptor_t conv_for(ProblemState& st, cudnnMathType_t math) {
    std::lock_guard lock(st.mutex);
    cudnnConvolutionDescriptor_t& conv = st.conv[std::size_t(math)];
    if (conv == nullptr) {
      cudnnConvolutionDescriptor_t fresh = nullptr;
      check_cudnn(cudnnCreateConvolutionDescriptor(&fresh), "cudnnCreateConvolutionDescriptor");
      const cudnnStatus_t set = set_convolution(st.settings, math, fresh);
      if (set != CUDNN_STATUS_SUCCESS) {
        cudnnDestroyConvolutionDescriptor(fresh);
        check_cudnn(set, "cudnnSetConvolution2dDescriptor");
      }
      conv = fresh;
    }
    return conv;
  }

  std::optional<std::size_t> workspace_of(const ConvProblem& p, const runtime::Device& device,
                                          const CudnnAlgo& config) const {
    ProblemState& st = state(p, device);
    const cudnnConvolutionDescriptor_t conv = conv_for(st, config.math);
    const int slot = int(config.algo) * kMathTypes + int(config.math);
    {
      std::lock_guard lock(st.mutex);
      if (auto it = st.workspace.find(slot); it != st.workspace.end()) return it->second;
    }
    std::size_t ws = 0;
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    {
      CudnnHandle& h = handle(device);
      DeviceGuard guard(device.index());
      std::lock_guard lock(h.mutex);
      // cuDNN answers the size only for an algorithm it supports on these descriptors.
      status = cudnnGetConvolutionForwardWorkspaceSize(h.handle, st.x, st.w, conv, st.y, config.algo, &ws);
    }
    std::optional<std::size_t> answer;
    if (status == CUDNN_STATUS_SUCCESS && ws <= kWorkspaceCap) answer = ws;
    std::lock_guard lock(st.mutex);
    st.workspace[slot] = answer;
    return answer;
  }

  /// cuDNN's ranking of its algorithms for the problem, usable ones only (supported, within the
  /// workspace cap, FMA math for f32), the first kMaxAlgos kept. `st.mutex` held.
  void rank(const ConvProblem& p, const runtime::Device& device, ProblemState& st) const {
    const cudnnMathType_t wanted = p.dtype == DType::f32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    const cudnnConvolutionDescriptor_t conv = st.conv[std::size_t(wanted)];  // made by describe()
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    {
      CudnnHandle& h = handle(device);
      DeviceGuard guard(device.index());
      std::lock_guard lock(h.mutex);
      check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(h.handle, st.x, st.w, conv, st.y,
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
                  "cudnnGetConvolutionForwardAlgorithm_v7");
    }
    // A half-precision algorithm that cuDNN can only run without tensor cores is one to two
    // orders slower than a tensor-op one (a dilated 3x3's implicit GEMM took 300 ms against
    // 0.2 ms), and the tuner would pay that cold run; such entries stay only when cuDNN ranks no
    // tensor-op algorithm at all.
    const auto tensor_op = [](cudnnMathType_t m) {
      return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    };
    const bool any_tensor_op = p.dtype != DType::f32 && std::any_of(perf, perf + returned, [&](const auto& e) {
                                 return e.status == CUDNN_STATUS_SUCCESS && e.memory <= kWorkspaceCap &&
                                        tensor_op(e.mathType);
                               });
    for (int i = 0; i < returned && int(st.candidates.size()) < kMaxAlgos; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kWorkspaceCap) continue;
      if (p.dtype == DType::f32 && perf[i].mathType != CUDNN_FMA_MATH && perf[i].mathType != CUDNN_DEFAULT_MATH)
        continue;
      if (any_tensor_op && !tensor_op(perf[i].mathType)) continue;
      const CudnnAlgo c{perf[i].algo, p.dtype == DType::f32 ? CUDNN_FMA_MATH : perf[i].mathType};
      if (std::find(st.candidates.begin(), st.candidates.end(), c) == st.candidates.end()) st.candidates.push_back(c);
    }
    st.ranked = true;
    if (st.candidates.empty())
      throw Error(Status::unsupported, "cuda.conv.cudnn: no cuDNN algorithm supports " + p.key());
  }

  /// The descriptors of `p`, with the convolution descriptor of the math type its dtype runs in.
  static std::unique_ptr<ProblemState> describe(const ConvProblem& p) {
    const gpu::ConvParams cp = gpu::make_params(p);
    auto st = std::make_unique<ProblemState>();
    const cudnnDataType_t dt = cudnn_data_type(cp.dtype, "cuda.conv.cudnn");
    const cudnnTensorFormat_t fmt = cp.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    check_cudnn(cudnnCreateTensorDescriptor(&st->x), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateTensorDescriptor(&st->y), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateFilterDescriptor(&st->w), "cudnnCreateFilterDescriptor");
    check_cudnn(cudnnSetTensor4dDescriptor(st->x, fmt, dt, cp.n, cp.c, cp.h, cp.w), "cudnnSetTensor4dDescriptor(x)");
    check_cudnn(cudnnSetTensor4dDescriptor(st->y, fmt, dt, cp.n, cp.k, cp.p, cp.q), "cudnnSetTensor4dDescriptor(y)");
    check_cudnn(cudnnSetFilter4dDescriptor(st->w, dt, fmt, cp.k, cp.cg, cp.r, cp.s), "cudnnSetFilter4dDescriptor");
    st->settings = ConvSettings{int(cp.pad_h), int(cp.pad_w), int(cp.stride_h), int(cp.stride_w),
                                int(cp.dil_h), int(cp.dil_w), int(cp.groups)};
    const cudnnMathType_t wanted = cp.dtype == DType::f32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    const cudnnConvolutionDescriptor_t conv = conv_for(*st, wanted);
    int n = 0, c = 0, h = 0, w = 0;
    check_cudnn(cudnnGetConvolution2dForwardOutputDim(conv, st->x, st->w, &n, &c, &h, &w),
                "cudnnGetConvolution2dForwardOutputDim");
    if (n != cp.n || c != cp.k || h != cp.p || w != cp.q)
      throw Error(Status::internal, "cuda.conv.cudnn: cuDNN's output size disagrees with the problem's for " + p.key());
    return st;
  }

  mutable std::mutex states_mutex_;
  // Keyed by the problem itself, see problem_key.hpp.
  mutable std::unordered_map<gpu::ProblemKey, std::unique_ptr<ProblemState>, gpu::ProblemKeyHash> states_;
};

}  // namespace

std::unique_ptr<dnn::ConvSolver> make_cudnn_conv_solver() { return std::make_unique<CudnnSolver>(); }

}  // namespace galley::backends::cuda
