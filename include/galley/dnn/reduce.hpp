// Sum and mean over a set of axes of a tensor, forward and backward: the problem type and the entry
// points taking galley::Tensor. This is the backward of broadcasting and of global pooling.
//
//   auto p = galley::dnn::ReduceProblem::over(x.desc(), {2, 3}, galley::dnn::ReduceOp::mean);
//   galley::dnn::reduce_forward(stream, p, x, y);  // y is N x C x 1 x 1
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

enum class ReduceOp : std::uint8_t { sum, mean };
/// "sum", "mean"
const char* to_string(ReduceOp op) noexcept;
/// "sum" or "mean"; throws Error(invalid_argument) naming the text otherwise.
ReduceOp parse_reduce_op(std::string_view text);

/// Device pointers of one reduce call. Forward reads src and writes dst; backward reads diff_dst
/// (shaped as dst) and writes diff_src (shaped as src).
struct ReduceArgs {
  const void* src = nullptr;
  void* dst = nullptr;
  const void* diff_dst = nullptr;
  void* diff_src = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;

  static ReduceArgs from(const OpArgs& args);
};

/// Sum or mean of a row-major tensor of `rank` dims (1 to kMaxRank) over the axes whose bits are
/// set in `axes` (bit i: axis i). The output keeps every dim, with size 1 on the reduced axes
/// (keepdims). Sums accumulate in f32 or wider whatever the storage dtype. Backward broadcasts
/// diff_dst over the reduced axes (times 1 / count for mean) into diff_src.
struct ReduceProblem {
  static constexpr OpKind kKind = OpKind::reduce;
  using Args = ReduceArgs;

  int rank = 4;
  Dims dims{1, 1, 1, 1, 1, 1};  ///< dims of src; entries past `rank` are 1
  unsigned axes = 0;            ///< bit i set: axis i is reduced; at least one bit, all below `rank`
  ReduceOp op = ReduceOp::sum;
  DType dtype = DType::f32;
  bool backward = false;

  /// The problem over a contiguous tensor `desc` and a list of axes (negative ones count from the
  /// last dim). Throws Error(invalid_argument) naming an axis out of range, a duplicate axis, an
  /// empty list or a tensor that is not contiguous.
  static ReduceProblem over(const TensorDesc& desc, const std::vector<int>& axes, ReduceOp op = ReduceOp::sum,
                            bool backward = false);
  /// The mask of `axes` for `rank`, with the same errors as over().
  static unsigned axis_mask(const std::vector<int>& axes, int rank);

  bool reduces(int axis) const { return (axes >> axis) & 1u; }
  /// The axes as a list, ascending.
  std::vector<int> axis_list() const;
  TensorDesc src_desc() const;
  /// src's dims with 1 on every reduced axis.
  TensorDesc dst_desc() const;
  std::int64_t src_elements() const;
  std::int64_t dst_elements() const;
  /// Elements summed into each output: src_elements() / dst_elements().
  std::int64_t reduced_count() const;

  /// Throws Error(invalid_argument) naming the field: rank outside 1..6, a non-positive dim, no
  /// axis, an axis at or past the rank, a dtype other than f32/f16/bf16, overflow.
  void validate() const;

  /// forward {src -> dst}; backward {diff_dst -> diff_src}.
  std::vector<TensorArg> tensors() const;

  /// One add per src element (forward), one multiply per diff_src element (backward).
  double flops() const;
  double min_bytes() const;
  /// 1e-5 (f32) or 1e-2 (f16, bf16), widened for f32 by sqrt(reduced_count / 1024).
  double tolerance() const;

  /// "reduce-F-f32-sum-a1.2-s2x3x4x5", parsed back exactly by parse_key.
  std::string key() const;
  static ReduceProblem parse_key(std::string_view key);
  /// "galley bench reduce --shape 2x3x4x5 --axes 1,2 --op sum -F 1 --dtype f32 --device cpu".
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;
  std::size_t hash() const noexcept;

  friend bool operator==(const ReduceProblem&, const ReduceProblem&) = default;
};

/// The problem coalesced for kernels: adjacent axes of equal kind merged and size-1 axes dropped,
/// leaving alternating kept and reduced groups in memory order, outermost first.
struct ReduceGroups {
  int count = 0;
  std::int64_t size[kMaxRank] = {};
  bool reduced[kMaxRank] = {};
  static ReduceGroups of(const ReduceProblem& problem);
};

// The entry points. The problem's `backward` may be left false or name the entry point's own
// direction, else Error(invalid_argument). Tensors are checked against the problem (device, dtype,
// dims, strides, storage size) and a mismatch is Error(invalid_argument) naming the tensor. With
// `solver` null the tuner chooses. Each returns the solver that ran, before the work is done.

/// dst = sum (or mean) of src over problem.axes; dst has src's dims with 1 on the reduced axes.
const SolverBase& reduce_forward(runtime::Stream& stream, const ReduceProblem& problem, const Tensor& src,
                                 Tensor& dst, const SolverBase* solver = nullptr,
                                 CallReport* report = nullptr);
/// diff_src = diff_dst broadcast over the reduced axes (times 1 / reduced_count() for mean).
const SolverBase& reduce_backward(runtime::Stream& stream, const ReduceProblem& problem,
                                  const Tensor& diff_dst, Tensor& diff_src,
                                  const SolverBase* solver = nullptr, CallReport* report = nullptr);

}  // namespace galley::dnn
