// Binary elementwise ops with NumPy broadcasting (add, sub, mul, div), forward and backward: the
// problem, its solvers' typed names and the user entry points.
//
// dst = (alpha * a) op (beta * b), where a and b are tensors of any rank 1..6 whose shapes
// broadcast as NumPy's do: trailing dims are aligned, and each pair of dims must be equal or one of
// them 1; dst has the broadcast shape. Bias add is `add` with b shaped 1xCx1x1 (or [C] against a
// row-major [..., C]); a scalar scale is `mul` by a b of shape [1], or alpha with beta = 0 under
// `add` (b is then still read, once per element, so a [1]-shaped b costs nothing).
// Backward gives the gradients of both inputs, each summed over the axes along which that input
// was broadcast, so da has a's shape and db has b's.
#pragma once

#include <cstddef>
#include <cstdint>
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

enum class EltwiseOp : std::uint8_t { add, sub, mul, div };
/// "add", "sub", "mul", "div".
const char* to_string(EltwiseOp op) noexcept;
/// The op named `name`; throws Error(invalid_argument) naming it and the valid names.
EltwiseOp parse_eltwise_op(std::string_view name);

enum class EltwiseDirection : std::uint8_t { forward, backward };

/// Device pointers of one call. Forward reads a, b and writes dst (dst may be a itself, or b,
/// when that input has dst's shape). Backward reads dy (and a and b for mul and div) and writes da
/// and db.
struct EltwiseArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* dst = nullptr;
  const void* dy = nullptr;
  void* da = nullptr;
  void* db = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;

  static EltwiseArgs from(const OpArgs& args);
};

/// One binary elementwise problem, e.g.
/// `EltwiseProblem{.op = EltwiseOp::add, .a = {32, 256, 56, 56}, .b = {1, 256, 1, 1}}`.
struct EltwiseProblem {
  static constexpr OpKind kKind = OpKind::eltwise;
  using Args = EltwiseArgs;

  EltwiseOp op = EltwiseOp::add;
  std::vector<std::int64_t> a{1};  ///< shape of a (src), logical order, rank 1..6
  std::vector<std::int64_t> b{1};  ///< shape of b (src1), logical order, rank 1..6
  float alpha = 1.0f;              ///< scales a before the op
  float beta = 1.0f;               ///< scales b before the op
  DType dtype = DType::f32;
  /// nchw: every tensor is row-major in its own shape. nhwc: a, b and dst are rank 4 in logical
  /// N, C, H, W order, stored channels-last (both inputs must then be rank 4).
  Layout layout = Layout::nchw;
  EltwiseDirection direction = EltwiseDirection::forward;

  /// The broadcast shape of a and b; throws Error(invalid_argument) naming both shapes when they
  /// do not broadcast.
  std::vector<std::int64_t> dst_shape() const;

  /// Throws Error(invalid_argument) naming the field: ranks outside 1..6, non-positive dims,
  /// shapes that do not broadcast, nhwc with an input of rank other than 4, alpha or beta not
  /// finite, a dtype other than f32/f16/bf16, element counts that overflow.
  void validate() const;

  /// Descriptors of a, b and dst (dy, da, db have the shapes of dst, a, b).
  TensorDesc a_desc() const;
  TensorDesc b_desc() const;
  TensorDesc dst_desc() const;

  /// forward {src a, src1 b -> dst}; backward {diff_dst dy (+ src a, src1 b for mul and div) ->
  /// diff_src da, diff_src1 db}. A divisor is filled with positive values for tests and benches.
  std::vector<TensorArg> tensors() const;

  /// One op per dst element forward; backward 2 (add, sub) or 4 (mul, div) per dy element.
  double flops() const;
  /// Every tensor of tensors() once.
  double min_bytes() const;
  /// 1e-5 for f32 (widened by sqrt(n / 1024) for a backward that sums n > 1024 terms into one
  /// gradient element), 1e-2 for f16/bf16.
  double tolerance() const;

  /// "eltwise-F-add-f32-nchw-a32x256x56x56-b1x256x1x1-al1-be1"; parse_key reads it back exactly
  /// (alpha and beta in shortest round-trip form).
  std::string key() const;
  static EltwiseProblem parse_key(std::string_view key);
  /// "galley bench eltwise --op add --shape 32x256x56x56 --shape1 1x256x1x1 -F 1 --dtype f32
  /// --layout nchw --device cpu [--alpha A] [--beta B] [--solver NAME]".
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;
  std::size_t hash() const noexcept;

  friend bool operator==(const EltwiseProblem&, const EltwiseProblem&) = default;
};

/// "32x256x56x56" for a shape; parse_shape reads it back (throws Error(invalid_argument) naming
/// `what` and the text when it is not 1..6 positive decimal dims joined by 'x').
std::string shape_text(const std::vector<std::int64_t>& shape);
std::vector<std::int64_t> parse_shape(std::string_view text, std::string_view what);

using EltwiseSolver = Solver<EltwiseProblem>;

// Entry points. Tensors are memory of stream.device() with exactly the problem's descriptors
// (a_desc(), b_desc(), dst_desc()); a mismatch is Error(invalid_argument) naming the tensor. With
// `solver` null the tuner chooses. They return before the work is done, as every stream op, and
// return the solver that ran. The problem's direction may be left forward or name the entry
// point's own.

/// dst = (alpha * a) op (beta * b). dst may be a (or b) itself when that input has dst's shape.
const EltwiseSolver& eltwise_forward(runtime::Stream& stream, const EltwiseProblem& problem, const Tensor& a,
                                     const Tensor& b, Tensor& dst, const EltwiseSolver* solver = nullptr,
                                     CallReport* report = nullptr);

/// da, db = the gradients of sum(dy * dst) with respect to a and b, each summed over the axes its
/// input was broadcast along. a and b are read by mul and div only; add and sub ignore them (they
/// may be empty tensors then).
const EltwiseSolver& eltwise_backward(runtime::Stream& stream, const EltwiseProblem& problem,
                                      const Tensor& dy, const Tensor& a, const Tensor& b, Tensor& da,
                                      Tensor& db, const EltwiseSolver* solver = nullptr,
                                      CallReport* report = nullptr);

}  // namespace galley::dnn
