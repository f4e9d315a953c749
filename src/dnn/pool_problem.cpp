#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "galley/core/error.hpp"
#include "galley/dnn/pool.hpp"
#include "galley/dnn/problem.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad(const std::string& message) {
  throw Error(Status::invalid_argument, "pool problem: " + message);
}

// PyTorch's pooling_output_shape: floor or ceil of (in + 2*pad - kernel) / stride, plus one, less
// the last window when ceil mode would start it inside the right padding. <= 0 when the kernel does
// not fit the padded input. In __int128 so absurd fields cannot wrap.
std::int64_t kernel_out_extent(std::int64_t in, std::int64_t pad, std::int64_t kernel, std::int64_t stride,
                               bool ceil_mode) {
  if (stride <= 0 || kernel <= 0) return 0;
  const __int128 span = static_cast<__int128>(in) + 2 * static_cast<__int128>(pad) - kernel;
  if (span < 0) return 0;
  __int128 out = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= static_cast<__int128>(in) + pad) --out;
  return out > INT64_MAX ? INT64_MAX : static_cast<std::int64_t>(out);
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) bad(std::string(what) + " overflows 64 bits");
  return out;
}

}  // namespace

const char* to_string(PoolMode mode) noexcept {
  switch (mode) {
    case PoolMode::max:
      return "max";
    case PoolMode::avg_include_pad:
      return "avg_include_pad";
    case PoolMode::avg_exclude_pad:
      return "avg_exclude_pad";
  }
  return "?";
}

PoolMode parse_pool_mode(std::string_view text) {
  for (PoolMode m : {PoolMode::max, PoolMode::avg_include_pad, PoolMode::avg_exclude_pad}) {
    if (text == to_string(m)) return m;
  }
  throw Error(Status::invalid_argument, "unknown pooling mode '" + std::string(text.substr(0, 40)) +
                                            "' (valid: max, avg_include_pad, avg_exclude_pad)");
}

const char* to_string(PoolWindow window) noexcept {
  switch (window) {
    case PoolWindow::kernel:
      return "kernel";
    case PoolWindow::global:
      return "global";
    case PoolWindow::adaptive:
      return "adaptive";
  }
  return "?";
}

const char* to_string(PoolDirection direction) noexcept {
  return direction == PoolDirection::forward ? "forward" : "backward";
}

std::int64_t PoolProblem::out_h() const {
  switch (window) {
    case PoolWindow::kernel:
      return kernel_out_extent(h, pad_h, kernel_h, stride_h, ceil_mode);
    case PoolWindow::global:
      return 1;
    case PoolWindow::adaptive:
      return adaptive_h;
  }
  return 0;
}

std::int64_t PoolProblem::out_w() const {
  switch (window) {
    case PoolWindow::kernel:
      return kernel_out_extent(w, pad_w, kernel_w, stride_w, ceil_mode);
    case PoolWindow::global:
      return 1;
    case PoolWindow::adaptive:
      return adaptive_w;
  }
  return 0;
}

