// One batch normalisation problem (spatial mode: statistics per channel over N, H and W), in the
// three forms a network runs: inference with running statistics, training forward with batch
// statistics, and backward. Flags follow MIOpenDriver's bnorm (-n -c -H -W).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "galley/core/dtype.hpp"
#include "galley/dnn/norm_args.hpp"
#include "galley/dnn/op.hpp"
#include "galley/dnn/tensor.hpp"
#include "galley/runtime/device.hpp"

namespace galley::dnn {

/// Where the statistics come from: the running estimates (inference, "eval" in PyTorch) or the
/// batch itself (training, which also updates the running estimates).
enum class BatchNormMode : std::uint8_t { inference, training };
const char* to_string(BatchNormMode mode) noexcept;

/// y = (x - mean) / sqrt(var + epsilon) * scale + shift, per channel, for a packed 4-D tensor x in
/// `layout` of `dtype` (f32, f16 or bf16); scale, shift and every statistic are f32 vectors of c.
///
/// - forward, inference: mean/var are the running statistics (inputs).
/// - forward, training: mean/var are the batch's (biased variance); saved_mean and saved_invstd =
///   1/sqrt(var + epsilon) are written for backward, and the running statistics are updated in
///   place as PyTorch does: running = (1 - momentum) * running + momentum * batch, the variance
///   unbiased (times M/(M-1), M = n*h*w).
/// - backward (training): from dy, x, scale, saved_mean and saved_invstd, writes
///   dx = scale * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), dscale = sum(dy * xhat),
///   dshift = sum(dy), where xhat = (x - saved_mean) * saved_invstd and sums run over n, h, w.
///
/// Build it with designated initialisers: `BatchNormProblem{.n = 32, .c = 64, .h = 56, .w = 56}`.
struct BatchNormProblem {
  static constexpr OpKind kKind = OpKind::bnorm;
  using Args = NormArgs;

  std::int64_t n = 1, c = 1, h = 1, w = 1;
  DType dtype = DType::f32;
  Layout layout = Layout::nchw;
  BatchNormMode mode = BatchNormMode::training;
  NormDirection direction = NormDirection::forward;
  double epsilon = 1e-5;
  double momentum = 0.1;

  /// Values per channel, n*h*w.
  std::int64_t reduce_size() const { return n * h * w; }

  /// Throws Error(invalid_argument) naming the field: non-positive sizes, a dtype other than f32,
  /// f16 or bf16, epsilon not finite and > 0, momentum outside [0, 1], backward in inference mode,
  /// training with one value per channel (no unbiased variance), element counts that overflow.
  void validate() const;

  /// The data tensor (x, y, dx, dy) and a per-channel f32 vector (scale, shift, statistics).
  TensorDesc data_desc() const;
  TensorDesc channel_desc() const;

  /// inference: {src x, scale, shift, mean, variance -> dst y};
  /// training forward: {src x, scale, shift -> dst y, saved_mean, saved_invstd, mean and variance
  /// (running, read and written)}; backward: {diff_dst dy, src x, scale, saved_mean, saved_invstd
  /// -> diff_src dx, diff_scale, diff_shift}.
  std::vector<TensorArg> tensors() const;

  /// Arithmetic per element (inference 2, training forward 8, backward 11), times n*c*h*w.
  double flops() const;
  /// Every tensor of tensors() once, the running statistics of training twice (read and written).
  double min_bytes() const;
  /// 1e-5 (inference) or 1e-4 (the sums of training and backward) for f32; 1e-2 for f16/bf16.
  double tolerance() const;

  /// Canonical key, parsed back exactly by parse_key, e.g.
  /// "bnorm-F-train-f32-nchw-n32-c64-h56-w56-e0.00001-m0.1".
  std::string key() const;
  static BatchNormProblem parse_key(std::string_view key);

  /// "galley bench bnorm -n 32 -c 64 -H 56 -W 56 -F 1 -b 0 --epsilon 0.00001 --momentum 0.1
  /// --dtype f32 --layout nchw --device cpu [--solver NAME]".
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;

  std::size_t hash() const noexcept;

  friend bool operator==(const BatchNormProblem&, const BatchNormProblem&) = default;
};

}  // namespace galley::dnn
