// Softmax and log-softmax over one axis of a tensor, forward and backward: the problem type and the
// entry points taking galley::Tensor.
//
//   auto p = galley::dnn::SoftmaxProblem::over(logits.desc(), /*axis=*/-1);
//   galley::dnn::softmax_forward(stream, p, logits, probs);
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

enum class SoftmaxAlgorithm : std::uint8_t {
  softmax,      ///< y = exp(x - max) / sum(exp(x - max))
  log_softmax,  ///< y = x - max - log(sum(exp(x - max)))
};
/// "softmax", "logsoftmax"
const char* to_string(SoftmaxAlgorithm algorithm) noexcept;

/// Device pointers of one softmax call. Forward reads src and writes dst; backward reads diff_dst
/// and dst (the forward's output) and writes diff_src.
struct SoftmaxArgs {
  const void* src = nullptr;
  void* dst = nullptr;
  const void* diff_dst = nullptr;
  void* diff_src = nullptr;

  static SoftmaxArgs from(const OpArgs& args);
};

/// Softmax or log-softmax along `axis` of a densely packed tensor of `rank` dims (1 to kMaxRank).
/// A rank-4 tensor holds logical N, C, H, W dims and may be packed nchw or nhwc (channels last);
/// any other rank is row-major, which `layout` nchw stands for. Every axis of every layout is
/// allowed. Results are stable for any finite input (the row's maximum is subtracted first) and
/// follow PyTorch for infinities: -inf inputs get probability 0 (log-softmax -inf), a row of only
/// -inf or any +inf or NaN gives NaN.
struct SoftmaxProblem {
  static constexpr OpKind kKind = OpKind::softmax;
  using Args = SoftmaxArgs;

  int rank = 4;
  Dims dims{1, 1, 1, 1, 1, 1};  ///< logical dims; entries past `rank` are 1
  int axis = 1;                 ///< in [0, rank)
  SoftmaxAlgorithm algorithm = SoftmaxAlgorithm::softmax;
  DType dtype = DType::f32;
  Layout layout = Layout::nchw;
  bool backward = false;

  /// The problem over a tensor `desc` (contiguous, or rank 4 packed nchw or nhwc); `axis` may be
  /// negative, counting from the last dim as in PyTorch. Throws Error(invalid_argument) naming the
  /// tensor or the axis when they do not fit.
  static SoftmaxProblem over(const TensorDesc& desc, int axis,
                             SoftmaxAlgorithm algorithm = SoftmaxAlgorithm::softmax, bool backward = false);

  /// The descriptor of src, dst, diff_dst and diff_src alike.
  TensorDesc desc() const;
  /// The tensor in memory order as [outer, axis_size, inner]: `inner` is the stride of the axis.
  std::int64_t outer() const;
  std::int64_t axis_size() const;
  std::int64_t inner() const;
  std::int64_t elements() const;

  /// Throws Error(invalid_argument) naming the field: rank outside 1..6, a non-positive dim, the
  /// axis out of range, nhwc for a rank other than 4, a dtype other than f32/f16/bf16, overflow.
  void validate() const;

  /// forward {src -> dst}; backward {diff_dst, dst -> diff_src}.
  std::vector<TensorArg> tensors() const;

  /// 5 per element forward (max, subtract, exp, sum, scale), 4 backward (product, sum, subtract, scale).
  double flops() const;
  /// Bytes of every input read once plus every output written once.
  double min_bytes() const;
  /// 1e-5 (f32) or 1e-2 (f16, bf16), widened for f32 by sqrt(axis_size / 1024), the growth of a
  /// correct f32 sum's rounding.
  double tolerance() const;

  /// "softmax-F-f32-nchw-softmax-a1-s2x3x4x5", parsed back exactly by parse_key.
  std::string key() const;
  static SoftmaxProblem parse_key(std::string_view key);
  /// "galley bench softmax --shape 2x3x4x5 --axis 1 -F 1 --dtype f32 --layout nchw --device cpu".
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;
  std::size_t hash() const noexcept;

  friend bool operator==(const SoftmaxProblem&, const SoftmaxProblem&) = default;
};

// The entry points. The problem's `backward` may be left false or name the entry point's own
// direction, else Error(invalid_argument). Tensors are checked against the problem (device, dtype,
// dims, strides, storage size) and a mismatch is Error(invalid_argument) naming the tensor. With
// `solver` null the tuner chooses. Each returns the solver that ran, before the work is done.

/// dst = softmax(src) (or log-softmax) along problem.axis.
const SolverBase& softmax_forward(runtime::Stream& stream, const SoftmaxProblem& problem, const Tensor& src,
                                  Tensor& dst, const SolverBase* solver = nullptr,
                                  CallReport* report = nullptr);
/// diff_src from diff_dst and the forward's output dst: dst * (diff_dst - sum(diff_dst * dst)) for
/// softmax, diff_dst - exp(dst) * sum(diff_dst) for log-softmax, the sums along the axis.
const SolverBase& softmax_backward(runtime::Stream& stream, const SoftmaxProblem& problem,
                                   const Tensor& diff_dst, const Tensor& dst, Tensor& diff_src,
                                   const SolverBase* solver = nullptr, CallReport* report = nullptr);

}  // namespace galley::dnn
