// Elementwise activations (relu, gelu, silu, ...), forward and backward: the problem, its key, and
// the entry points for users. Definitions follow PyTorch's exactly, including the derivative it
// takes at each kink (relu'(0) = 0), so a model trained here matches one trained there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "galley/core/dtype.hpp"
#include "galley/dnn/op.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/dnn/tensor.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "galley/tensor.hpp"

namespace galley::dnn {

/// The activation functions, with PyTorch's definitions. Parameters (ActivProblem::alpha, beta):
///   relu          max(x, 0)
///   leaky_relu    x > 0 ? x : alpha * x                  alpha: negative slope (PyTorch's 0.01)
///   clip          min(max(x, alpha), beta)               alpha <= beta: bounds; relu6 is clip 0..6,
///                                                        PyTorch's hardtanh is clip -1..1
///   elu           x > 0 ? x : alpha * (exp(x) - 1)       alpha: PyTorch's 1
///   sigmoid       1 / (1 + exp(-x))
///   tanh          tanh(x)
///   gelu_erf      x * (1 + erf(x / sqrt(2))) / 2         PyTorch's gelu(approximate='none')
///   gelu_tanh     x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) / 2   approximate='tanh'
///   silu          x * sigmoid(x)
///   hardswish     x * relu6(x + 3) / 6
///   hardsigmoid   relu6(x + 3) / 6
/// A function's unused parameters must be 0, so one problem has one key.
enum class Activation : std::uint8_t {
  relu,
  leaky_relu,
  clip,
  elu,
  sigmoid,
  tanh,
  gelu_erf,
  gelu_tanh,
  silu,
  hardswish,
  hardsigmoid,
};
inline constexpr std::size_t kActivationCount = 11;
/// "relu", "leaky_relu", "clip", ..., the names parse_activation() reads.
const char* to_string(Activation activation) noexcept;
/// The activation named `name` (as to_string writes it); throws Error(invalid_argument) naming the
/// text and every valid name.
Activation parse_activation(std::string_view name);
/// How many of (alpha, beta) the activation uses: 0 (relu, sigmoid, ...), 1 (leaky_relu, elu:
/// alpha) or 2 (clip: alpha and beta).
int parameter_count(Activation activation) noexcept;
/// PyTorch's default alpha and beta: leaky_relu 0.01, clip 0 and 6 (relu6), elu 1, else 0.
double default_alpha(Activation activation) noexcept;
double default_beta(Activation activation) noexcept;
/// True when the backward reads the forward's output y instead of its input x, as PyTorch's does
/// for relu, sigmoid and tanh (so an in-place forward, which overwrites x, can still be undone).
bool backward_reads_dst(Activation activation) noexcept;

enum class ActivDirection { forward, backward };
const char* to_string(ActivDirection direction) noexcept;

/// Device pointers of one activation call. Forward reads x and writes y; backward reads dy and x
/// (or y, see backward_reads_dst) and writes dx. In place is allowed: y may be x, and dx may be dy.
struct ActivArgs {
  const void* x = nullptr;
  void* y = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;

  static ActivArgs from(const OpArgs& args);
};

/// One activation problem: the function and its parameters, the direction, the dtype and the shape.
/// The tensor is either 4-D (N, C, H, W) packed in `layout`, or row-major packed of any rank from
/// 1 to kMaxRank (then `layout` is nchw, meaning row-major). An activation is elementwise, so the
/// layout changes nothing but the key and the descriptors. Build one with packed() or contiguous(),
/// or with designated initialisers.
struct ActivProblem {
  static constexpr OpKind kKind = OpKind::activ;
  using Args = ActivArgs;

  Activation activation = Activation::relu;
  double alpha = 0;  ///< leaky_relu's slope, clip's lower bound, elu's alpha; else 0
  double beta = 0;   ///< clip's upper bound; else 0
  ActivDirection direction = ActivDirection::forward;
  DType dtype = DType::f32;
  int rank = 4;
  Dims dims{1, 1, 1, 1, 1, 1};  ///< entries at and past `rank` are 1
  Layout layout = Layout::nchw;  ///< nhwc only for rank 4

