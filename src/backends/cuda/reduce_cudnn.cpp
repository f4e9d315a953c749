// cuda.reduce.cudnn: cudnnReduceTensor with CUDNN_REDUCE_TENSOR_ADD (sum) or _AVG (mean), f32
// accumulation, forward only, over the problem's coalesced groups as an N-d descriptor. cuDNN 9
// marks this legacy API deprecated in favour of its graph API; it stays here as the vendor's
// figure beside gpu.reduce.direct, so its deprecation warnings are silenced in this file alone.
#include <cudnn.h>

#include <climits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cuda/cudnn_handle.hpp"
#include "backends/cuda/runtime_check.hpp"
#include "backends/cuda/vendor_softmax_reduce_solvers.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace galley::backends::cuda {
namespace {

using dnn::Applicability;
using dnn::ReduceArgs;
using dnn::ReduceProblem;

constexpr const char* kName = "cuda.reduce.cudnn";

void check_status(cudnnStatus_t status, const char* call) { check_cudnn_status(status, kName, call); }

// The descriptors of one problem: src and dst over the coalesced groups, padded to 4 dims.
class Descriptors {
 public:
  explicit Descriptors(const ReduceProblem& p) {
    check_status(cudnnCreateTensorDescriptor(&a_), "cudnnCreateTensorDescriptor");
    check_status(cudnnCreateTensorDescriptor(&c_), "cudnnCreateTensorDescriptor");
    check_status(cudnnCreateReduceTensorDescriptor(&reduce_), "cudnnCreateReduceTensorDescriptor");
    const dnn::ReduceGroups g = dnn::ReduceGroups::of(p);
    std::vector<int> a_dims, c_dims;
    for (int i = 0; i < g.count; ++i) {
      a_dims.push_back(int(g.size[i]));
      c_dims.push_back(g.reduced[i] ? 1 : int(g.size[i]));
    }
    while (a_dims.size() < 4) {
      a_dims.push_back(1);
      c_dims.push_back(1);
    }
    const cudnnDataType_t dt = p.dtype == DType::f32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_HALF;
    set(a_, dt, a_dims);
    set(c_, dt, c_dims);
    check_status(
        cudnnSetReduceTensorDescriptor(
            reduce_, p.op == dnn::ReduceOp::sum ? CUDNN_REDUCE_TENSOR_ADD : CUDNN_REDUCE_TENSOR_AVG,
            CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN, CUDNN_REDUCE_TENSOR_NO_INDICES, CUDNN_32BIT_INDICES),
        "cudnnSetReduceTensorDescriptor");
  }
  ~Descriptors() {
    cudnnDestroyReduceTensorDescriptor(reduce_);
    cudnnDestroyTensorDescriptor(c_);
    cudnnDestroyTensorDescriptor(a_);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;

  cudnnTensorDescriptor_t a_ = nullptr, c_ = nullptr;
  cudnnReduceTensorDescriptor_t reduce_ = nullptr;

 private:
  static void set(cudnnTensorDescriptor_t d, cudnnDataType_t dt, const std::vector<int>& dims) {
    std::vector<int> strides(dims.size());
    int stride = 1;
    for (std::size_t i = dims.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= dims[i];
    }
    check_status(cudnnSetTensorNdDescriptor(d, dt, int(dims.size()), dims.data(), strides.data()),
                 "cudnnSetTensorNdDescriptor");
  }
};

class CudnnReduce final : public dnn::Solver<ReduceProblem> {
 public:
  std::string_view name() const override { return kName; }

  Applicability check(const ReduceProblem& p, const runtime::Device& device) const override {
    if (device.backend() != "cuda") return Applicability::no("runs on cuda devices, not " + device.name());
    if (p.backward) return Applicability::no("forward only (cuDNN has no broadcast-back of a reduction)");
    if (p.dtype == DType::bf16) return Applicability::no("bf16 is not a cudnnReduceTensor type (f32, f16)");
    if (p.src_elements() > INT_MAX)
      return Applicability::no("more than 2^31 - 1 elements (cuDNN's 32-bit sizes)");
    return Applicability::yes();
  }

  std::size_t workspace_bytes(const ReduceProblem& p, const runtime::Device& device) const override {
    CudnnHandle& h = cudnn_handle(device);
    DeviceGuard guard(device.index());
    const Descriptors d(p);
    std::size_t bytes = 0;
    std::lock_guard lock(h.mutex);
    check_status(cudnnGetReductionWorkspaceSize(h.handle, d.reduce_, d.a_, d.c_, &bytes),
                 "cudnnGetReductionWorkspaceSize");
    return bytes;
  }

  void run(runtime::Stream& stream, const ReduceProblem& p, const ReduceArgs& a) const override {
    CudnnHandle& h = cudnn_handle(stream.device());
    stream.launch(kName, [&] {
      DeviceGuard guard(stream.device().index());
      const Descriptors d(p);
      std::lock_guard lock(h.mutex);
      std::size_t need = 0;
      check_status(cudnnGetReductionWorkspaceSize(h.handle, d.reduce_, d.a_, d.c_, &need),
                   "cudnnGetReductionWorkspaceSize");
      if (a.workspace_bytes < need) {
        throw Error(Status::invalid_argument, std::string(kName) + ": workspace of " +
                                                  std::to_string(a.workspace_bytes) + " bytes, needs " +
                                                  std::to_string(need));
      }
      check_status(h.set_stream(static_cast<cudaStream_t>(stream.native_handle()), stream.id()),
                   "cudnnSetStream");
      const float alpha = 1.f, beta = 0.f;
      check_status(cudnnReduceTensor(h.handle, d.reduce_, nullptr, 0, need ? a.workspace : nullptr, need,
                                     &alpha, d.a_, a.src, &beta, d.c_, a.dst),
                   "cudnnReduceTensor");
    });
  }
};

}  // namespace

std::unique_ptr<dnn::Solver<ReduceProblem>> make_cudnn_reduce_solver() {
  return std::make_unique<CudnnReduce>();
}

}  // namespace galley::backends::cuda
