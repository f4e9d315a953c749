#include <algorithm>
#include <cmath>
#include <string>

#include "core/quoted_input.hpp"
#include "dnn/dims_check.hpp"
#include "dnn/key_text.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/problem.hpp"
#include "galley/dnn/reduce.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

}  // namespace

const char* to_string(ReduceOp op) noexcept { return op == ReduceOp::sum ? "sum" : "mean"; }

ReduceOp parse_reduce_op(std::string_view text) {
  if (text == "sum") return ReduceOp::sum;
  if (text == "mean") return ReduceOp::mean;
  bad("unknown reduce op " + quoted_input(text) + " (valid: sum, mean)");
}

ReduceArgs ReduceArgs::from(const OpArgs& args) {
  ReduceArgs out;
  out.src = args.get(ArgId::src);
  out.dst = args.get(ArgId::dst);
  out.diff_dst = args.get(ArgId::diff_dst);
  out.diff_src = args.get(ArgId::diff_src);
  out.workspace = args.workspace;
  out.workspace_bytes = args.workspace_bytes;
  return out;
}

unsigned ReduceProblem::axis_mask(const std::vector<int>& axes, int rank) {
  if (axes.empty()) bad("reduce: axes is empty (name at least one axis to reduce)");
  unsigned mask = 0;
  for (int a : axes) {
    if (a < -rank || a >= rank) {
      bad("reduce: axis " + std::to_string(a) + " is out of range for a rank-" + std::to_string(rank) +
          " tensor (valid: " + std::to_string(-rank) + " to " + std::to_string(rank - 1) + ")");
    }
    const int axis = a < 0 ? a + rank : a;
    if ((mask >> axis) & 1u) bad("reduce: axis " + std::to_string(a) + " is given twice in axes");
    mask |= 1u << axis;
  }
  return mask;
}

ReduceProblem ReduceProblem::over(const TensorDesc& desc, const std::vector<int>& axes, ReduceOp op,
                                  bool backward) {
  desc.validate("reduce");
  if (!desc.is_contiguous()) bad("reduce: tensor " + desc.to_string() + " is not contiguous (row-major)");
  ReduceProblem p;
  p.rank = desc.rank;
  p.dims = desc.dims;
  p.dtype = desc.dtype;
  p.op = op;
  p.backward = backward;
  p.axes = axis_mask(axes, desc.rank);
  p.validate();
  return p;
}

std::vector<int> ReduceProblem::axis_list() const {
  std::vector<int> out;
  for (int i = 0; i < kMaxRank; ++i) {
    if (reduces(i)) out.push_back(i);
  }
  return out;
}

TensorDesc ReduceProblem::src_desc() const { return TensorDesc::contiguous(dtype, dims.data(), rank); }

TensorDesc ReduceProblem::dst_desc() const {
  Dims out = dims;
  for (int i = 0; i < rank; ++i) {
    if (reduces(i)) out[static_cast<std::size_t>(i)] = 1;
  }
  return TensorDesc::contiguous(dtype, out.data(), rank);
}

std::int64_t ReduceProblem::src_elements() const {
  std::int64_t out = 1;
  for (int i = 0; i < rank; ++i) out *= dims[static_cast<std::size_t>(i)];
  return out;
}

std::int64_t ReduceProblem::dst_elements() const {
  std::int64_t out = 1;
  for (int i = 0; i < rank; ++i) {
    if (!reduces(i)) out *= dims[static_cast<std::size_t>(i)];
  }
  return out;
}

std::int64_t ReduceProblem::reduced_count() const {
  std::int64_t out = 1;
  for (int i = 0; i < rank; ++i) {
    if (reduces(i)) out *= dims[static_cast<std::size_t>(i)];
  }
  return out;
}

void ReduceProblem::validate() const {
  detail::check_rank_and_dims("reduce", rank, dims);
  if (axes == 0) bad("reduce problem: axes is empty (name at least one axis to reduce)");
  for (int i = rank; i < 32; ++i) {
    if ((axes >> i) & 1u) {
      bad("reduce problem: axis " + std::to_string(i) + " in axes is out of range for rank " +
          std::to_string(rank) + " (valid: 0 to " + std::to_string(rank - 1) + ")");
    }
  }
  detail::check_float_dtype_and_bytes("reduce", dtype, dims, rank);
}

