// cuda.activ.cudnn: cuDNN's legacy activation API, the vendor baseline for the functions it has:
// relu, sigmoid, tanh, clipped relu (clip with lower bound 0: relu6), elu and swish with beta 1
// (silu). The rest (leaky_relu, clip with another lower bound, both gelus, hardswish, hardsigmoid)
// are refused with the reason.
//
// cudnnActivationBackward reads both the forward's input x and output y, while a backward problem
// carries only one of them, as PyTorch keeps it. relu keeps y, and relu(y) = y, so y serves as x.
// clip, elu and silu keep x: y is recomputed into the workspace first. sigmoid and tanh keep y
// alone, and x cannot be recovered exactly from it, so their backward is refused.
//
// The tensor is described as 1x1x1xN: an activation is elementwise, so the layout is irrelevant.
#include "backends/cuda/vendor_dtypes.hpp"
#include "backends/cuda/activ_cudnn.hpp"

#include <cudnn.h>

#include <climits>
#include <mutex>
#include <optional>
#include <string>

#include "backends/cuda/cudnn_handle.hpp"
#include "backends/cuda/runtime_check.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::cuda {
namespace {

using dnn::Activation;
using dnn::ActivArgs;
using dnn::ActivProblem;
using dnn::Applicability;

constexpr const char* kName = "cuda.activ.cudnn";

void check_cudnn(cudnnStatus_t status, const char* call) { check_cudnn_status(status, kName, call); }

struct Mode {
  cudnnActivationMode_t mode;
  double coef = 0;  // clipped relu's ceiling, elu's alpha
};

// cuDNN's mode for the problem, or the reason there is none.
std::optional<Mode> mode_of(const ActivProblem& p, std::string* why) {
  switch (p.activation) {
    case Activation::relu: return Mode{CUDNN_ACTIVATION_RELU};
    case Activation::sigmoid: return Mode{CUDNN_ACTIVATION_SIGMOID};
    case Activation::tanh: return Mode{CUDNN_ACTIVATION_TANH};
    case Activation::elu: return Mode{CUDNN_ACTIVATION_ELU, p.alpha};
    case Activation::silu: return Mode{CUDNN_ACTIVATION_SWISH};
    case Activation::clip:
      if (p.alpha == 0) return Mode{CUDNN_ACTIVATION_CLIPPED_RELU, p.beta};
      *why = "cuDNN's clipped relu has lower bound 0, not " + std::to_string(p.alpha);
      return std::nullopt;
    default:
      *why = std::string("cuDNN has no ") + dnn::to_string(p.activation) + " activation";
      return std::nullopt;
  }
}

// Backward of an activation that keeps x needs y as well, made in the workspace.
bool recomputes_y(const ActivProblem& p) {
  return p.direction == dnn::ActivDirection::backward && !p.reads_dst();
}

// The descriptors of one call, destroyed with it (creating them is host work of well under a
// microsecond each; no device work).
struct Descriptors {
  cudnnTensorDescriptor_t tensor = nullptr;
  cudnnActivationDescriptor_t activation = nullptr;

  explicit Descriptors(const ActivProblem& p) {
    std::string why;
    const std::optional<Mode> m = mode_of(p, &why);
    if (!m) throw Error(Status::unsupported, std::string(kName) + ": " + why);
    check_cudnn(cudnnCreateTensorDescriptor(&tensor), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnSetTensor4dDescriptor(tensor, CUDNN_TENSOR_NCHW, cudnn_data_type(p.dtype, kName), 1, 1, 1,
                                           static_cast<int>(p.elements())),
                "cudnnSetTensor4dDescriptor");
    check_cudnn(cudnnCreateActivationDescriptor(&activation), "cudnnCreateActivationDescriptor");
    check_cudnn(cudnnSetActivationDescriptor(activation, m->mode, CUDNN_PROPAGATE_NAN, m->coef),
                "cudnnSetActivationDescriptor");
    if (m->mode == CUDNN_ACTIVATION_SWISH) {
      check_cudnn(cudnnSetActivationDescriptorSwishBeta(activation, 1.0), "cudnnSetActivationDescriptorSwishBeta");
    }
  }
  ~Descriptors() {
    if (tensor) cudnnDestroyTensorDescriptor(tensor);
    if (activation) cudnnDestroyActivationDescriptor(activation);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

class CudnnActiv final : public dnn::ActivSolver {
 public:
  std::string_view name() const override { return kName; }

  Applicability check(const ActivProblem& p, const runtime::Device& device) const override {
    if (device.backend() != "cuda") return Applicability::no("runs on cuda devices, not " + device.name());
    std::string why;
    if (!mode_of(p, &why)) return Applicability::no(why);
    if (p.elements() > INT_MAX) {
      return Applicability::no("cuDNN's tensor sizes are 32-bit; " + std::to_string(p.elements()) + " elements");
    }
    if (p.direction == dnn::ActivDirection::backward &&
        (p.activation == Activation::sigmoid || p.activation == Activation::tanh)) {
      return Applicability::no(std::string("cuDNN's backward also reads x, which ") + dnn::to_string(p.activation) +
                               "'s backward does not keep (only y, as PyTorch)");
    }
    if (p.direction == dnn::ActivDirection::backward && p.activation == Activation::silu) {
      return Applicability::no("cuDNN's swish gradient is 0 for very large x where silu's is 1");
    }
    return Applicability::yes();
  }

  std::size_t workspace_bytes(const ActivProblem& p, const runtime::Device&) const override {
    return recomputes_y(p) ? p.desc().bytes() : 0;
  }

  void run(runtime::Stream& stream, const ActivProblem& p, const ActivArgs& a) const override {
    const std::size_t ws = workspace_bytes(p, stream.device());
    if (a.workspace_bytes < ws) {
      throw Error(Status::invalid_argument, std::string(kName) + ": workspace of " +
                                                std::to_string(a.workspace_bytes) + " bytes, needs " + std::to_string(ws));
    }
    CudnnHandle& h = cudnn_handle(stream.device());
    stream.launch(kName, [&] {
      DeviceGuard guard(stream.device().index());
      const Descriptors d(p);
      std::lock_guard lock(h.mutex);
      check_cudnn(h.set_stream(static_cast<cudaStream_t>(stream.native_handle()), stream.id()), "cudnnSetStream");
      const float one = 1.f, zero = 0.f;
      if (p.direction == dnn::ActivDirection::forward) {
        check_cudnn(cudnnActivationForward(h.handle, d.activation, &one, d.tensor, a.x, &zero, d.tensor, a.y),
                    "cudnnActivationForward");
        return;
      }
      const void* x = a.x;
      const void* y = a.y;
      if (recomputes_y(p)) {
        check_cudnn(cudnnActivationForward(h.handle, d.activation, &one, d.tensor, a.x, &zero, d.tensor, a.workspace),
                    "cudnnActivationForward (y for the backward)");
        y = a.workspace;
      } else {
        x = a.y;
      }
      check_cudnn(cudnnActivationBackward(h.handle, d.activation, &one, d.tensor, y, d.tensor, a.dy, d.tensor, x, &zero,
                                          d.tensor, a.dx),
                  "cudnnActivationBackward");
    });
  }

  std::string detail(const ActivProblem& p, const runtime::Device&) const override {
    return recomputes_y(p) ? "cudnnActivationBackward, y recomputed into the workspace" : "";
  }
};

}  // namespace

std::unique_ptr<dnn::ActivSolver> make_cudnn_activ_solver() { return std::make_unique<CudnnActiv>(); }

}  // namespace galley::backends::cuda
