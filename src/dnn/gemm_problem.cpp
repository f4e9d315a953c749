#include "galley/dnn/gemm_problem.hpp"

#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "dnn/key_text.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/problem.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) bad(std::string("gemm problem: ") + what + " overflows 64 bits");
  return out;
}

// The shortest text that reads back as the same double, so a key names each value one way.
std::string number_text(double v) {
  if (v == 0) return "0";  // -0 is the same problem as 0
  char buf[32];
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, ec == std::errc() ? ptr : buf);
}

bool parse_number_exact(std::string_view text, double& out) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && std::isfinite(out) && number_text(out) == text;
}

char direction_letter(GemmDirection d) {
  switch (d) {
    case GemmDirection::forward: return 'F';
    case GemmDirection::backward_data: return 'B';
    case GemmDirection::backward_weights: return 'W';
  }
  return '?';
}

// A batch of `batches` row-major rows x cols matrices: rank 2 when it holds one.
TensorDesc matrices(DType dtype, std::int64_t batches, std::int64_t rows, std::int64_t cols) {
  return batches == 1 ? TensorDesc::contiguous(dtype, {rows, cols}) : TensorDesc::contiguous(dtype, {batches, rows, cols});
}

}  // namespace

const char* to_string(GemmDirection direction) noexcept {
  switch (direction) {
    case GemmDirection::forward: return "forward";
    case GemmDirection::backward_data: return "backward_data";
    case GemmDirection::backward_weights: return "backward_weights";
  }
  return "?";
}

void GemmProblem::validate() const {
  const struct {
    const char* name;
    std::int64_t value;
  } sizes[] = {{"m (rows of op(A) and dst, -m)", m},
               {"n (columns of op(B) and dst, -n)", n},
               {"k (columns of op(A), rows of op(B), -k)", k},
               {"batch (--batch_count)", batch}};
  for (const auto& f : sizes) {
    if (f.value < 1) bad(std::string("gemm problem: ") + f.name + " = " + std::to_string(f.value) + " must be positive");
  }
  if (shared_a && batch == 1) bad("gemm problem: shared_a needs batch > 1 (with batch 1 every operand is shared)");
  if (shared_b && batch == 1) bad("gemm problem: shared_b needs batch > 1 (with batch 1 every operand is shared)");
  if (!std::isfinite(alpha)) bad("gemm problem: alpha = " + number_text(alpha) + " must be finite");
  if (!std::isfinite(beta)) bad("gemm problem: beta = " + number_text(beta) + " must be finite");
  if (direction != GemmDirection::forward && beta != 0) {
    bad("gemm problem: beta = " + number_text(beta) + " in direction " + to_string(direction) +
        ": beta only scales the old dst of the forward; backward directions write their gradients (beta 0)");
  }
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) {
    bad(std::string("gemm problem: dtype ") + galley::to_string(dtype) + " is not supported (valid: f32, f16, bf16)");
  }
  const std::int64_t elem = static_cast<std::int64_t>(size_of(dtype));
  checked_mul(checked_mul(checked_mul(a_batches(), m, "A element count (batch*m*k)"), k, "A element count (batch*m*k)"),
              elem, "A byte size");
  checked_mul(checked_mul(checked_mul(b_batches(), k, "B element count (batch*k*n)"), n, "B element count (batch*k*n)"),
              elem, "B byte size");
  checked_mul(checked_mul(checked_mul(batch, m, "dst element count (batch*m*n)"), n, "dst element count (batch*m*n)"),
              elem, "dst byte size");
}

TensorDesc GemmProblem::a_desc() const { return matrices(dtype, a_batches(), a_rows(), a_cols()); }
TensorDesc GemmProblem::b_desc() const { return matrices(dtype, b_batches(), b_rows(), b_cols()); }
TensorDesc GemmProblem::c_desc() const { return matrices(dtype, batch, m, n); }
TensorDesc GemmProblem::bias_desc() const { return TensorDesc::contiguous(dtype, {n}); }

std::vector<TensorArg> GemmProblem::tensors() const {
  std::vector<TensorArg> out;
  switch (direction) {
    case GemmDirection::forward:
      out.push_back({ArgId::src, a_desc(), false, "A (input)"});
      out.push_back({ArgId::wei, b_desc(), false, "B (weights)"});
      if (bias) out.push_back({ArgId::bias, bias_desc(), false, "bias"});
      out.push_back({ArgId::dst, c_desc(), true, "C (output)", beta != 0});
      break;
    case GemmDirection::backward_data:
      out.push_back({ArgId::diff_dst, c_desc(), false, "dC (output gradient)"});
      out.push_back({ArgId::wei, b_desc(), false, "B (weights)"});
      out.push_back({ArgId::diff_src, a_desc(), true, "dA (input gradient)"});
      break;
    case GemmDirection::backward_weights:
      out.push_back({ArgId::src, a_desc(), false, "A (input)"});
      out.push_back({ArgId::diff_dst, c_desc(), false, "dC (output gradient)"});
      out.push_back({ArgId::diff_wei, b_desc(), true, "dB (weight gradient)"});
      if (bias) out.push_back({ArgId::diff_bias, bias_desc(), true, "dbias (bias gradient)"});
      break;
  }
  return out;
}

double GemmProblem::flops() const {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch);
}

