// 2-D pooling: max and average (padding counted or not), ceil mode, global pooling and adaptive
// pooling to a given output size, forward and backward; the problem type and the user entry points.
// Semantics follow PyTorch (max_pool2d, avg_pool2d, adaptive_avg_pool2d, adaptive_max_pool2d);
// flag names follow MIOpenDriver's pool driver (-y -x window, -p -q padding, -u -v stride).
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

/// What a window reduces to. Global and adaptive windows have no padding, so both average modes
/// compute the same there (their keys differ).
enum class PoolMode : std::uint8_t {
  max,              ///< the largest element; padding never wins
  avg_include_pad,  ///< sum / window area with padding counted (PyTorch's count_include_pad=True)
  avg_exclude_pad,  ///< sum / number of input elements in the window
};
/// "max", "avg_include_pad", "avg_exclude_pad"
const char* to_string(PoolMode mode) noexcept;
/// Parses to_string's names; throws Error(invalid_argument) naming the text and the valid names.
PoolMode parse_pool_mode(std::string_view text);

/// How the windows are laid out.
enum class PoolWindow : std::uint8_t {
  kernel,    ///< kernel_h x kernel_w windows at stride, with padding and ceil mode
  global,    ///< one window over the whole input plane (output 1x1)
  adaptive,  ///< adaptive_h x adaptive_w outputs; window i spans [floor(i*H/OH), ceil((i+1)*H/OH))
};
/// "kernel", "global", "adaptive"
const char* to_string(PoolWindow window) noexcept;

enum class PoolDirection : std::uint8_t { forward, backward };
const char* to_string(PoolDirection direction) noexcept;

/// Device pointers of one pooling call. Forward reads src and writes dst (and indices when the
/// problem keeps them); backward reads diff_dst and, for max, indices (when kept) or src (to find
/// the maxima again), and writes diff_src.
struct PoolArgs {
  const void* src = nullptr;
  void* dst = nullptr;
  void* indices = nullptr;
  const void* diff_dst = nullptr;
  void* diff_src = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;

  static PoolArgs from(const OpArgs& args);
};

/// A pooling problem, e.g. ResNet's stem pooling
/// `PoolProblem{.n = 32, .c = 64, .h = 112, .w = 112, .kernel_h = 3, .kernel_w = 3, .pad_h = 1,
/// .pad_w = 1}` or a global average `PoolProblem{.mode = PoolMode::avg_include_pad, .window =
/// PoolWindow::global, .n = 32, .c = 2048, .h = 7, .w = 7}`; the output size is inferred.
///
/// Max pooling's index of an output is the position of its maximum in the input plane, ih * w + iw
/// (PyTorch's convention), as i32. Scanning a window row by row, an element becomes the maximum
/// when it is greater than the current one or NaN, so ties go to the first and a NaN propagates.
/// Backward routes each output's gradient to that element; given indices, an index that does not
/// name an element of its own output's window contributes nothing.
struct PoolProblem {
  static constexpr OpKind kKind = OpKind::pool;
  using Args = PoolArgs;

  PoolMode mode = PoolMode::max;  ///< -m
  PoolWindow window = PoolWindow::kernel;
  std::int64_t n = 1, c = 1, h = 1, w = 1;  ///< input batch, channels, height, width
  // The kernel window's fields; global and adaptive problems leave them at these defaults.
  std::int64_t kernel_h = 2, kernel_w = 2;  ///< -y -x
  std::int64_t pad_h = 0, pad_w = 0;        ///< -p -q; at most half the kernel
  std::int64_t stride_h = 2, stride_w = 2;  ///< -u -v
  bool ceil_mode = false;                   ///< output size rounded up (a last, partial window)
  /// The output size of an adaptive problem (--adaptive OHxOW); 0 for the other windows.
  std::int64_t adaptive_h = 0, adaptive_w = 0;
  /// Max pooling only: forward also writes the indices, backward reads them instead of src.
  bool keep_indices = false;
  DType dtype = DType::f32;
  Layout layout = Layout::nchw;
  PoolDirection direction = PoolDirection::forward;

  std::int64_t out_h() const;
  std::int64_t out_w() const;
  /// True for max pooling whose backward reads src (no indices kept).
  bool recomputes_indices() const { return mode == PoolMode::max && !keep_indices; }

  /// Throws Error(invalid_argument) naming the field: non-positive sizes, padding over half the
  /// kernel, a kernel larger than the padded input, window fields set for a global or adaptive
  /// problem, indices kept for average pooling, a plane too large for i32 indices, overflow.
  void validate() const;

  TensorDesc src_desc() const;      ///< N x C x H x W in `layout`
  TensorDesc dst_desc() const;      ///< N x C x out_h x out_w in `layout`
  TensorDesc indices_desc() const;  ///< dst_desc() as i32

  /// forward {src -> dst (+ indices)}; backward {diff_dst (+ indices or src for max) -> diff_src}.
  std::vector<TensorArg> tensors() const;

  /// One operation per window element of every output (compare or add).
  double flops() const;
  /// Every tensor of tensors() once.
  double min_bytes() const;
  /// f32: 1e-5 (widened by sqrt(window / 1024) for large average windows); f16/bf16: 1e-2.
  double tolerance() const;

  /// Canonical key, e.g. "pool-F-f32-nchw-max-kernel-n32-c64-h112-w112-y3-x3-p1-q1-u2-v2-ceil0-ah0-aw0-idx0".
  std::string key() const;
  static PoolProblem parse_key(std::string_view key);
  /// "galley bench pool -n 32 ... -F 1 --dtype f32 --layout nchw --device cpu [--solver NAME]".
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;
  std::size_t hash() const noexcept;

  friend bool operator==(const PoolProblem&, const PoolProblem&) = default;
};

using PoolSolver = Solver<PoolProblem>;

// The entry points take the problem with any direction and run their own. Tensors are checked
// against the problem (device, dtype, dims, packed strides, storage size) and a mismatch is
// Error(invalid_argument) naming the tensor. With `solver` null the tuner chooses. Like every
// stream op they return before the work is done; each returns the solver that ran.

/// y = pool(x). `indices` is written for max pooling with keep_indices and must be left empty
/// (a default Tensor) otherwise.
const PoolSolver& pooling_forward(runtime::Stream& stream, const PoolProblem& problem, const Tensor& x,
                                  Tensor& y, Tensor* indices = nullptr, const PoolSolver* solver = nullptr,
                                  CallReport* report = nullptr);

/// dx = the gradient of pool(x) given dy. Max pooling reads `indices` when the problem keeps them,
/// else `x` (the forward input); average pooling reads neither (pass null).
const PoolSolver& pooling_backward(runtime::Stream& stream, const PoolProblem& problem, const Tensor& dy,
                                   Tensor& dx, const Tensor* x = nullptr, const Tensor* indices = nullptr,
                                   const PoolSolver* solver = nullptr, CallReport* report = nullptr);

}  // namespace galley::dnn
