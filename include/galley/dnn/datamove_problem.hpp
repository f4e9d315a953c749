// The data-movement problems: concat and split along one axis, transpose (any permutation),
// constant padding and reorder (dtype and/or NCHW <-> NHWC). None computes anything: every solver
// must reproduce the reference bit for bit, except reorder, which rounds once to its target dtype.
//
// Shapes are lists of dims in logical order. `layout` nchw means row-major (the last dim has
// stride 1) for any rank 1..kMaxRank; nhwc is a rank-4 activation in logical N, C, H, W order
// packed channels-last. Each problem's backward is a problem of this family too (backward()):
// concat <-> split, transpose -> the inverse permutation, pad -> crop, reorder -> the reverse
// reorder.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "galley/core/dtype.hpp"
#include "galley/dnn/op.hpp"
#include "galley/dnn/tensor.hpp"
#include "galley/runtime/device.hpp"

namespace galley::dnn {

/// Device pointers of one data-movement call, from the role-keyed OpArgs: src and dst, and the
/// variadic tensors (concat's inputs, split's outputs) by multi_arg(i). Pad's backward reads
/// diff_dst into src and writes diff_src through dst.
struct DataMoveArgs {
  const void* src = nullptr;
  void* dst = nullptr;
  std::array<void*, kMaxMultiArgs> multi{};
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;

  static DataMoveArgs from(const OpArgs& args);
};

struct SplitProblem;

/// dst = the inputs multi_arg(0..N-1) laid end to end along `axis`. Every input has `dims` except
/// along `axis`, where input i has sizes[i]; dims[axis] is their sum (the output's extent).
/// `ConcatProblem{.dims = {8, 96, 28, 28}, .axis = 1, .sizes = {64, 32}}`
struct ConcatProblem {
  static constexpr OpKind kKind = OpKind::concat;
  using Args = DataMoveArgs;

  DType dtype = DType::f32;
  Layout layout = Layout::nchw;
  std::vector<std::int64_t> dims;   ///< the output's dims
  int axis = 0;                     ///< 0 <= axis < rank
  std::vector<std::int64_t> sizes;  ///< each input's extent along axis, 1..kMaxMultiArgs inputs

  int rank() const { return static_cast<int>(dims.size()); }
  std::size_t inputs() const { return sizes.size(); }
  /// Input i's descriptor and the output's.
  TensorDesc part_desc(std::size_t i) const;
  TensorDesc whole_desc() const;
  /// Throws Error(invalid_argument) naming the field: rank, a dim, axis out of range, a size, more
  /// than kMaxMultiArgs inputs, sizes not summing to dims[axis], nhwc with rank != 4.
  void validate() const;
  /// The gradient: diff_dst split into the inputs' gradients.
  SplitProblem backward() const;

  std::vector<TensorArg> tensors() const;
  double tolerance() const { return 0; }
  double flops() const { return 0; }
  double min_bytes() const;
  /// "concat-f32-nchw-a1-d8x96x28x28-s64.32"
  std::string key() const;
  static ConcatProblem parse_key(std::string_view key);
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;
  std::size_t hash() const noexcept;
  friend bool operator==(const ConcatProblem&, const ConcatProblem&) = default;
};

/// The outputs multi_arg(0..N-1) = src cut along `axis` into pieces of sizes[i]; the shape fields
/// mean what they mean for ConcatProblem, with `dims` the input's dims.
struct SplitProblem {
  static constexpr OpKind kKind = OpKind::split;
  using Args = DataMoveArgs;

  DType dtype = DType::f32;
  Layout layout = Layout::nchw;
  std::vector<std::int64_t> dims;
  int axis = 0;
  std::vector<std::int64_t> sizes;

  int rank() const { return static_cast<int>(dims.size()); }
  std::size_t outputs() const { return sizes.size(); }
  TensorDesc part_desc(std::size_t i) const;
  TensorDesc whole_desc() const;
  void validate() const;
  /// The gradient: the outputs' gradients concatenated.
  ConcatProblem backward() const;

  std::vector<TensorArg> tensors() const;
  double tolerance() const { return 0; }
  double flops() const { return 0; }
  double min_bytes() const;
  /// "split-f32-nchw-a1-d8x96x28x28-s64.32"
  std::string key() const;
  static SplitProblem parse_key(std::string_view key);
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;
  std::size_t hash() const noexcept;
  friend bool operator==(const SplitProblem&, const SplitProblem&) = default;
};

/// dst = src with its axes permuted (torch.permute(...).contiguous()): dst's dim i is src's dim
/// perm[i]. Both are row-major. `TransposeProblem{.dims = {8, 64, 56, 56}, .perm = {0, 2, 3, 1}}`
/// is NCHW data rewritten as NHWC.
struct TransposeProblem {
  static constexpr OpKind kKind = OpKind::transpose;
  using Args = DataMoveArgs;

