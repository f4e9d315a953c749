// ActivProblem: the activation names, validation, descriptors, tensors and the figures benchmarks
// divide by. Its text forms (key, bench line) are in activ_problem_text.cpp.
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "galley/core/error.hpp"
#include "galley/dnn/activation.hpp"
#include "galley/dnn/problem.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

constexpr const char* kActivationNames[kActivationCount] = {
    "relu", "leaky_relu", "clip", "elu", "sigmoid", "tanh", "gelu_erf", "gelu_tanh", "silu", "hardswish", "hardsigmoid",
};

std::string valid_names() {
  std::string out;
  for (const char* name : kActivationNames) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

bool known(Activation a) { return static_cast<std::size_t>(a) < kActivationCount; }

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

}  // namespace

const char* to_string(Activation activation) noexcept {
  return known(activation) ? kActivationNames[static_cast<std::size_t>(activation)] : "?";
}

Activation parse_activation(std::string_view name) {
  for (std::size_t i = 0; i < kActivationCount; ++i) {
    if (name == kActivationNames[i]) return static_cast<Activation>(i);
  }
  bad("unknown activation '" + std::string(name.substr(0, 64)) + "' (valid: " + valid_names() + ")");
}

int parameter_count(Activation activation) noexcept {
  switch (activation) {
    case Activation::leaky_relu:
    case Activation::elu:
      return 1;
    case Activation::clip:
      return 2;
    default:
      return 0;
  }
}

double default_alpha(Activation activation) noexcept {
  switch (activation) {
    case Activation::leaky_relu: return 0.01;
    case Activation::elu: return 1.0;
    default: return 0.0;
  }
}

double default_beta(Activation activation) noexcept { return activation == Activation::clip ? 6.0 : 0.0; }

bool backward_reads_dst(Activation activation) noexcept {
  return activation == Activation::relu || activation == Activation::sigmoid || activation == Activation::tanh;
}

const char* to_string(ActivDirection direction) noexcept {
  switch (direction) {
    case ActivDirection::forward: return "forward";
    case ActivDirection::backward: return "backward";
  }
  return "?";
}

ActivArgs ActivArgs::from(const OpArgs& args) {
  ActivArgs out;
  out.x = args.get(ArgId::src);
  out.y = args.get(ArgId::dst);
  out.dy = args.get(ArgId::diff_dst);
  out.dx = args.get(ArgId::diff_src);
  out.workspace = args.workspace;
  out.workspace_bytes = args.workspace_bytes;
  return out;
}

ActivProblem ActivProblem::packed(Activation activation, DType dtype, Layout layout, std::int64_t n, std::int64_t c,
                                  std::int64_t h, std::int64_t w) {
  ActivProblem p;
  p.activation = activation;
  p.alpha = default_alpha(activation);
  p.beta = default_beta(activation);
  p.dtype = dtype;
  p.layout = layout;
  p.rank = 4;
  p.dims = {n, c, h, w, 1, 1};
  return p;
}

ActivProblem ActivProblem::contiguous(Activation activation, DType dtype, std::initializer_list<std::int64_t> dims) {
  if (dims.size() < 1 || dims.size() > static_cast<std::size_t>(kMaxRank)) {
    bad("activ problem: rank " + std::to_string(dims.size()) + " is outside 1.." + std::to_string(kMaxRank));
  }
  ActivProblem p;
  p.activation = activation;
  p.alpha = default_alpha(activation);
  p.beta = default_beta(activation);
  p.dtype = dtype;
  p.rank = static_cast<int>(dims.size());
  std::size_t i = 0;
  for (std::int64_t d : dims) p.dims[i++] = d;
  return p;
}

ActivProblem ActivProblem::of(Activation activation, const TensorDesc& desc, double alpha, double beta,
                              ActivDirection direction) {
  desc.validate("activation tensor");
  ActivProblem p;
  p.activation = activation;
  p.alpha = alpha;
  p.beta = beta;
  p.direction = direction;
  p.dtype = desc.dtype;
  p.rank = desc.rank;
  p.dims = desc.dims;
  if (desc.is_contiguous()) {
    p.layout = Layout::nchw;
  } else if (desc.rank == 4 && desc.is_packed(Layout::nhwc)) {
    p.layout = Layout::nhwc;
  } else {
    bad("activ problem: tensor " + desc.to_string() + " is neither row-major packed nor packed nhwc");
  }
  p.validate();
  return p;
}

std::int64_t ActivProblem::elements() const {
  std::int64_t count = 1;
  for (int i = 0; i < rank && i < kMaxRank; ++i) count *= dims[static_cast<std::size_t>(i)];
  return count;
}