std::vector<TensorArg> ReduceProblem::tensors() const {
  if (!backward)
    return {{ArgId::src, src_desc(), false, "src (input)"}, {ArgId::dst, dst_desc(), true, "dst (output)"}};
  return {{ArgId::diff_dst, dst_desc(), false, "diff_dst (output gradient)"},
          {ArgId::diff_src, src_desc(), true, "diff_src (input gradient)"}};
}

double ReduceProblem::flops() const { return static_cast<double>(src_elements()); }

double ReduceProblem::min_bytes() const {
  return static_cast<double>(src_elements() + dst_elements()) * static_cast<double>(size_of(dtype));
}

double ReduceProblem::tolerance() const {
  if (dtype != DType::f32) return 1e-2;
  return 1e-5 * std::max(1.0, std::sqrt(static_cast<double>(reduced_count()) / 1024.0));
}

namespace {
std::string axes_text(const ReduceProblem& p, char sep) {
  std::string out;
  for (int a : p.axis_list()) {
    if (!out.empty()) out += sep;
    out += std::to_string(a);
  }
  return out;
}
}  // namespace

std::string ReduceProblem::key() const {
  return std::string("reduce-") + (backward ? "B" : "F") + "-" + galley::to_string(dtype) + "-" +
         to_string(op) + "-a" + axes_text(*this, '.') + "-s" + detail::dims_text(dims, rank);
}

ReduceProblem ReduceProblem::parse_key(std::string_view key) {
  detail::KeyReader r("reduce", key, "reduce-F-f32-sum-a1.2-s2x3x4x5");
  ReduceProblem p;
  p.backward = r.direction() == 'B';
  p.dtype = r.dtype();
  p.op = r.parsed_word("op", parse_reduce_op);
  int previous = -1;
  for (std::int64_t axis : r.counts("a", '.', "axes")) {
    // Ascending and without repeats, so each axis set has one spelling.
    if (axis >= kMaxRank || axis <= previous) r.bad_field("ascending axes below " + std::to_string(kMaxRank));
    previous = static_cast<int>(axis);
    p.axes |= 1u << axis;
  }
  r.dims("s", p.dims, p.rank);
  r.end();
  try {
    p.validate();
  } catch (const Error& e) {
    r.fail(e.what());
  }
  return p;
}

std::string ReduceProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  std::string line = "galley bench reduce --shape " + detail::dims_text(dims, rank) + " --axes " +
                     axes_text(*this, ',') + " --op " + to_string(op) + " -F " + (backward ? "2" : "1") +
                     " --dtype " + galley::to_string(dtype) + " --device " + device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

std::size_t ReduceProblem::hash() const noexcept {
  std::uint64_t h = 0;
  const auto mix = [&h](std::int64_t v) {
    h ^= static_cast<std::uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  for (std::int64_t d : dims) mix(d);
  for (std::int64_t v :
       {static_cast<std::int64_t>(rank), static_cast<std::int64_t>(axes), static_cast<std::int64_t>(op),
        static_cast<std::int64_t>(dtype), static_cast<std::int64_t>(backward)}) {
    mix(v);
  }
  return static_cast<std::size_t>(h);
}

ReduceGroups ReduceGroups::of(const ReduceProblem& p) {
  ReduceGroups g;
  for (int i = 0; i < p.rank; ++i) {
    const std::int64_t d = p.dims[static_cast<std::size_t>(i)];
    if (d == 1) continue;
    const bool r = p.reduces(i);
    if (g.count > 0 && g.reduced[g.count - 1] == r) {
      g.size[g.count - 1] *= d;
    } else {
      g.size[g.count] = d;
      g.reduced[g.count] = r;
      ++g.count;
    }
  }
  return g;
}

namespace {
const bool kReduceProblemRegistered = register_problem_ops(problem_ops<ReduceProblem>());
}  // namespace

}  // namespace galley::dnn