  DType dtype = DType::f32;
  std::vector<std::int64_t> dims;  ///< src's dims
  std::vector<int> perm;           ///< a permutation of 0..rank-1

  int rank() const { return static_cast<int>(dims.size()); }
  std::vector<std::int64_t> dst_dims() const;
  TensorDesc src_desc() const;
  TensorDesc dst_desc() const;
  /// Throws Error(invalid_argument) naming the field: rank, a dim, perm's length, an entry out of
  /// range or repeated.
  void validate() const;
  /// The gradient: dst's shape permuted back by the inverse permutation.
  TransposeProblem backward() const;

  std::vector<TensorArg> tensors() const;
  double tolerance() const { return 0; }
  double flops() const { return 0; }
  double min_bytes() const;
  /// "transpose-f32-d8x64x56x56-p0.2.3.1"
  std::string key() const;
  static TransposeProblem parse_key(std::string_view key);
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;
  std::size_t hash() const noexcept;
  friend bool operator==(const TransposeProblem&, const TransposeProblem&) = default;
};

enum class PadDirection { forward, backward };

/// Forward: dst = src with before[i] elements of `value` ahead of dim i and after[i] behind it.
/// Backward (the gradient, a crop): diff_src = the interior of diff_dst. `dims` is src's.
struct PadProblem {
  static constexpr OpKind kKind = OpKind::pad;
  using Args = DataMoveArgs;

  DType dtype = DType::f32;
  Layout layout = Layout::nchw;
  std::vector<std::int64_t> dims;    ///< the unpadded tensor's dims
  std::vector<std::int64_t> before;  ///< per dim, >= 0
  std::vector<std::int64_t> after;   ///< per dim, >= 0
  double value = 0;                  ///< rounded once to dtype (may be +-inf)
  PadDirection direction = PadDirection::forward;

  int rank() const { return static_cast<int>(dims.size()); }
  std::vector<std::int64_t> padded_dims() const;
  TensorDesc small_desc() const;   ///< src of forward, diff_src of backward
  TensorDesc padded_desc() const;  ///< dst of forward, diff_dst of backward
  /// Throws Error(invalid_argument) naming the field: rank, a dim, before/after of the wrong
  /// length or negative, a NaN value, a dtype other than f32/f16/bf16, nhwc with rank != 4.
  void validate() const;
  /// The same pad in the other direction.
  PadProblem backward() const;

  std::vector<TensorArg> tensors() const;
  double tolerance() const { return 0; }
  double flops() const { return 0; }
  double min_bytes() const;
  /// "pad-F-f32-nchw-d2x3x31x29-b0.0.1.1-e0.0.1.1-v0" (minus signs in the value are written 'm': "vm1.5",
  /// "v1em05").
  std::string key() const;
  static PadProblem parse_key(std::string_view key);
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;
  std::size_t hash() const noexcept;
  friend bool operator==(const PadProblem&, const PadProblem&) = default;
};

/// dst = src converted to dst_dtype (round to nearest even) and/or rewritten from src_layout to
/// dst_layout, same logical dims. Any combination of f32, f16, bf16 and (rank 4) nchw, nhwc.
struct ReorderProblem {
  static constexpr OpKind kKind = OpKind::reorder;
  using Args = DataMoveArgs;

  std::vector<std::int64_t> dims;
  DType src_dtype = DType::f32;
  Layout src_layout = Layout::nchw;
  DType dst_dtype = DType::f32;
  Layout dst_layout = Layout::nchw;

  int rank() const { return static_cast<int>(dims.size()); }
  TensorDesc src_desc() const;
  TensorDesc dst_desc() const;
  /// Throws Error(invalid_argument) naming the field: rank, a dim, a dtype other than f32/f16/bf16,
  /// nhwc with rank != 4.
  void validate() const;
  /// The reverse reorder (the gradient of a cast or a layout change).
  ReorderProblem backward() const;

  std::vector<TensorArg> tensors() const;
  /// 0 when dst_dtype holds every src value; else dst_dtype's unit roundoff (2^-11 f16, 2^-8 bf16).
  double tolerance() const;
  double flops() const { return 0; }
  double min_bytes() const;
  /// "reorder-f32-nchw-f16-nhwc-d2x3x31x29"
  std::string key() const;
  static ReorderProblem parse_key(std::string_view key);
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;
  std::size_t hash() const noexcept;
  friend bool operator==(const ReorderProblem&, const ReorderProblem&) = default;
};

/// The descriptor of a packed tensor of `dims` in `layout` (nhwc needs rank 4).
TensorDesc datamove_desc(DType dtype, Layout layout, const std::vector<std::int64_t>& dims);

}  // namespace galley::dnn
