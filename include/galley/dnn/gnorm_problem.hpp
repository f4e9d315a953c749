// One group normalisation problem (PyTorch's nn.GroupNorm over a 4-D activation): statistics per
// image and group of channels, affine per channel.
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

/// x is a packed 4-D tensor in `layout` of `dtype` (f32, f16 or bf16); its c channels form
/// `groups` groups of c/groups consecutive channels. Each (image, group) is normalised over its
/// c/groups * h * w values: y = (x - mean) * invstd * scale[c] + shift[c], invstd =
/// 1/sqrt(var + epsilon) (biased variance). Forward writes y and saved_mean/saved_invstd (f32,
/// n x groups); backward reads dy, x, scale and the saved statistics and writes dx, dscale and
/// dshift (f32 vectors of c, summed over images and pixels).
struct GroupNormProblem {
  static constexpr OpKind kKind = OpKind::gnorm;
  using Args = NormArgs;

  std::int64_t n = 1, c = 1, h = 1, w = 1;
  std::int64_t groups = 1;
  DType dtype = DType::f32;
  Layout layout = Layout::nchw;
  NormDirection direction = NormDirection::forward;
  double epsilon = 1e-5;

  std::int64_t channels_per_group() const { return c / groups; }
  /// Values per (image, group): c/groups * h * w.
  std::int64_t group_size() const { return channels_per_group() * h * w; }

  /// Throws Error(invalid_argument) naming the field: non-positive sizes or groups, groups not
  /// dividing c, a dtype other than f32/f16/bf16, epsilon not finite and > 0, overflowing counts.
  void validate() const;

  TensorDesc data_desc() const;
  /// scale, shift, dscale, dshift: f32 of c.
  TensorDesc channel_desc() const;
  /// saved_mean, saved_invstd: f32 n x groups.
  TensorDesc stat_desc() const;

  /// forward {src x, scale, shift -> dst y, saved_mean, saved_invstd};
  /// backward {diff_dst dy, src x, scale, saved_mean, saved_invstd -> diff_src dx, diff_scale, diff_shift}.
  std::vector<TensorArg> tensors() const;

  double flops() const;
  double min_bytes() const;
  /// 1e-4 for f32, 1e-2 for f16/bf16.
  double tolerance() const;

  /// Canonical key, parsed back exactly, e.g. "gnorm-F-f32-nchw-n8-c64-h28-w28-g32-e0.00001".
  std::string key() const;
  static GroupNormProblem parse_key(std::string_view key);

  /// "galley bench gnorm -n 8 -c 64 -H 28 -W 28 -g 32 -F 1 --epsilon 0.00001 --dtype f32
  /// --layout nchw --device cpu".
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;

  std::size_t hash() const noexcept;

  friend bool operator==(const GroupNormProblem&, const GroupNormProblem&) = default;
};

}  // namespace galley::dnn
