#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "dnn/eltwise_geometry.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/eltwise.hpp"
#include "galley/dnn/problem.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

std::string bracketed(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

void check_shape(const std::vector<std::int64_t>& shape, const char* what) {
  if (shape.empty() || shape.size() > static_cast<std::size_t>(kMaxRank)) {
    bad(std::string("eltwise problem: ") + what + " has rank " + std::to_string(shape.size()) +
        ", outside 1.." + std::to_string(kMaxRank));
  }
  std::int64_t count = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 1) {
      bad(std::string("eltwise problem: ") + what + " " + bracketed(shape) + " has dim " + std::to_string(i) +
          " = " + std::to_string(shape[i]) + " (dims must be positive)");
    }
    if (__builtin_mul_overflow(count, shape[i], &count) ||
        __builtin_mul_overflow(count, std::int64_t{8}, &count)) {
      bad(std::string("eltwise problem: ") + what + " " + bracketed(shape) +
          " has more elements than 64 bits hold");
    }
    count /= 8;
  }
}

TensorDesc desc_of(DType dtype, Layout layout, const std::vector<std::int64_t>& shape) {
  if (layout == Layout::nhwc && shape.size() == 4) {
    return TensorDesc::packed(dtype, Layout::nhwc, shape[0], shape[1], shape[2], shape[3]);
  }
  return TensorDesc::contiguous(dtype, shape.data(), static_cast<int>(shape.size()));
}

bool reads_inputs(EltwiseOp op) { return op == EltwiseOp::mul || op == EltwiseOp::div; }

}  // namespace

const char* to_string(EltwiseOp op) noexcept {
  switch (op) {
    case EltwiseOp::add:
      return "add";
    case EltwiseOp::sub:
      return "sub";
    case EltwiseOp::mul:
      return "mul";
    case EltwiseOp::div:
      return "div";
  }
  return "?";
}

EltwiseOp parse_eltwise_op(std::string_view name) {
  for (EltwiseOp op : {EltwiseOp::add, EltwiseOp::sub, EltwiseOp::mul, EltwiseOp::div}) {
    if (name == to_string(op)) return op;
  }
  bad("eltwise op '" + std::string(name) + "' is not one of add, sub, mul, div");
}

EltwiseArgs EltwiseArgs::from(const OpArgs& args) {
  EltwiseArgs out;
  out.a = args.get(ArgId::src);
  out.b = args.get(ArgId::src1);
  out.dst = args.get(ArgId::dst);
  out.dy = args.get(ArgId::diff_dst);
  out.da = args.get(ArgId::diff_src);
  out.db = args.get(ArgId::diff_src1);
  out.workspace = args.workspace;
  out.workspace_bytes = args.workspace_bytes;
  return out;
}

