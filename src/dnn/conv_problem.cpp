#include "galley/dnn/conv_problem.hpp"

#include <charconv>
#include <cmath>
#include <functional>
#include <string>

#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/problem.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) bad(std::string("conv problem: ") + what + " overflows 64 bits");
  return out;
}

// Output extent along one axis, or <= 0 when the (dilated) filter does not fit the padded input.
// Computed in __int128 so absurd pads or dilations cannot wrap.
std::int64_t out_extent(std::int64_t in, std::int64_t pad, std::int64_t filter, std::int64_t dilation,
                        std::int64_t stride) {
  if (stride <= 0) return 0;
  const __int128 span = static_cast<__int128>(in) + 2 * static_cast<__int128>(pad) -
                        static_cast<__int128>(dilation) * (filter - 1) - 1;
  if (span < 0) return 0;
  const __int128 out = span / stride + 1;
  return out > INT64_MAX ? INT64_MAX : static_cast<std::int64_t>(out);
}

std::string tensor_mismatch(const char* what, const TensorDesc& got, const TensorDesc& want) {
  return std::string("conv problem: ") + what + " tensor " + got.to_string() +
         " does not match the problem's " + want.to_string();
}

// The shortest text that reads back as the same double (as the activ problem writes parameters).
std::string number(double v) {
  if (v == 0) return "0";
  char text[64];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return ec == std::errc() ? std::string(text, end) : std::string("nan");
}

void validate_epilogue(const ConvProblem& p) {
  const ConvEpilogue& e = p.epilogue;
  if (e.empty()) {
    if (e.alpha != 0 || e.beta != 0) {
      bad("conv problem: epilogue alpha = " + number(e.alpha) + ", beta = " + number(e.beta) +
          " without an activation (must be 0)");
    }
    return;
  }
  if (p.direction != ConvDirection::forward) {
    bad(std::string("conv problem: a fused epilogue (") + e.describe() + ") needs direction forward, not " +
        to_string(p.direction));
  }
  if (!e.activation) {
    if (e.alpha != 0 || e.beta != 0) {
      bad("conv problem: epilogue alpha = " + number(e.alpha) + ", beta = " + number(e.beta) +
          " without an activation (must be 0)");
    }
    return;
  }
  const Activation a = *e.activation;
  if (static_cast<std::size_t>(a) >= kActivationCount) {
    bad("conv problem: epilogue activation " + std::to_string(static_cast<int>(a)) + " is unknown");
  }
  const char* name = to_string(a);
  if (!std::isfinite(e.alpha)) bad(std::string("conv problem: epilogue alpha of ") + name + " is " + number(e.alpha) + ", must be finite");
  if (!std::isfinite(e.beta)) bad(std::string("conv problem: epilogue beta of ") + name + " is " + number(e.beta) + ", must be finite");
  const int used = parameter_count(a);
  if (used < 1 && e.alpha != 0) {
    bad("conv problem: epilogue alpha = " + number(e.alpha) + " means nothing for " + name + " (must be 0)");
  }
  if (used < 2 && e.beta != 0) {
    bad("conv problem: epilogue beta = " + number(e.beta) + " means nothing for " + name + " (must be 0)");
  }
  if (a == Activation::clip && e.alpha > e.beta) {
    bad("conv problem: epilogue clip's lower bound alpha = " + number(e.alpha) + " exceeds its upper bound beta = " +
        number(e.beta));
  }
}

}  // namespace

std::string ConvEpilogue::describe() const {
  if (empty()) return "none";
  std::string out;
  const auto add = [&](const std::string& part) { out += (out.empty() ? "" : " + ") + part; };
  if (bias) add("bias");
  if (residual) add("residual");
  if (activation) {
    std::string act = to_string(*activation);
    const int used = parameter_count(*activation);
    if (used == 1) act += "(alpha " + number(alpha) + ")";
    if (used == 2) act += "(alpha " + number(alpha) + ", beta " + number(beta) + ")";
    add(act);
  }
  return out;
}

ConvEpilogue ConvEpilogue::with(Activation activation, bool bias, bool residual) {
  return ConvEpilogue{bias, residual, activation, default_alpha(activation), default_beta(activation)};
}

std::string ConvProblem::fused_parts() const {
  return epilogue.empty() ? std::string() : "fused epilogue " + epilogue.describe();
}

const char* to_string(ConvDirection direction) noexcept {
  switch (direction) {
    case ConvDirection::forward:
      return "forward";
    case ConvDirection::backward_data:
      return "backward_data";
    case ConvDirection::backward_weights:
      return "backward_weights";
  }
  return "?";
}

std::int64_t ConvProblem::out_h() const { return out_extent(h, pad_h, y, dilation_h, stride_h); }
std::int64_t ConvProblem::out_w() const { return out_extent(w, pad_w, x, dilation_w, stride_w); }

