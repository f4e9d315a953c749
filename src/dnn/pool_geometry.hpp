// Where each pooling window lies, for host code (the reference and the cpu solvers): the window of
// an output along one axis, and the outputs whose windows hold an input (what a gather-form
// backward visits). The GPU kernels use the same formulas (backends/gpu/pool_device.cuh).
#pragma once

#include <algorithm>
#include <cstdint>

#include "galley/dnn/pool.hpp"

namespace galley::dnn {

/// One axis of a problem's windows.
struct PoolAxis {
  std::int64_t in = 1, out = 1;
  std::int64_t kernel = 1, stride = 1, pad = 0;
  bool adaptive = false;  // a global window is adaptive with out == 1

  /// The window of output `o`: input rows [begin, end) and its extent with padding counted
  /// (PyTorch's pool_size: clipped at in + pad, so a ceil-mode window counts the padding it covers).
  struct Span {
    std::int64_t begin, end, padded_extent;
  };
  Span span(std::int64_t o) const {
    if (adaptive) {
      const std::int64_t b = o * in / out;
      const std::int64_t e = ((o + 1) * in + out - 1) / out;
      return {b, e, e - b};
    }
    const std::int64_t start = o * stride - pad;
    const std::int64_t stop = std::min(start + kernel, in + pad);
    return {std::max<std::int64_t>(start, 0), std::min(stop, in), stop - start};
  }
  /// The outputs whose windows hold input `i`: [first, last], empty when first > last.
  void covering(std::int64_t i, std::int64_t& first, std::int64_t& last) const {
    if (adaptive) {
      first = i * out / in;
      last = std::min(out - 1, ((i + 1) * out - 1) / in);
      return;
    }
    // o * stride - pad <= i < o * stride - pad + kernel
    const std::int64_t hi = i + pad;
    const std::int64_t lo = hi - kernel + 1;
    first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
    last = std::min(out - 1, hi / stride);
  }
};

inline PoolAxis pool_axis_h(const PoolProblem& p) {
  if (p.window == PoolWindow::kernel) return {p.h, p.out_h(), p.kernel_h, p.stride_h, p.pad_h, false};
  return {p.h, p.out_h(), 1, 1, 0, true};
}
inline PoolAxis pool_axis_w(const PoolProblem& p) {
  if (p.window == PoolWindow::kernel) return {p.w, p.out_w(), p.kernel_w, p.stride_w, p.pad_w, false};
  return {p.w, p.out_w(), 1, 1, 0, true};
}

/// The divisor of an average window: its padded area or its count of input elements.
inline std::int64_t pool_divisor(PoolMode mode, const PoolAxis::Span& sh, const PoolAxis::Span& sw) {
  return mode == PoolMode::avg_include_pad ? sh.padded_extent * sw.padded_extent
                                           : (sh.end - sh.begin) * (sw.end - sw.begin);
}

}  // namespace galley::dnn