std::vector<std::int64_t> EltwiseProblem::dst_shape() const {
  const std::size_t rank = std::max(a.size(), b.size());
  std::vector<std::int64_t> out(rank, 1);
  for (std::size_t i = 0; i < rank; ++i) {
    // Trailing dims aligned: position i of the result is a's dim a.size() - rank + i, if any.
    const std::int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const std::int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) {
      bad("eltwise problem: shapes a " + bracketed(a) + " and b " + bracketed(b) + " do not broadcast: dim " +
          std::to_string(static_cast<std::int64_t>(i) - static_cast<std::int64_t>(rank)) +
          " (from the end) is " + std::to_string(da) + " in a and " + std::to_string(db) +
          " in b (NumPy rules: trailing dims aligned, each pair equal or one of them 1)");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

void EltwiseProblem::validate() const {
  if (op != EltwiseOp::add && op != EltwiseOp::sub && op != EltwiseOp::mul && op != EltwiseOp::div) {
    bad("eltwise problem: op " + std::to_string(static_cast<int>(op)) + " is not add, sub, mul or div");
  }
  if (direction != EltwiseDirection::forward && direction != EltwiseDirection::backward) {
    bad("eltwise problem: direction " + std::to_string(static_cast<int>(direction)) +
        " is not forward or backward");
  }
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) {
    bad(std::string("eltwise problem: dtype ") + galley::to_string(dtype) +
        " is not supported (valid: f32, f16, bf16)");
  }
  if (layout != Layout::nchw && layout != Layout::nhwc) bad("eltwise problem: layout is not nchw or nhwc");
  check_shape(a, "a (shape)");
  check_shape(b, "b (shape1)");
  if (!std::isfinite(alpha)) bad("eltwise problem: alpha = " + std::to_string(alpha) + " is not finite");
  if (!std::isfinite(beta)) bad("eltwise problem: beta = " + std::to_string(beta) + " is not finite");
  const std::vector<std::int64_t> out = dst_shape();
  check_shape(out, "dst (broadcast shape)");
  if (layout == Layout::nhwc && (a.size() != 4 || b.size() != 4)) {
    bad("eltwise problem: layout nhwc needs a and b of rank 4 (N, C, H, W), not a " + bracketed(a) +
        " and b " + bracketed(b) + "; use nchw (row-major) for other ranks");
  }
  // Byte sizes must fit too, so solvers may index in bytes.
  for (const auto* shape : {&a, &b, &out}) {
    (void)desc_of(dtype, layout, *shape).bytes();
  }
}

TensorDesc EltwiseProblem::a_desc() const { return desc_of(dtype, layout, a); }
TensorDesc EltwiseProblem::b_desc() const { return desc_of(dtype, layout, b); }
TensorDesc EltwiseProblem::dst_desc() const { return desc_of(dtype, layout, dst_shape()); }

std::vector<TensorArg> EltwiseProblem::tensors() const {
  const Fill b_fill = op == EltwiseOp::div ? Fill::positive : Fill::uniform;
  if (direction == EltwiseDirection::forward) {
    return {{ArgId::src, a_desc(), false, "a (first input)"},
            {ArgId::src1, b_desc(), false, "b (second input)", false, b_fill},
            {ArgId::dst, dst_desc(), true, "dst (output)"}};
  }
  std::vector<TensorArg> out{{ArgId::diff_dst, dst_desc(), false, "dy (output gradient)"}};
  if (reads_inputs(op)) {
    out.push_back({ArgId::src, a_desc(), false, "a (first input)"});
    out.push_back({ArgId::src1, b_desc(), false, "b (second input)", false, b_fill});
  }
  out.push_back({ArgId::diff_src, a_desc(), true, "da (gradient of a)"});
  out.push_back({ArgId::diff_src1, b_desc(), true, "db (gradient of b)"});
  return out;
}

double EltwiseProblem::flops() const {
  const double n = static_cast<double>(dst_desc().elements());
  if (direction == EltwiseDirection::forward) return n;
  return n * (reads_inputs(op) ? 4.0 : 2.0);
}

double EltwiseProblem::min_bytes() const {
  double bytes = 0;
  for (const TensorArg& t : tensors()) bytes += static_cast<double>(t.desc.elements()) * size_of(dtype);
  return bytes;
}

double EltwiseProblem::tolerance() const {
  if (dtype != DType::f32) return 1e-2;
  if (direction == EltwiseDirection::forward) return 1e-5;
  const double out = static_cast<double>(dst_desc().elements());
  const double terms =
      out / std::min(static_cast<double>(a_desc().elements()), static_cast<double>(b_desc().elements()));
  return terms > 1024 ? 1e-5 * std::sqrt(terms / 1024) : 1e-5;
}

std::size_t EltwiseProblem::hash() const noexcept {
  std::uint64_t h = 0;
  const auto mix = [&h](std::uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  mix(static_cast<std::uint64_t>(op));
  mix(static_cast<std::uint64_t>(direction));
  mix(static_cast<std::uint64_t>(dtype));
  mix(static_cast<std::uint64_t>(layout));
  mix(a.size());
  for (std::int64_t d : a) mix(static_cast<std::uint64_t>(d));
  mix(b.size());
  for (std::int64_t d : b) mix(static_cast<std::uint64_t>(d));
  // 0 and -0 compare equal, so they must hash alike.
  for (float v : {alpha, beta}) {
    const float value = v == 0.0f ? 0.0f : v;
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    mix(bits);
  }
  return static_cast<std::size_t>(h);
}

namespace {
const bool kRegistered = register_problem_ops(problem_ops<EltwiseProblem>());
}  // namespace

}  // namespace galley::dnn