void ActivProblem::validate() const {
  if (!known(activation)) bad("activ problem: activation " + std::to_string(static_cast<int>(activation)) + " is unknown");
  if (direction != ActivDirection::forward && direction != ActivDirection::backward) {
    bad("activ problem: direction " + std::to_string(static_cast<int>(direction)) + " is neither forward nor backward");
  }
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) {
    bad(std::string("activ problem: dtype ") + galley::to_string(dtype) + " is not supported (valid: f32, f16, bf16)");
  }
  if (rank < 1 || rank > kMaxRank) {
    bad("activ problem: rank " + std::to_string(rank) + " is outside 1.." + std::to_string(kMaxRank));
  }
  std::int64_t count = static_cast<std::int64_t>(size_of(dtype));
  for (int i = 0; i < kMaxRank; ++i) {
    const std::int64_t d = dims[static_cast<std::size_t>(i)];
    if (i >= rank) {
      if (d != 1) bad("activ problem: dims[" + std::to_string(i) + "] = " + std::to_string(d) + " past rank " +
                      std::to_string(rank) + " must be 1");
      continue;
    }
    if (d < 1) bad("activ problem: dims[" + std::to_string(i) + "] = " + std::to_string(d) + " must be positive");
    if (__builtin_mul_overflow(count, d, &count)) bad("activ problem: tensor byte size overflows 64 bits");
  }
  if (layout != Layout::nchw && layout != Layout::nhwc) bad("activ problem: layout is neither nchw nor nhwc");
  if (layout == Layout::nhwc && rank != 4) {
    bad("activ problem: layout nhwc needs rank 4, not rank " + std::to_string(rank) + " (use nchw: row-major)");
  }
  const char* name = to_string(activation);
  if (!std::isfinite(alpha)) bad(std::string("activ problem: alpha of ") + name + " is " + number(alpha) + ", must be finite");
  if (!std::isfinite(beta)) bad(std::string("activ problem: beta of ") + name + " is " + number(beta) + ", must be finite");
  const int used = parameter_count(activation);
  if (used < 1 && alpha != 0) {
    bad(std::string("activ problem: alpha = ") + number(alpha) + " means nothing for " + name + " (must be 0)");
  }
  if (used < 2 && beta != 0) {
    bad(std::string("activ problem: beta = ") + number(beta) + " means nothing for " + name + " (must be 0)");
  }
  if (activation == Activation::clip && alpha > beta) {
    bad("activ problem: clip's lower bound alpha = " + number(alpha) + " exceeds its upper bound beta = " + number(beta));
  }
}

TensorDesc ActivProblem::desc() const {
  if (rank == 4) return TensorDesc::packed(dtype, layout, dims[0], dims[1], dims[2], dims[3]);
  return TensorDesc::contiguous(dtype, dims.data(), rank);
}

std::vector<TensorArg> ActivProblem::tensors() const {
  const TensorDesc d = desc();
  if (direction == ActivDirection::forward) {
    return {{ArgId::src, d, false, "x (input)"}, {ArgId::dst, d, true, "y (output)"}};
  }
  const TensorArg saved = reads_dst() ? TensorArg{ArgId::dst, d, false, "y (forward output)"}
                                      : TensorArg{ArgId::src, d, false, "x (input)"};
  return {{ArgId::diff_dst, d, false, "dy (output gradient)"}, saved, {ArgId::diff_src, d, true, "dx (input gradient)"}};
}

double ActivProblem::flops() const { return static_cast<double>(elements()); }

double ActivProblem::min_bytes() const {
  const double tensors = direction == ActivDirection::forward ? 2.0 : 3.0;
  return tensors * static_cast<double>(elements()) * static_cast<double>(size_of(dtype));
}

double ActivProblem::tolerance() const {
  switch (dtype) {
    case DType::f16: return 2e-3;
    case DType::bf16: return 1e-2;
    default: return 1e-5;
  }
}

std::size_t ActivProblem::hash() const noexcept {
  std::uint64_t h = 0;
  const auto mix = [&h](std::uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  mix(static_cast<std::uint64_t>(activation));
  mix(std::hash<double>{}(alpha));
  mix(std::hash<double>{}(beta));
  mix(static_cast<std::uint64_t>(direction));
  mix(static_cast<std::uint64_t>(dtype));
  mix(static_cast<std::uint64_t>(rank));
  for (std::int64_t d : dims) mix(static_cast<std::uint64_t>(d));
  mix(static_cast<std::uint64_t>(layout));
  return static_cast<std::size_t>(h);
}

namespace {
const bool kActivProblemRegistered = register_problem_ops(problem_ops<ActivProblem>());
}  // namespace

}  // namespace galley::dnn
