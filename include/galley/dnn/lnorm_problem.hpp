// One layer normalisation problem: statistics per row over the trailing axes of a row-major
// tensor, with an elementwise affine transform (PyTorch's nn.LayerNorm, MIOpen's layernorm).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "galley/core/dtype.hpp"
#include "galley/dnn/norm_args.hpp"
#include "galley/dnn/op.hpp"
#include "galley/dnn/tensor.hpp"
#include "galley/runtime/device.hpp"

namespace galley::dnn {

/// x is a contiguous tensor of `rank` dims (1 to kMaxRank) of `dtype` (f32, f16 or bf16). The
/// normalised shape is dims[axis..rank): every "row" (one index of dims[0..axis)) is normalised
/// over its `inner()` elements, y = (x - mean) * invstd * scale + shift with invstd =
/// 1/sqrt(var + epsilon) (biased variance), and scale/shift are f32 tensors of the normalised
/// shape. Forward writes y, saved_mean and saved_invstd (f32, one per row, shaped dims[0..axis),
/// or {1} when axis is 0). Backward reads dy, x, scale and the saved statistics and writes dx,
/// dscale = sum over rows of dy * xhat and dshift = sum over rows of dy.
struct LayerNormProblem {
  static constexpr OpKind kKind = OpKind::lnorm;
  using Args = NormArgs;

  int rank = 2;
  Dims dims{1, 1, 1, 1, 1, 1};
  int axis = 1;  ///< first normalised dim (MIOpen's normalized_dim)
  DType dtype = DType::f32;
  NormDirection direction = NormDirection::forward;
  double epsilon = 1e-5;

  /// A problem over `shape` normalised over its last `normalized_dims` dims.
  static LayerNormProblem of(std::initializer_list<std::int64_t> shape, int normalized_dims,
                             DType dtype = DType::f32);

  /// Rows (product of dims[0..axis)) and elements per row (product of dims[axis..rank)).
  std::int64_t outer() const;
  std::int64_t inner() const;

  /// Throws Error(invalid_argument) naming the field: rank outside 1..kMaxRank, non-positive dims,
  /// axis outside [0, rank), dims past rank not 1, a dtype other than f32/f16/bf16, epsilon not
  /// finite and > 0, element counts that overflow.
  void validate() const;

  TensorDesc data_desc() const;
  /// scale, shift, dscale, dshift: f32 of the normalised shape.
  TensorDesc affine_desc() const;
  /// saved_mean, saved_invstd: f32 of dims[0..axis), {1} when axis is 0.
  TensorDesc stat_desc() const;

  /// forward {src x, scale, shift -> dst y, saved_mean, saved_invstd};
  /// backward {diff_dst dy, src x, scale, saved_mean, saved_invstd -> diff_src dx, diff_scale, diff_shift}.
  std::vector<TensorArg> tensors() const;

  double flops() const;
  double min_bytes() const;
  /// 1e-4 for f32 (sums over rows and columns), 1e-2 for f16/bf16.
  double tolerance() const;

  /// Canonical key, parsed back exactly, e.g. "lnorm-F-f32-d8x197x768-a2-e0.00001".
  std::string key() const;
  static LayerNormProblem parse_key(std::string_view key);

  /// "galley bench lnorm -X 8x197x768 -o 2 -F 1 --epsilon 0.00001 --dtype f32 --device cpu".
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;

  std::size_t hash() const noexcept;

  friend bool operator==(const LayerNormProblem&, const LayerNormProblem&) = default;
};

}  // namespace galley::dnn