void ConvProblem::validate() const {
  struct Field {
    const char* name;
    std::int64_t value;
    std::int64_t minimum;
  };
  const Field fields[] = {
      {"n (batch, -n)", n, 1},
      {"c (input channels, -c)", c, 1},
      {"h (input height, -H)", h, 1},
      {"w (input width, -W)", w, 1},
      {"k (output channels, -k)", k, 1},
      {"y (filter height, -y)", y, 1},
      {"x (filter width, -x)", x, 1},
      {"pad_h (-p)", pad_h, 0},
      {"pad_w (-q)", pad_w, 0},
      {"stride_h (-u)", stride_h, 1},
      {"stride_w (-v)", stride_w, 1},
      {"dilation_h (-l)", dilation_h, 1},
      {"dilation_w (-j)", dilation_w, 1},
      {"groups (-g)", groups, 1},
  };
  for (const Field& f : fields) {
    if (f.value < f.minimum) {
      bad(std::string("conv problem: ") + f.name + " = " + std::to_string(f.value) + " must be " +
          (f.minimum == 0 ? "non-negative" : "positive"));
    }
  }
  if (c % groups != 0) {
    bad("conv problem: c (input channels) = " + std::to_string(c) +
        " is not divisible by groups = " + std::to_string(groups));
  }
  if (k % groups != 0) {
    bad("conv problem: k (output channels) = " + std::to_string(k) +
        " is not divisible by groups = " + std::to_string(groups));
  }
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) {
    bad(std::string("conv problem: dtype ") + galley::to_string(dtype) +
        " is not supported (valid: f32, f16, bf16)");
  }
  if (out_h() <= 0) {
    bad("conv problem: empty output height: input h = " + std::to_string(h) + " + 2*pad_h " +
        std::to_string(pad_h) + " is smaller than the dilated filter height " + std::to_string(y) +
        " (dilation " + std::to_string(dilation_h) + ")");
  }
  if (out_w() <= 0) {
    bad("conv problem: empty output width: input w = " + std::to_string(w) + " + 2*pad_w " +
        std::to_string(pad_w) + " is smaller than the dilated filter width " + std::to_string(x) +
        " (dilation " + std::to_string(dilation_w) + ")");
  }
  // Element counts (and their byte sizes) must fit, so every later index computation is safe.
  const std::int64_t elem = static_cast<std::int64_t>(size_of(dtype));
  checked_mul(checked_mul(checked_mul(checked_mul(n, c, "input element count (n*c*h*w)"), h,
                                      "input element count (n*c*h*w)"),
                          w, "input element count (n*c*h*w)"),
              elem, "input byte size");
  checked_mul(checked_mul(checked_mul(checked_mul(k, c / groups, "weight element count (k*c/g*y*x)"), y,
                                      "weight element count (k*c/g*y*x)"),
                          x, "weight element count (k*c/g*y*x)"),
              elem, "weight byte size");
  checked_mul(checked_mul(checked_mul(checked_mul(n, k, "output element count (n*k*ho*wo)"), out_h(),
                                      "output element count (n*k*ho*wo)"),
                          out_w(), "output element count (n*k*ho*wo)"),
              elem, "output byte size");
  // Padded input extents are used in index arithmetic by solvers.
  checked_mul(2, pad_h, "pad_h");
  checked_mul(2, pad_w, "pad_w");
  checked_mul(dilation_h, y, "dilation_h * y");
  checked_mul(dilation_w, x, "dilation_w * x");
  std::int64_t padded = 0;
  if (__builtin_add_overflow(h, 2 * pad_h, &padded) || __builtin_add_overflow(w, 2 * pad_w, &padded)) {
    bad("conv problem: padded input size (h + 2*pad_h or w + 2*pad_w) overflows 64 bits");
  }
  validate_epilogue(*this);
}

TensorDesc ConvProblem::x_desc() const { return TensorDesc::packed(dtype, layout, n, c, h, w); }
TensorDesc ConvProblem::w_desc() const { return TensorDesc::packed(dtype, layout, k, c / groups, y, x); }
TensorDesc ConvProblem::y_desc() const { return TensorDesc::packed(dtype, layout, n, k, out_h(), out_w()); }

void ConvProblem::check_tensors(const TensorDesc& xd, const TensorDesc& wd, const TensorDesc& yd) const {
  validate();
  const struct {
    const char* name;
    const TensorDesc& got;
    TensorDesc want;
  } tensors[] = {{"x (input)", xd, x_desc()}, {"w (weights)", wd, w_desc()}, {"y (output)", yd, y_desc()}};
  for (const auto& t : tensors) {
    t.got.validate(t.name);
    if (t.got.dtype != t.want.dtype || t.got.dims != t.want.dims) bad(tensor_mismatch(t.name, t.got, t.want));
    // Solvers index packed tensors; a strided view must be made contiguous by the caller.
    if (!t.got.is_packed(layout)) {
      bad(std::string("conv problem: ") + t.name + " tensor " + t.got.to_string() + " is not packed " +
          to_string(layout) + " (want strides of " + t.want.to_string() + ")");
    }
  }
}

