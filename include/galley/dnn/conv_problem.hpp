// One 2-D convolution problem: shapes, hyper-parameters, dtype, layout, direction.
// Field names follow MIOpenDriver's flags (-n -c -H -W -k -y -x -p -q -u -v -l -j -g).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "galley/core/dtype.hpp"
#include "galley/dnn/activation.hpp"
#include "galley/dnn/op.hpp"
#include "galley/dnn/tensor.hpp"
#include "galley/runtime/device.hpp"

namespace galley::dnn {

enum class ConvDirection { forward, backward_data, backward_weights };
const char* to_string(ConvDirection direction) noexcept;

/// Device pointers of one convolution call, by direction: forward reads x and w and writes y;
/// backward_data reads dy and w and writes dx; backward_weights reads x and dy and writes dw.
/// Workspace may be null when the solver's workspace_bytes() is 0. The forward fields come first,
/// so a forward call reads `ConvArgs{x, w, y, workspace, workspace_bytes}`.
struct ConvArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  void* y = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  const void* dy = nullptr;
  void* dx = nullptr;
  void* dw = nullptr;
  const void* bias = nullptr;      ///< forward with epilogue.bias: K values in the problem's dtype
  const void* residual = nullptr;  ///< forward with epilogue.residual: shaped as y, must not overlap y
  /// Forward: where a solver may keep w in its own form across calls (prepared_weights.hpp); null:
  /// none, the solver prepares w on every call. Held by the call's stream task while it runs.
  std::shared_ptr<PreparedWeights> prepared = nullptr;

  static ConvArgs from(const OpArgs& args);
};

/// What a fused forward convolution does to its result before storing it, as cuDNN's
/// ConvolutionBiasActivationForward with alpha1 = alpha2 = 1 and z = the residual:
///   y = activation(conv(x, w) + bias[k] + residual)
/// computed in f32 (or better) and rounded to the dtype once. Each part may be absent; an empty
/// epilogue is a plain convolution (same key, same find-db rows).
struct ConvEpilogue {
  bool bias = false;      ///< add bias[k]: one value per output channel, a [K] tensor (ArgId::bias)
  bool residual = false;  ///< add a tensor shaped as y (ArgId::src1), e.g. a ResNet shortcut
  std::optional<Activation> activation{};  ///< applied last, with PyTorch's definitions
  double alpha = 0;  ///< the activation's parameters as ActivProblem's (leaky_relu's slope, clip's
  double beta = 0;   ///< bounds, elu's alpha); unused ones must be 0, so one problem has one key

  bool empty() const { return !bias && !residual && !activation; }
  /// "bias + residual + relu", "leaky_relu(alpha 0.01)"; "none" when empty. For messages.
  std::string describe() const;
  /// The epilogue with `activation` and its PyTorch default parameters.
  static ConvEpilogue with(Activation activation, bool bias = false, bool residual = false);

  friend bool operator==(const ConvEpilogue&, const ConvEpilogue&) = default;
};

/// A convolution problem. Build it with designated initialisers, e.g.
/// `ConvProblem{.n = 32, .c = 64, .h = 56, .w = 56, .k = 64, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1}`;
/// the output size is inferred. Weights are K x (C/g) x y x x (KCYX for nchw, KYXC for nhwc).
struct ConvProblem {
  static constexpr OpKind kKind = OpKind::conv;
  using Args = ConvArgs;

  std::int64_t n = 1, c = 1, h = 1, w = 1;      ///< input batch, channels, height, width
  std::int64_t k = 1;                           ///< output channels
  std::int64_t y = 1, x = 1;                    ///< filter height, width
  std::int64_t pad_h = 0, pad_w = 0;            ///< -p -q
  std::int64_t stride_h = 1, stride_w = 1;      ///< -u -v
  std::int64_t dilation_h = 1, dilation_w = 1;  ///< -l -j
  std::int64_t groups = 1;                      ///< -g; depthwise when groups == c
  DType dtype = DType::f32;
  Layout layout = Layout::nchw;
  ConvDirection direction = ConvDirection::forward;
  ConvEpilogue epilogue{};  ///< forward only; empty: a plain convolution

