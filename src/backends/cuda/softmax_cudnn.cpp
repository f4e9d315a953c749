// cuda.softmax.cudnn: cudnnSoftmaxForward / cudnnSoftmaxBackward (CUDNN_SOFTMAX_ACCURATE or
// CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_CHANNEL). Any axis of any layout is the channel axis of
// an NCHW descriptor [outer, axis, inner, 1] over the same memory.
#include <cudnn.h>

#include <climits>
#include <memory>
#include <mutex>
#include <string>

#include "backends/cuda/cudnn_handle.hpp"
#include "backends/cuda/runtime_check.hpp"
#include "backends/cuda/vendor_softmax_reduce_solvers.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::cuda {
namespace {

using dnn::Applicability;
using dnn::SoftmaxArgs;
using dnn::SoftmaxProblem;

constexpr const char* kName = "cuda.softmax.cudnn";

void check_status(cudnnStatus_t status, const char* call) { check_cudnn_status(status, kName, call); }

class TensorDescriptor {
 public:
  explicit TensorDescriptor(const SoftmaxProblem& p) {
    check_status(cudnnCreateTensorDescriptor(&desc_), "cudnnCreateTensorDescriptor");
    const cudnnDataType_t dt = p.dtype == DType::f32   ? CUDNN_DATA_FLOAT
                               : p.dtype == DType::f16 ? CUDNN_DATA_HALF
                                                       : CUDNN_DATA_BFLOAT16;
    const cudnnStatus_t st = cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, dt, int(p.outer()),
                                                        int(p.axis_size()), int(p.inner()), 1);
    if (st != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyTensorDescriptor(desc_);
      check_status(st, "cudnnSetTensor4dDescriptor");
    }
  }
  ~TensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class CudnnSoftmax final : public dnn::Solver<SoftmaxProblem> {
 public:
  std::string_view name() const override { return kName; }

  Applicability check(const SoftmaxProblem& p, const runtime::Device& device) const override {
    if (device.backend() != "cuda") return Applicability::no("runs on cuda devices, not " + device.name());
    if (p.outer() > INT_MAX || p.axis_size() > INT_MAX || p.inner() > INT_MAX) {
      return Applicability::no("a dim of the [outer, axis, inner] view exceeds 2^31 - 1");
    }
    if (p.elements() > INT_MAX)
      return Applicability::no("more than 2^31 - 1 elements (cuDNN's 32-bit indexing)");
    // Both would be silent differences from the problem's contract (and PyTorch): cuDNN's LOG mode
    // is about 2e-4 off in f32, and its forward gives finite values for rows holding +inf where
    // the contract says NaN. Its softmax backward has no such case.
    if (p.algorithm == dnn::SoftmaxAlgorithm::log_softmax) {
      return Applicability::no("cuDNN's log-softmax is not accurate to f32 (errors of about 2e-4)");
    }
    if (!p.backward) return Applicability::no("cuDNN's forward does not give NaN for rows holding +inf, as the contract says");
    return Applicability::yes();
  }

  void run(runtime::Stream& stream, const SoftmaxProblem& p, const SoftmaxArgs& a) const override {
    CudnnHandle& h = cudnn_handle(stream.device());
    stream.launch(kName, [&] {
      DeviceGuard guard(stream.device().index());
      const TensorDescriptor d(p);
      std::lock_guard lock(h.mutex);
      check_status(h.set_stream(static_cast<cudaStream_t>(stream.native_handle()), stream.id()),
                   "cudnnSetStream");
      const cudnnSoftmaxAlgorithm_t algo =
          p.algorithm == dnn::SoftmaxAlgorithm::log_softmax ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
      const float alpha = 1.f, beta = 0.f;
      if (p.backward) {
        check_status(cudnnSoftmaxBackward(h.handle, algo, CUDNN_SOFTMAX_MODE_CHANNEL, &alpha, d.get(), a.dst,
                                          d.get(), a.diff_dst, &beta, d.get(), a.diff_src),
                     "cudnnSoftmaxBackward");
      } else {
        check_status(cudnnSoftmaxForward(h.handle, algo, CUDNN_SOFTMAX_MODE_CHANNEL, &alpha, d.get(), a.src,
                                         &beta, d.get(), a.dst),
                     "cudnnSoftmaxForward");
      }
    });
  }

  std::string detail(const SoftmaxProblem& p, const runtime::Device&) const override {
    return "channel mode over [" + std::to_string(p.outer()) + ", " + std::to_string(p.axis_size()) + ", " +
           std::to_string(p.inner()) + ", 1]";
  }
};

}  // namespace

std::unique_ptr<dnn::Solver<SoftmaxProblem>> make_cudnn_softmax_solver() {
  return std::make_unique<CudnnSoftmax>();
}

}  // namespace galley::backends::cuda
