// Tensor descriptors: dtype plus up to kMaxRank dims with general strides. Activation tensors of
// convolution, pooling and normalisation are rank 4 in logical N, C, H, W order whatever their
// memory layout; other ops use any rank from 1 to kMaxRank in the order of their shapes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "galley/core/dtype.hpp"

namespace galley::dnn {

/// Memory order of a packed 4-D activation tensor.
enum class Layout { nchw, nhwc };
const char* to_string(Layout layout) noexcept;
/// "nchw" or "nhwc" (case-insensitive); throws Error(invalid_argument) otherwise.
Layout parse_layout(std::string_view text);

/// The most dims a tensor has (ShuffleNet's channel shuffle reshapes to rank 5).
inline constexpr int kMaxRank = 6;
using Dims = std::array<std::int64_t, kMaxRank>;

/// A tensor of `rank` dims; strides count elements. Entries at and past `rank` are 1 in both
/// arrays, so descriptors compare equal exactly when their shapes and strides do.
struct TensorDesc {
  DType dtype = DType::f32;
  int rank = 4;
  Dims dims{1, 1, 1, 1, 1, 1};
  Dims strides{1, 1, 1, 1, 1, 1};

  /// A densely packed tensor in `layout`.
  static TensorDesc packed(DType dtype, Layout layout, std::int64_t n, std::int64_t c, std::int64_t h,
                           std::int64_t w);
  /// A densely packed row-major tensor of any rank (1 to kMaxRank): the last dim has stride 1.
  /// Throws Error(invalid_argument) for a rank outside that range.
  static TensorDesc contiguous(DType dtype, std::initializer_list<std::int64_t> dims);
  static TensorDesc contiguous(DType dtype, const std::int64_t* dims, int rank);
  /// True when the strides are row-major packed (strides of size-1 dims ignored).
  bool is_contiguous() const;
  /// Element count (product of dims). Throws Error(invalid_argument) on overflow.
  std::int64_t elements() const;
  /// Bytes spanned: (max offset + 1) * element size.
  std::size_t bytes() const;
  /// True when the strides are the packed strides of `layout` (strides of size-1 dims ignored).
  bool is_packed(Layout layout) const;
  /// Throws Error(invalid_argument) naming `what` and the field on non-positive dims or strides,
  /// or an extent that overflows.
  void validate(std::string_view what) const;
  /// "f32[2,3,31,29] strides [2697,899,29,1]"; only the first `rank` entries are printed.
  std::string to_string() const;

  friend bool operator==(const TensorDesc&, const TensorDesc&) = default;
};

}  // namespace galley::dnn
