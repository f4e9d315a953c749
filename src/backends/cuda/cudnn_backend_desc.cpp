// The cuDNN backend API helpers of cuda.conv.cudnn_graph (cudnn_backend_desc.hpp).
#include "backends/cuda/cudnn_backend_desc.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

#include "backends/cuda/cudnn_handle.hpp"
#include "backends/cuda/vendor_dtypes.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::cuda {

void check_backend(cudnnStatus_t status, const std::string& call) {
  check_cudnn_status(status, kGraphSolverName, call);
}

Desc make_tensor(std::int64_t uid, cudnnDataType_t dt, std::int64_t n, std::int64_t c, std::int64_t h,
                 std::int64_t w, bool nhwc, bool is_virtual) {
  const std::array<std::int64_t, 4> dims{n, c, h, w};
  const std::array<std::int64_t, 4> strides = nhwc ? std::array<std::int64_t, 4>{h * w * c, 1, w * c, c}
                                                   : std::array<std::int64_t, 4>{c * h * w, h * w, w, 1};
  Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &dt, 1, "tensor data type");
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4, "tensor dims");
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4, "tensor strides");
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid, 1, "tensor uid");
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &kTensorAlignment, 1, "tensor alignment");
  if (is_virtual)
    t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual, 1, "tensor is virtual");
  t.finalize(is_virtual ? "virtual tensor" : "tensor");
  return t;
}

std::string Pointwise::describe() const {
  std::string s;
  switch (mode) {
    case CUDNN_POINTWISE_ADD:
      s = "add";
      break;
    case CUDNN_POINTWISE_RELU_FWD:
      s = "relu_fwd";
      break;
    case CUDNN_POINTWISE_TANH_FWD:
      s = "tanh_fwd";
      break;
    case CUDNN_POINTWISE_SIGMOID_FWD:
      s = "sigmoid_fwd";
      break;
    case CUDNN_POINTWISE_ELU_FWD:
      s = "elu_fwd";
      break;
    case CUDNN_POINTWISE_GELU_FWD:
      s = "gelu_fwd";
      break;
    case CUDNN_POINTWISE_GELU_APPROX_TANH_FWD:
      s = "gelu_approx_tanh_fwd";
      break;
    case CUDNN_POINTWISE_SWISH_FWD:
      s = "swish_fwd";
      break;
    default:
      s = "pointwise mode " + std::to_string(int(mode));
      break;
  }
  std::string args;
  auto add = [&](const char* name, const std::optional<double>& v) {
    if (!v) return;
    char text[40];
    std::snprintf(text, sizeof text, "%g", *v);
    args.append(args.empty() ? "" : ", ").append(name).append(" ").append(text);
  };
  add("lower_clip", relu_lower_clip);
  add("upper_clip", relu_upper_clip);
  add("lower_clip_slope", relu_lower_clip_slope);
  add("elu_alpha", elu_alpha);
  add("swish_beta", swish_beta);
  return args.empty() ? s : s + "(" + args + ")";
}

std::optional<Pointwise> pointwise_activation(dnn::Activation activation, double alpha, double beta,
                                              std::string& why) {
  using dnn::Activation;
  Pointwise pw;
  switch (activation) {
    case Activation::relu:
      pw.mode = CUDNN_POINTWISE_RELU_FWD;
      pw.relu_lower_clip = 0.0;
      return pw;
    case Activation::leaky_relu:
      pw.mode = CUDNN_POINTWISE_RELU_FWD;
      pw.relu_lower_clip = 0.0;
      pw.relu_lower_clip_slope = alpha;
      return pw;
    case Activation::clip:
      pw.mode = CUDNN_POINTWISE_RELU_FWD;
      pw.relu_lower_clip = alpha;
      pw.relu_upper_clip = beta;
      pw.relu_lower_clip_slope = 0.0;
      return pw;
    case Activation::elu:
      pw.mode = CUDNN_POINTWISE_ELU_FWD;
      pw.elu_alpha = alpha;
      return pw;
    case Activation::sigmoid:
      pw.mode = CUDNN_POINTWISE_SIGMOID_FWD;
      return pw;
    case Activation::tanh:
      pw.mode = CUDNN_POINTWISE_TANH_FWD;
      return pw;
    case Activation::gelu_erf:
      pw.mode = CUDNN_POINTWISE_GELU_FWD;
      return pw;
    case Activation::gelu_tanh:
      pw.mode = CUDNN_POINTWISE_GELU_APPROX_TANH_FWD;
      return pw;
    case Activation::silu:
      pw.mode = CUDNN_POINTWISE_SWISH_FWD;
      pw.swish_beta = 1.0;
      return pw;
    case Activation::hardswish:
    case Activation::hardsigmoid:
      why = std::string("cuDNN has no pointwise mode for ") + dnn::to_string(activation) +
            " (built from add, clip and multiply nodes it would round apart from Galley's definition)";
      return std::nullopt;
  }
  why = "activation " + std::to_string(int(activation)) + " has no cuDNN pointwise mode";
  return std::nullopt;
}