  std::int64_t out_h() const;
  std::int64_t out_w() const;
  bool is_depthwise() const { return groups == c && groups > 1; }
  bool has_epilogue() const { return !epilogue.empty(); }
  /// The same problem without its epilogue: what a plain convolution solver computes.
  ConvProblem plain() const {
    ConvProblem p = *this;
    p.epilogue = {};
    return p;
  }
  /// For Solver<ConvProblem>::check_any: the epilogue's description ("fused epilogue bias + relu")
  /// when there is one, else empty. Solvers that do not declare implements_fused_parts() refuse it.
  std::string fused_parts() const;

  /// Throws Error(invalid_argument) naming the field: non-positive sizes, C or K not divisible by
  /// groups, an empty output, element counts that overflow; an epilogue on a backward direction,
  /// an activation's unused parameter that is not 0, a non-finite parameter, clip's alpha > beta.
  void validate() const;

  /// Packed descriptors of x (input), w (weights) and y (output) in `layout`.
  TensorDesc x_desc() const;
  TensorDesc w_desc() const;
  TensorDesc y_desc() const;
  /// Throws Error(invalid_argument) naming the tensor when x/w/y do not match this problem.
  void check_tensors(const TensorDesc& x, const TensorDesc& w, const TensorDesc& y) const;

  /// The tensors a call of this problem's direction reads and writes, in the problem's layout:
  /// forward {src x, wei w -> dst y}, backward_data {diff_dst dy, wei w -> diff_src dx},
  /// backward_weights {src x, diff_dst dy -> diff_wei dw}. A forward epilogue adds bias (ArgId::bias,
  /// [K] in the problem's dtype) and the residual (ArgId::src1, y's descriptor) as inputs.
  std::vector<TensorArg> tensors() const;

  /// Multiply-adds x 2: 2*N*K*Ho*Wo*(C/g)*y*x.
  double flops() const;
  /// Bytes of x + w + y (+ bias + residual), the least traffic any implementation needs.
  double min_bytes() const;
  /// conv_tolerance(*this): 1e-5 for f32 (widened for long sums and bounded epilogue activations),
  /// 1e-2 for f16/bf16.
  double tolerance() const;

  /// Canonical key, identical on every backend and parsed back exactly by parse_key, e.g.
  /// "conv-F-f32-nchw-n32-c64-h56-w56-k64-y3-x3-p1-q1-u1-v1-l1-j1-g1". An epilogue appends its
  /// parts in this order, each only when present: "-bias", "-res", then the activation as the
  /// activ key writes it, "-<name>-a<alpha>-b<beta>" ('m' for a minus sign), e.g.
  /// "conv-F-f16-nhwc-...-g1-bias-res-relu-a0-b0" or "...-g1-bias-clip-a0-b6".
  std::string key() const;
  static ConvProblem parse_key(std::string_view key);

  /// MIOpenDriver-style flags: "-n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -g 1".
  std::string driver_flags() const;
  /// Parses a line of shared/bench/conv_problems.txt syntax ("conv -n 32 ... # tag"); the leading
  /// "conv"/"convfp16"/"convbfp16" word and a trailing comment are optional. Unknown flags throw.
  /// `-F 1` (forward) is accepted. `tag`, when given, receives the text after '#', trimmed.
  static ConvProblem parse_driver_line(std::string_view line, std::string* tag = nullptr);

  /// "galley bench conv -n 32 ... -g 1 -F 1 --dtype f32 --layout nchw --device cpu [--bias] [--residual]
  /// [--activ NAME --alpha A --beta B] [--solver NAME]":
  /// the command that reproduces one call (GALLEY_LOG_CMD prints it for every call).
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;

  /// Hash of every field, for per-call caches keyed by the problem itself: formatting key() costs
  /// about a microsecond, as much as a whole cache lookup may. Not stable across builds.
  std::size_t hash() const noexcept;

  friend bool operator==(const ConvProblem&, const ConvProblem&) = default;
};

/// ConvProblem::hash() as a function object, for unordered containers.
struct ConvProblemHash {
  std::size_t operator()(const ConvProblem& p) const noexcept { return p.hash(); }
};

}  // namespace galley::dnn
