// cuda.bnorm.cudnn: cuDNN's batch normalisation in spatial mode (cudnnBatchNormalizationForward-
// Inference, ForwardTraining, Backward), the vendor baseline of gpu.bnorm.planes and what PyTorch
// calls. Its semantics match BatchNormProblem: the exponential average factor is the momentum, the
// running variance is updated with the unbiased batch variance, and the saved "inverse variance"
// is 1/sqrt(var + epsilon). The descriptors are made per call: they are host-only and cost less
// than a kernel launch.
#include <cudnn.h>

#include <climits>
#include <mutex>
#include <string>

#include "backends/cuda/cudnn_handle.hpp"
#include "backends/cuda/runtime_check.hpp"
#include "backends/cuda/vendor_norm_solvers.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::cuda {
namespace {

using dnn::Applicability;
using dnn::BatchNormProblem;
using dnn::NormArgs;

constexpr const char* kName = "cuda.bnorm.cudnn";

void check_status(cudnnStatus_t status, const char* call) { check_cudnn_status(status, kName, call); }

/// x/y and the derived per-channel descriptor of one problem, destroyed with it.
struct Descriptors {
  cudnnTensorDescriptor_t data = nullptr, channel = nullptr;

  explicit Descriptors(const BatchNormProblem& p) {
    check_status(cudnnCreateTensorDescriptor(&data), "cudnnCreateTensorDescriptor");
    check_status(cudnnCreateTensorDescriptor(&channel), "cudnnCreateTensorDescriptor");
    const cudnnDataType_t type = p.dtype == DType::f16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    const cudnnTensorFormat_t format = p.layout == dnn::Layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    check_status(cudnnSetTensor4dDescriptor(data, format, type, int(p.n), int(p.c), int(p.h), int(p.w)),
                 "cudnnSetTensor4dDescriptor");
    check_status(cudnnDeriveBNTensorDescriptor(channel, data, CUDNN_BATCHNORM_SPATIAL),
                 "cudnnDeriveBNTensorDescriptor");
  }
  ~Descriptors() {
    if (data) cudnnDestroyTensorDescriptor(data);
    if (channel) cudnnDestroyTensorDescriptor(channel);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

class CudnnBnorm final : public dnn::BatchNormSolver {
 public:
  std::string_view name() const override { return kName; }

  Applicability check(const BatchNormProblem& p, const runtime::Device& device) const override {
    if (device.backend() != "cuda") return Applicability::no("runs on cuda devices, not " + device.name());
    // bf16 is left to gpu.bnorm.planes: the legacy batch-norm entry points are documented for
    // half, float and double data.
    if (p.dtype != DType::f32 && p.dtype != DType::f16) {
      return Applicability::no(std::string("dtype ") + to_string(p.dtype) + " (needs f32 or f16)");
    }
    if (p.n * p.c * p.h * p.w > INT_MAX)
      return Applicability::no("more than 2^31 - 1 elements (cuDNN's int sizes)");
    if (p.epsilon < CUDNN_BN_MIN_EPSILON) return Applicability::no("epsilon below CUDNN_BN_MIN_EPSILON");
    return Applicability::yes();
  }

  void run(runtime::Stream& stream, const BatchNormProblem& p, const NormArgs& a) const override {
    CudnnHandle& h = cudnn_handle(stream.device());
    stream.launch(kName, [&] {
      DeviceGuard guard(stream.device().index());
      const Descriptors d(p);
      std::lock_guard lock(h.mutex);
      check_status(h.set_stream(static_cast<cudaStream_t>(stream.native_handle()), stream.id()),
                   "cudnnSetStream");
      const float one = 1.f, zero = 0.f;
      if (p.direction == dnn::NormDirection::backward) {
        check_status(
            cudnnBatchNormalizationBackward(h.handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero,
                                            d.data, a.x, d.data, a.dy, d.data, a.dx, d.channel, a.scale,
                                            a.dscale, a.dshift, p.epsilon, a.saved_mean, a.saved_invstd),
            "cudnnBatchNormalizationBackward");
      } else if (p.mode == dnn::BatchNormMode::inference) {
        check_status(cudnnBatchNormalizationForwardInference(
                         h.handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.data, a.x, d.data, a.y, d.channel,
                         a.scale, a.shift, a.running_mean, a.running_var, p.epsilon),
                     "cudnnBatchNormalizationForwardInference");
      } else {
        check_status(
            cudnnBatchNormalizationForwardTraining(
                h.handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.data, a.x, d.data, a.y, d.channel, a.scale,
                a.shift, p.momentum, a.running_mean, a.running_var, p.epsilon, a.saved_mean, a.saved_invstd),
            "cudnnBatchNormalizationForwardTraining");
      }
    });
  }

  std::string detail(const BatchNormProblem&, const runtime::Device&) const override {
    return "cuDNN legacy batch norm, CUDNN_BATCHNORM_SPATIAL";
  }
};

}  // namespace

std::unique_ptr<dnn::BatchNormSolver> make_cudnn_bnorm_solver() { return std::make_unique<CudnnBnorm>(); }

}  // namespace galley::backends::cuda