Desc make_pointwise(const Pointwise& pw) {
  Desc d(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  d.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &pw.mode, 1, "pointwise mode");
  d.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &math, 1, "pointwise math precision");
  auto set_double = [&](cudnnBackendAttributeName_t name, const std::optional<double>& v, const char* what) {
    if (v) d.set(name, CUDNN_TYPE_DOUBLE, &*v, 1, what);
  };
  set_double(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, pw.relu_lower_clip, "pointwise relu lower clip");
  set_double(CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, pw.relu_upper_clip, "pointwise relu upper clip");
  set_double(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, pw.relu_lower_clip_slope,
             "pointwise relu lower clip slope");
  set_double(CUDNN_ATTR_POINTWISE_ELU_ALPHA, pw.elu_alpha, "pointwise elu alpha");
  set_double(CUDNN_ATTR_POINTWISE_SWISH_BETA, pw.swish_beta, "pointwise swish beta");
  d.finalize("pointwise descriptor");
  return d;
}

Desc make_pointwise_op(const Desc& pw, const Desc& x, const Desc* b, const Desc& y) {
  Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, "pointwise op descriptor");
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, "pointwise op x");
  if (b != nullptr) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b, "pointwise op b");
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, "pointwise op y");
  op.finalize("pointwise operation");
  return op;
}

EngineInfo engine_info(const Desc& config) {
  EngineInfo info;
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  std::int64_t n = 0;
  check_backend(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e),
                "get ENGINECFG_ENGINE");
  check_backend(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                         &info.config.index),
                "get ENGINE_GLOBAL_INDEX");
  info.numerical.resize(CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
  check_backend(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                         CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, info.numerical.data()),
                "get ENGINE_NUMERICAL_NOTE");
  info.numerical.resize(std::size_t(std::max<std::int64_t>(0, n)));
  info.behavior.resize(CUDNN_BEHAVIOR_NOTE_TYPE_COUNT);
  check_backend(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                         CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n, info.behavior.data()),
                "get ENGINE_BEHAVIOR_NOTE");
  info.behavior.resize(std::size_t(std::max<std::int64_t>(0, n)));

  std::vector<Desc> choices;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
    choices.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    raw.push_back(choices.back().get());
  }
  check_backend(
      cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               std::int64_t(raw.size()), &n, raw.data()),
      "get ENGINECFG_KNOB_CHOICES");
  for (std::int64_t i = 0; i < std::min<std::int64_t>(n, std::int64_t(raw.size())); ++i) {
    cudnnBackendKnobType_t type{};
    std::int64_t value = 0, got = 0;
    if (cudnnBackendGetAttribute(raw[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &got,
                                 &type) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(raw[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &got,
                                 &value) != CUDNN_STATUS_SUCCESS)
      continue;
    info.config.knobs.emplace_back(std::int64_t(type), value);
  }
  return info;
}

std::string refused(const EngineInfo& info, DType dtype, bool runtime_fusion) {
  if (!runtime_fusion && info.has(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)) return "runtime compilation";
  if (info.has(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)) return "reduced-precision reduction";
  if (info.has(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)) return "down-converts inputs";
  if (dtype == DType::f32 && info.has(CUDNN_NUMERICAL_NOTE_TENSOR_CORE)) return "tensor cores (TF32) for f32";
  return {};
}

std::string notes_text(const EngineInfo& info) {
  std::string s;
  auto add = [&](const char* t) {
    if (!s.empty()) s += ',';
    s += t;
  };
  if (info.has(CUDNN_NUMERICAL_NOTE_TENSOR_CORE)) add("tensor-core");
  if (info.has(CUDNN_NUMERICAL_NOTE_FFT)) add("fft");
  if (info.has(CUDNN_NUMERICAL_NOTE_WINOGRAD)) add("winograd");
  if (info.has(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)) add("nondeterministic");
  return s;
}

}  // namespace galley::backends::cuda
