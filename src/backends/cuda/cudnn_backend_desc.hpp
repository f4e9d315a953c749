// The cuDNN backend (graph) API as cuda.conv.cudnn_graph uses it: an owning descriptor wrapper,
// tensor descriptors, pointwise nodes and the activations they express, what an engine config is
// (its notes and knobs), the notes filter. The engine config's text form is cudnn_engine_config.hpp.
#pragma once

#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/cuda/cudnn_engine_config.hpp"
#include "galley/core/dtype.hpp"
#include "galley/dnn/activation.hpp"

namespace galley::backends::cuda {

/// The name errors from this API are reported under.
inline constexpr const char* kGraphSolverName = "cuda.conv.cudnn_graph";
/// Byte alignment promised for every tensor (run() checks the pointers).
inline constexpr std::int64_t kTensorAlignment = 16;

/// Throws Error(backend_error) "cuda.conv.cudnn_graph: <call>: <cuDNN message>" unless success.
void check_backend(cudnnStatus_t status, const std::string& call);

// The handle attributes are deprecated in cuDNN 9.19 in favour of device-property descriptors, but
// they are what every 9.x release accepts; keep the warning local.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
inline constexpr cudnnBackendAttributeName_t kGraphHandle = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
inline constexpr cudnnBackendAttributeName_t kPlanHandle = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

/// One backend descriptor, destroyed with its owner (move-only).
class Desc {
 public:
  Desc() = default;
  explicit Desc(cudnnBackendDescriptorType_t type) {
    check_backend(cudnnBackendCreateDescriptor(type, &d_),
                  "cudnnBackendCreateDescriptor(" + std::to_string(type) + ")");
  }
  ~Desc() {
    if (d_) (void)cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Desc& operator=(Desc&& o) noexcept {
    if (this != &o) {
      if (d_) (void)cudnnBackendDestroyDescriptor(d_);
      d_ = std::exchange(o.d_, nullptr);
    }
    return *this;
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  /// Takes ownership of a descriptor created elsewhere.
  static Desc adopt(cudnnBackendDescriptor_t d) {
    Desc out;
    out.d_ = d;
    return out;
  }
  /// Gives up ownership without destroying (cached plans at process exit, see ~GraphSolver).
  void release() { d_ = nullptr; }

  template <typename V>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const V* values,
           std::int64_t count, const char* what) {
    check_backend(cudnnBackendSetAttribute(d_, name, type, count, values),
                  std::string("cudnnBackendSetAttribute(") + what + ")");
  }
  void set_desc(cudnnBackendAttributeName_t name, const Desc& value, const char* what) {
    cudnnBackendDescriptor_t v = value.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &v, 1, what);
  }
  void finalize(const char* what) {
    check_backend(cudnnBackendFinalize(d_), std::string("cudnnBackendFinalize(") + what + ")");
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

/// A 4-D tensor in logical (n, c, h, w) order; `nhwc` picks channels-last strides. A virtual tensor
/// is an intermediate of a fused graph: it has no memory and no place in the variant pack.
Desc make_tensor(std::int64_t uid, cudnnDataType_t dt, std::int64_t n, std::int64_t c, std::int64_t h,
                 std::int64_t w, bool nhwc, bool is_virtual = false);

/// One pointwise node's function: the mode and those of its attributes that are set (the others
/// keep cuDNN's defaults). Always computed in f32.
struct Pointwise {
  cudnnPointwiseMode_t mode = CUDNN_POINTWISE_ADD;
  std::optional<double> relu_lower_clip, relu_upper_clip, relu_lower_clip_slope, elu_alpha, swish_beta;
  /// "add", "relu_fwd(lower_clip 0, lower_clip_slope 0.01)": for logs and detail().
  std::string describe() const;
};

/// The pointwise node that computes `activation` with parameters (alpha, beta) as Galley defines it
/// (galley/dnn/activation.hpp), or nothing with `why` set when no cuDNN mode does. RELU_FWD takes
/// relu (lower clip 0), leaky_relu (lower clip 0, lower clip slope alpha: alpha * x below 0) and
/// clip (lower clip alpha, upper clip beta, slope 0: alpha for every x below alpha); a slope is only
/// ever set with a lower clip of 0, where cuDNN's slope term is slope * x. elu (ELU_FWD with alpha), sigmoid,
/// tanh, gelu_erf (GELU_FWD), gelu_tanh (GELU_APPROX_TANH_FWD) and silu (SWISH_FWD with beta 1) have modes of
/// their own; hardswish and hardsigmoid have none.
std::optional<Pointwise> pointwise_activation(dnn::Activation activation, double alpha, double beta,
                                              std::string& why);

/// A finalized CUDNN_BACKEND_POINTWISE_DESCRIPTOR of `pw` with f32 math.
Desc make_pointwise(const Pointwise& pw);
/// A finalized pointwise operation y = pw(x) or, with `b`, y = pw(x, b) (b broadcasts over the
/// dimensions where it is 1).
Desc make_pointwise_op(const Desc& pw, const Desc& x, const Desc* b, const Desc& y);

/// What an engine config is, for filtering and for detail().
struct EngineInfo {
  EngineConfig config;  // the engine's global index and the knob choices
  std::vector<cudnnBackendNumericalNote_t> numerical;
  std::vector<cudnnBackendBehaviorNote_t> behavior;
  bool has(cudnnBackendNumericalNote_t n) const {
    return std::count(numerical.begin(), numerical.end(), n) > 0;
  }
  bool has(cudnnBackendBehaviorNote_t n) const { return std::count(behavior.begin(), behavior.end(), n) > 0; }
  std::string tag() const { return config.to_string(); }
};

/// Reads an engine config's engine index, notes and knob choices.
EngineInfo engine_info(const Desc& config);

/// Why `info` is refused for `dtype` (runtime compilation unless `runtime_fusion`, reduced-precision
/// reduction, down-converted inputs, TF32 for f32), or empty. `runtime_fusion` is for fused graphs:
/// cuDNN fuses a pointwise epilogue into a convolution with engines it compiles at plan time.
std::string refused(const EngineInfo& info, DType dtype, bool runtime_fusion = false);

/// "tensor-core,winograd" for detail().
std::string notes_text(const EngineInfo& info);

}  // namespace galley::backends::cuda