double GemmProblem::min_bytes() const {
  const double a = static_cast<double>(a_batches()) * static_cast<double>(m) * static_cast<double>(k);
  const double b = static_cast<double>(b_batches()) * static_cast<double>(k) * static_cast<double>(n);
  const double c = static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n);
  const double vec = bias ? static_cast<double>(n) : 0.0;
  double elements = 0;
  switch (direction) {
    case GemmDirection::forward: elements = a + b + vec + c * (beta != 0 ? 2 : 1); break;
    case GemmDirection::backward_data: elements = c + b + a; break;
    case GemmDirection::backward_weights: elements = a + c + b + vec; break;
  }
  return elements * static_cast<double>(size_of(dtype));
}

double GemmProblem::tolerance() const {
  const double base = conv_tolerance(dtype);
  if (dtype != DType::f32) return base;
  // Each output sums this many products; a correct fp32 sum in another order differs from the
  // double reference by about sqrt(terms) ulps.
  double terms = static_cast<double>(k);
  if (direction == GemmDirection::backward_data) {
    terms = static_cast<double>(n) * static_cast<double>(shared_a ? batch : 1);
  } else if (direction == GemmDirection::backward_weights) {
    terms = static_cast<double>(m) * static_cast<double>(shared_b ? batch : 1);
  }
  return terms > 1024 ? base * std::sqrt(terms / 1024) : base;
}

std::string GemmProblem::key() const {
  std::string out = "gemm-";
  out += direction_letter(direction);
  out += '-';
  out += galley::to_string(dtype);
  out += '-';
  out += trans_a ? 't' : 'n';
  out += trans_b ? 't' : 'n';
  out += "-b" + std::to_string(batch) + "-m" + std::to_string(m) + "-n" + std::to_string(n) + "-k" + std::to_string(k);
  out += std::string("-sa") + (shared_a ? '1' : '0') + "-sb" + (shared_b ? '1' : '0') + "-bias" + (bias ? '1' : '0');
  out += "-alpha" + number_text(alpha) + "-beta" + number_text(beta);
  return out;
}

GemmProblem GemmProblem::parse_key(std::string_view key) {
  // alpha and beta may hold '-' ("-0.5", "1e-05"): the reader finds them from the key's end.
  detail::KeyReader r("gemm", key, "gemm-F-f16-nt-b8-m1024-n4096-k1024-sa0-sb1-bias1-alpha1-beta0",
                      {"alpha", "beta"});
  GemmProblem p;
  const char direction = r.direction("FBW");
  p.direction = direction == 'F'   ? GemmDirection::forward
                : direction == 'B' ? GemmDirection::backward_data
                                   : GemmDirection::backward_weights;
  p.dtype = r.dtype();
  const std::size_t transposes = r.one_of("transposes", {"nn", "nt", "tn", "tt"});
  p.trans_a = transposes >= 2;
  p.trans_b = transposes % 2 == 1;
  p.batch = r.count("b");
  p.m = r.count("m");
  p.n = r.count("n");
  p.k = r.count("k");
  p.shared_a = r.flag("sa");
  p.shared_b = r.flag("sb");
  p.bias = r.flag("bias");
  p.alpha = r.field<double>("alpha", "number in shortest form", parse_number_exact);
  p.beta = r.field<double>("beta", "number in shortest form", parse_number_exact);
  r.end();
  p.validate();
  return p;
}

std::string GemmProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  const char* f = direction == GemmDirection::forward ? "1" : direction == GemmDirection::backward_data ? "2" : "4";
  std::string line = "galley bench gemm -m " + std::to_string(m) + " -n " + std::to_string(n) + " -k " +
                     std::to_string(k) + " --transA " + (trans_a ? "1" : "0") + " --transB " + (trans_b ? "1" : "0") +
                     " --batch_count " + std::to_string(batch);
  if (shared_a) line += " --shared_a";
  if (shared_b) line += " --shared_b";
  if (bias) line += " --bias";
  line += " --alpha " + number_text(alpha) + " --beta " + number_text(beta);
  line += std::string(" -F ") + f + " --dtype " + galley::to_string(dtype) + " --device " + device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

std::size_t GemmProblem::hash() const noexcept {
  std::uint64_t h = 0;
  const auto bits = [](double v) {
    std::uint64_t u = 0;
    if (v == 0) return std::int64_t{0};  // -0 == 0
    __builtin_memcpy(&u, &v, sizeof u);
    return static_cast<std::int64_t>(u);
  };
  for (std::int64_t v : {m, n, k, batch, std::int64_t{trans_a}, std::int64_t{trans_b}, std::int64_t{shared_a},
                         std::int64_t{shared_b}, std::int64_t{bias}, bits(alpha), bits(beta),
                         static_cast<std::int64_t>(dtype), static_cast<std::int64_t>(direction)}) {
    h ^= static_cast<std::uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  }
  return static_cast<std::size_t>(h);
}

GemmArgs GemmArgs::from(const OpArgs& args) {
  GemmArgs out;
  out.a = args.get(ArgId::src);
  out.b = args.get(ArgId::wei);
  out.bias = args.get(ArgId::bias);
  out.c = args.get(ArgId::dst);
  out.dc = args.get(ArgId::diff_dst);
  out.da = args.get(ArgId::diff_src);
  out.db = args.get(ArgId::diff_wei);
  out.dbias = args.get(ArgId::diff_bias);
  out.workspace = args.workspace;
  out.workspace_bytes = args.workspace_bytes;
  return out;
}

namespace {
const bool kGemmProblemRegistered = register_problem_ops(problem_ops<GemmProblem>());
}  // namespace

}  // namespace galley::dnn