void PoolProblem::validate() const {
  struct Field {
    const char* name;
    std::int64_t value;
    std::int64_t minimum;
  };
  const Field sizes[] = {
      {"n (batch, -n)", n, 1},
      {"c (channels, -c)", c, 1},
      {"h (input height, -H)", h, 1},
      {"w (input width, -W)", w, 1},
  };
  for (const Field& f : sizes) {
    if (f.value < f.minimum) bad(std::string(f.name) + " = " + std::to_string(f.value) + " must be positive");
  }
  if (mode != PoolMode::max && mode != PoolMode::avg_include_pad && mode != PoolMode::avg_exclude_pad) {
    bad("mode " + std::to_string(static_cast<int>(mode)) + " is not a PoolMode");
  }
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) {
    bad(std::string("dtype ") + galley::to_string(dtype) + " is not supported (valid: f32, f16, bf16)");
  }
  if (keep_indices && mode != PoolMode::max) {
    bad(std::string("keep_indices (--keep-indices) is for max pooling only, not ") + to_string(mode));
  }

  const PoolProblem defaults{};
  if (window == PoolWindow::kernel) {
    const Field window_fields[] = {
        {"kernel_h (-y)", kernel_h, 1}, {"kernel_w (-x)", kernel_w, 1}, {"pad_h (-p)", pad_h, 0},
        {"pad_w (-q)", pad_w, 0},       {"stride_h (-u)", stride_h, 1}, {"stride_w (-v)", stride_w, 1},
    };
    for (const Field& f : window_fields) {
      if (f.value < f.minimum) {
        bad(std::string(f.name) + " = " + std::to_string(f.value) + " must be " +
            (f.minimum == 0 ? "non-negative" : "positive"));
      }
    }
    // PyTorch's rule: padding only ever adds a partial window, never a window of padding alone.
    if (pad_h > kernel_h / 2) {
      bad("pad_h (-p) = " + std::to_string(pad_h) + " must be at most half the kernel height " +
          std::to_string(kernel_h) + " (<= " + std::to_string(kernel_h / 2) + ")");
    }
    if (pad_w > kernel_w / 2) {
      bad("pad_w (-q) = " + std::to_string(pad_w) + " must be at most half the kernel width " +
          std::to_string(kernel_w) + " (<= " + std::to_string(kernel_w / 2) + ")");
    }
    if (out_h() <= 0) {
      bad("kernel_h (-y) = " + std::to_string(kernel_h) +
          " is larger than the padded input height h + 2*pad_h = " + std::to_string(h) + " + 2*" +
          std::to_string(pad_h));
    }
    if (out_w() <= 0) {
      bad("kernel_w (-x) = " + std::to_string(kernel_w) +
          " is larger than the padded input width w + 2*pad_w = " + std::to_string(w) + " + 2*" +
          std::to_string(pad_w));
    }
    if (adaptive_h != 0 || adaptive_w != 0) {
      bad("adaptive_h x adaptive_w = " + std::to_string(adaptive_h) + "x" + std::to_string(adaptive_w) +
          " is set for kernel pooling (it is the output size of adaptive pooling only; leave it 0x0)");
    }
  } else if (window == PoolWindow::global || window == PoolWindow::adaptive) {
    // One spelling per problem: the kernel fields mean nothing here, so they keep their defaults.
    const char* what = window == PoolWindow::global ? "global" : "adaptive";
    const struct {
      const char* name;
      std::int64_t value, want;
    } unused[] = {
        {"kernel_h (-y)", kernel_h, defaults.kernel_h}, {"kernel_w (-x)", kernel_w, defaults.kernel_w},
        {"pad_h (-p)", pad_h, defaults.pad_h},          {"pad_w (-q)", pad_w, defaults.pad_w},
        {"stride_h (-u)", stride_h, defaults.stride_h}, {"stride_w (-v)", stride_w, defaults.stride_w},
    };
    for (const auto& f : unused) {
      if (f.value != f.want) {
        bad(std::string(f.name) + " = " + std::to_string(f.value) + " is set for " + what +
            " pooling, whose windows follow from the input and output sizes (leave it at " +
            std::to_string(f.want) + ")");
      }
    }
    if (ceil_mode)
      bad(std::string("ceil_mode (--ceil) is set for ") + what + " pooling (kernel windows only)");
    if (window == PoolWindow::global && (adaptive_h != 0 || adaptive_w != 0)) {
      bad("adaptive_h x adaptive_w = " + std::to_string(adaptive_h) + "x" + std::to_string(adaptive_w) +
          " is set for global pooling (its output is 1x1; leave it 0x0)");
    }
    if (window == PoolWindow::adaptive) {
      if (adaptive_h < 1)
        bad("adaptive_h (--adaptive OHxOW) = " + std::to_string(adaptive_h) + " must be positive");
      if (adaptive_w < 1)
        bad("adaptive_w (--adaptive OHxOW) = " + std::to_string(adaptive_w) + " must be positive");
      // The window bounds multiply an output index by the input extent.
      checked_mul(adaptive_h, h + 1, "adaptive_h * (h + 1)");
      checked_mul(adaptive_w, w + 1, "adaptive_w * (w + 1)");
    }
  } else {
    bad("window " + std::to_string(static_cast<int>(window)) + " is not a PoolWindow");
  }
  if (direction != PoolDirection::forward && direction != PoolDirection::backward) {
    bad("direction " + std::to_string(static_cast<int>(direction)) + " is not forward or backward");
  }

  const std::int64_t elem = static_cast<std::int64_t>(size_of(dtype));
  const std::int64_t plane = checked_mul(h, w, "input plane (h*w)");
  checked_mul(
      checked_mul(checked_mul(n, c, "input element count (n*c*h*w)"), plane, "input element count (n*c*h*w)"),
      elem, "input byte size");
  const std::int64_t out_plane = checked_mul(out_h(), out_w(), "output plane (out_h*out_w)");
  checked_mul(checked_mul(checked_mul(n, c, "output element count"), out_plane, "output element count"), 4,
              "output byte size");
  if (mode == PoolMode::max && plane > INT32_MAX) {
    bad("input plane h*w = " + std::to_string(plane) + " is too large for i32 max-pooling indices (at most " +
        std::to_string(INT32_MAX) + ")");
  }
  if (window == PoolWindow::kernel) {
    checked_mul(out_h(), stride_h, "out_h * stride_h");
    checked_mul(out_w(), stride_w, "out_w * stride_w");
    std::int64_t padded = 0;
    if (__builtin_add_overflow(h, 2 * pad_h + kernel_h, &padded) ||
        __builtin_add_overflow(w, 2 * pad_w + kernel_w, &padded)) {
      bad("padded input size overflows 64 bits");
    }
  }
}