double ConvProblem::tolerance() const { return conv_tolerance(*this); }

double ConvProblem::flops() const {
  return 2.0 * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(out_h()) *
         static_cast<double>(out_w()) * static_cast<double>(c / groups) * static_cast<double>(y) *
         static_cast<double>(x);
}

double ConvProblem::min_bytes() const {
  const double elem = static_cast<double>(size_of(dtype));
  const double xs = static_cast<double>(n) * c * h * w;
  const double ws = static_cast<double>(k) * (c / groups) * y * x;
  const double ys = static_cast<double>(n) * k * out_h() * out_w();
  const double bias = epilogue.bias ? static_cast<double>(k) : 0.0;
  const double residual = epilogue.residual ? ys : 0.0;
  return (xs + ws + ys + bias + residual) * elem;
}

}  // namespace galley::dnn

namespace galley::dnn {

ConvArgs ConvArgs::from(const OpArgs& args) {
  ConvArgs out;
  out.x = args.get(ArgId::src);
  out.w = args.get(ArgId::wei);
  out.y = args.get(ArgId::dst);
  out.dy = args.get(ArgId::diff_dst);
  out.dx = args.get(ArgId::diff_src);
  out.dw = args.get(ArgId::diff_wei);
  out.bias = args.get(ArgId::bias);
  out.residual = args.get(ArgId::src1);
  out.workspace = args.workspace;
  out.workspace_bytes = args.workspace_bytes;
  out.prepared = args.prepared;
  return out;
}

std::vector<TensorArg> ConvProblem::tensors() const {
  switch (direction) {
    case ConvDirection::forward: {
      std::vector<TensorArg> out = {{ArgId::src, x_desc(), false, "x (input)"},
                                    {ArgId::wei, w_desc(), false, "w (weights)"}};
      if (epilogue.bias) out.push_back({ArgId::bias, TensorDesc::contiguous(dtype, {k}), false, "bias"});
      if (epilogue.residual) out.push_back({ArgId::src1, y_desc(), false, "residual"});
      out.push_back({ArgId::dst, y_desc(), true, "y (output)"});
      return out;
    }
    case ConvDirection::backward_data:
      return {{ArgId::diff_dst, y_desc(), false, "dy (output gradient)"},
              {ArgId::wei, w_desc(), false, "w (weights)"},
              {ArgId::diff_src, x_desc(), true, "dx (input gradient)"}};
    case ConvDirection::backward_weights:
      return {{ArgId::src, x_desc(), false, "x (input)"},
              {ArgId::diff_dst, y_desc(), false, "dy (output gradient)"},
              {ArgId::diff_wei, w_desc(), true, "dw (weight gradient)"}};
  }
  bad("conv problem: unknown direction");
}

std::string ConvProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  const char* f = direction == ConvDirection::forward ? "1" : direction == ConvDirection::backward_data ? "2" : "4";
  std::string line = "galley bench conv " + driver_flags() + " -F " + f + " --dtype " + galley::to_string(dtype) +
                     " --layout " + to_string(layout) + " --device " + device.name();
  if (epilogue.bias) line += " --bias";
  if (epilogue.residual) line += " --residual";
  if (epilogue.activation) {
    line += std::string(" --activ ") + to_string(*epilogue.activation) + " --alpha " + number(epilogue.alpha) +
            " --beta " + number(epilogue.beta);
  }
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

std::size_t ConvProblem::hash() const noexcept {
  std::uint64_t h = 0;
  for (std::int64_t v : {n, c, this->h, this->w, k, y, x, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w,
                         groups, static_cast<std::int64_t>(dtype), static_cast<std::int64_t>(layout),
                         static_cast<std::int64_t>(direction)}) {
    h ^= static_cast<std::uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  }
  if (!epilogue.empty()) {
    const std::int64_t activ = epilogue.activation ? static_cast<std::int64_t>(*epilogue.activation) + 1 : 0;
    const std::int64_t parts = (epilogue.bias ? 1 : 0) | (epilogue.residual ? 2 : 0) | (activ << 2);
    const std::int64_t a = epilogue.alpha == 0 ? 0 : static_cast<std::int64_t>(std::hash<double>{}(epilogue.alpha));
    const std::int64_t b = epilogue.beta == 0 ? 0 : static_cast<std::int64_t>(std::hash<double>{}(epilogue.beta));
    for (std::int64_t v : {parts, a, b}) h ^= static_cast<std::uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  }
  return static_cast<std::size_t>(h);
}

namespace {
const bool kConvProblemRegistered = register_problem_ops(problem_ops<ConvProblem>());
}  // namespace

}  // namespace galley::dnn
