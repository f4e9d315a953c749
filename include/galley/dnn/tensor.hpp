// Tensor descriptors: dtype plus 4-D logical dims (N, C, H, W) with general strides.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "galley/core/dtype.hpp"

namespace galley::dnn {

/// Memory order of a packed 4-D activation tensor.
enum class Layout { nchw, nhwc };
const char* to_string(Layout layout) noexcept;
/// "nchw" or "nhwc" (case-insensitive); throws Error(invalid_argument) otherwise.
Layout parse_layout(std::string_view text);

/// A 4-D tensor: dims and strides are in logical N, C, H, W order; strides count elements.
struct TensorDesc {
  DType dtype = DType::f32;
  std::array<std::int64_t, 4> dims{1, 1, 1, 1};
  std::array<std::int64_t, 4> strides{1, 1, 1, 1};

  /// A densely packed tensor in `layout`.
  static TensorDesc packed(DType dtype, Layout layout, std::int64_t n, std::int64_t c, std::int64_t h,
                           std::int64_t w);
  /// Element count (product of dims). Throws Error(invalid_argument) on overflow.
  std::int64_t elements() const;
  /// Bytes spanned: (max offset + 1) * element size.
  std::size_t bytes() const;
  /// True when the strides are the packed strides of `layout` (strides of size-1 dims ignored).
  bool is_packed(Layout layout) const;
  /// Throws Error(invalid_argument) naming `what` and the field on non-positive dims or strides,
  /// or an extent that overflows.
  void validate(std::string_view what) const;
  /// "f32[2,3,31,29] strides [2697,899,29,1]"
  std::string to_string() const;

  friend bool operator==(const TensorDesc&, const TensorDesc&) = default;
};

}  // namespace galley::dnn