TensorDesc PoolProblem::src_desc() const { return TensorDesc::packed(dtype, layout, n, c, h, w); }
TensorDesc PoolProblem::dst_desc() const { return TensorDesc::packed(dtype, layout, n, c, out_h(), out_w()); }
TensorDesc PoolProblem::indices_desc() const {
  return TensorDesc::packed(DType::i32, layout, n, c, out_h(), out_w());
}

PoolArgs PoolArgs::from(const OpArgs& args) {
  PoolArgs out;
  out.src = args.get(ArgId::src);
  out.dst = args.get(ArgId::dst);
  out.indices = args.get(ArgId::indices);
  out.diff_dst = args.get(ArgId::diff_dst);
  out.diff_src = args.get(ArgId::diff_src);
  out.workspace = args.workspace;
  out.workspace_bytes = args.workspace_bytes;
  return out;
}

std::vector<TensorArg> PoolProblem::tensors() const {
  std::vector<TensorArg> out;
  if (direction == PoolDirection::forward) {
    out.push_back({ArgId::src, src_desc(), false, "x (input)"});
    out.push_back({ArgId::dst, dst_desc(), true, "y (output)"});
    if (keep_indices)
      out.push_back({ArgId::indices, indices_desc(), true, "indices (max positions, output)"});
  } else {
    out.push_back({ArgId::diff_dst, dst_desc(), false, "dy (output gradient)"});
    if (mode == PoolMode::max) {
      if (keep_indices) {
        out.push_back({ArgId::indices, indices_desc(), false, "indices (max positions, input)"});
      } else {
        out.push_back({ArgId::src, src_desc(), false, "x (input)"});
      }
    }
    out.push_back({ArgId::diff_src, src_desc(), true, "dx (input gradient)"});
  }
  return out;
}

namespace {
// The mean window area (padding included): what flops and the f32 tolerance scale with.
double window_area(const PoolProblem& p) {
  switch (p.window) {
    case PoolWindow::kernel:
      return static_cast<double>(p.kernel_h) * static_cast<double>(p.kernel_w);
    case PoolWindow::global:
      return static_cast<double>(p.h) * static_cast<double>(p.w);
    case PoolWindow::adaptive:
      return std::ceil(static_cast<double>(p.h) / static_cast<double>(p.adaptive_h) + 1) *
             std::ceil(static_cast<double>(p.w) / static_cast<double>(p.adaptive_w) + 1);
  }
  return 1;
}
}  // namespace

double PoolProblem::flops() const {
  return static_cast<double>(n) * static_cast<double>(c) * static_cast<double>(out_h()) *
         static_cast<double>(out_w()) * window_area(*this);
}

double PoolProblem::min_bytes() const {
  double bytes = 0;
  for (const TensorArg& t : tensors()) {
    bytes += static_cast<double>(t.desc.elements()) * static_cast<double>(size_of(t.desc.dtype));
  }
  return bytes;
}

double PoolProblem::tolerance() const {
  if (dtype != DType::f32) return 1e-2;
  const double area = window_area(*this);
  return mode == PoolMode::max || area <= 1024 ? 1e-5 : 1e-5 * std::sqrt(area / 1024);
}

std::size_t PoolProblem::hash() const noexcept {
  std::uint64_t hv = 0;
  for (std::int64_t v :
       {static_cast<std::int64_t>(mode), static_cast<std::int64_t>(window), n, c, h, w, kernel_h, kernel_w,
        pad_h, pad_w, stride_h, stride_w, static_cast<std::int64_t>(ceil_mode), adaptive_h, adaptive_w,
        static_cast<std::int64_t>(keep_indices), static_cast<std::int64_t>(dtype),
        static_cast<std::int64_t>(layout), static_cast<std::int64_t>(direction)}) {
    hv ^= static_cast<std::uint64_t>(v) + 0x9e3779b97f4a7c15ull + (hv << 6) + (hv >> 2);
  }
  return static_cast<std::size_t>(hv);
}

namespace {
const bool kRegistered = register_problem_ops(problem_ops<PoolProblem>());
}  // namespace

}  // namespace galley::dnn