  /// A 4-D (n, c, h, w) problem in `layout` with the activation's default parameters.
  static ActivProblem packed(Activation activation, DType dtype, Layout layout, std::int64_t n, std::int64_t c,
                             std::int64_t h, std::int64_t w);
  /// A row-major problem of any rank with the activation's default parameters.
  static ActivProblem contiguous(Activation activation, DType dtype, std::initializer_list<std::int64_t> dims);
  /// The problem that runs `activation` on tensors like `desc`: packed NCHW/NHWC of rank 4, or
  /// row-major of any rank; another strided view throws Error(invalid_argument) naming it.
  static ActivProblem of(Activation activation, const TensorDesc& desc, double alpha, double beta,
                         ActivDirection direction = ActivDirection::forward);

  /// Elements in the tensor.
  std::int64_t elements() const;
  bool reads_dst() const { return backward_reads_dst(activation); }

  /// Throws Error(invalid_argument) naming the field: an unknown activation or direction, a dtype
  /// other than f32/f16/bf16, a rank outside 1..kMaxRank, a non-positive dim, an element count
  /// that overflows, nhwc with a rank other than 4, a non-finite or unused non-zero parameter,
  /// clip bounds with alpha > beta.
  void validate() const;

  /// The descriptor of x, y, dy and dx (they all have it).
  TensorDesc desc() const;
  /// forward {src x -> dst y}; backward {diff_dst dy, src x (or dst y) -> diff_src dx}.
  std::vector<TensorArg> tensors() const;

  /// One per element: activations are judged by bandwidth, not arithmetic.
  double flops() const;
  /// Forward: x read and y written; backward: dy and x (or y) read, dx written.
  double min_bytes() const;
  /// 1e-5 for f32, 2e-3 for f16, 1e-2 for bf16: one rounding of the output (a float against a
  /// double computation may round one ulp apart).
  double tolerance() const;

  /// Canonical key, parsed back exactly by parse_key. Parameters are written as the shortest text
  /// that reads back the same double, with 'm' for '-' (the key's separator):
  /// "activ-F-f32-nchw-leaky_relu-a0.01-b0-n32-c64-h56-w56" for rank 4,
  /// "activ-B-bf16-row-gelu_tanh-a0-b0-d7x129" for other ranks; clip -1..1 is "...-clip-am1-b1-...".
  std::string key() const;
  static ActivProblem parse_key(std::string_view key);

  /// "galley bench activ -m NAME -A alpha -B beta -n .. -c .. -H .. -W .. (or --shape 7,129) -F 1
  /// --dtype f32 --layout nchw --device cpu [--solver NAME]".
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;
  std::size_t hash() const noexcept;

  friend bool operator==(const ActivProblem&, const ActivProblem&) = default;
};

using ActivSolver = Solver<ActivProblem>;

// The entry points. Tensors are memory of stream.device() whose descriptors equal problem.desc();
// anything else is Error(invalid_argument) naming the tensor. `problem.direction` may be left
// forward for activation_backward, which sets it; a forward entry point refuses a backward problem.
// In place is allowed: y may be x itself (the same Tensor or one wrapping the same memory), and dx
// may be dy. With `solver` null the tuner chooses. Like every stream op they return before the
// work is done; each returns the solver that ran.

/// y = activation(x).
const ActivSolver& activation_forward(runtime::Stream& stream, const ActivProblem& problem, const Tensor& x,
                                      Tensor& y, const ActivSolver* solver = nullptr, CallReport* report = nullptr);
/// dx = dy * activation'(x). `saved` is x, or y (the forward's output) when
/// backward_reads_dst(problem.activation), as PyTorch keeps it.
const ActivSolver& activation_backward(runtime::Stream& stream, const ActivProblem& problem, const Tensor& dy,
                                       const Tensor& saved, Tensor& dx, const ActivSolver* solver = nullptr,
                                       CallReport* report = nullptr);

}  // namespace galley::dnn
