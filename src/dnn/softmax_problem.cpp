#include <algorithm>
#include <cmath>
#include <string>

#include "core/quoted_input.hpp"
#include "dnn/dims_check.hpp"
#include "dnn/key_text.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/problem.hpp"
#include "galley/dnn/softmax.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

// Memory position of logical axis `a` of a rank-4 nhwc tensor (memory order N, H, W, C).
constexpr int kNhwcPosition[4] = {0, 3, 1, 2};

}  // namespace

const char* to_string(SoftmaxAlgorithm algorithm) noexcept {
  return algorithm == SoftmaxAlgorithm::softmax ? "softmax" : "logsoftmax";
}

SoftmaxArgs SoftmaxArgs::from(const OpArgs& args) {
  SoftmaxArgs out;
  out.src = args.get(ArgId::src);
  out.dst = args.get(ArgId::dst);
  out.diff_dst = args.get(ArgId::diff_dst);
  out.diff_src = args.get(ArgId::diff_src);
  return out;
}

SoftmaxProblem SoftmaxProblem::over(const TensorDesc& desc, int axis, SoftmaxAlgorithm algorithm,
                                    bool backward) {
  desc.validate("softmax");
  SoftmaxProblem p;
  p.rank = desc.rank;
  p.dims = desc.dims;
  p.dtype = desc.dtype;
  p.algorithm = algorithm;
  p.backward = backward;
  if (axis < -desc.rank || axis >= desc.rank) {
    bad("softmax: axis " + std::to_string(axis) + " is out of range for a rank-" + std::to_string(desc.rank) +
        " tensor (valid: " + std::to_string(-desc.rank) + " to " + std::to_string(desc.rank - 1) + ")");
  }
  p.axis = axis < 0 ? axis + desc.rank : axis;
  if (desc.is_contiguous()) {
    p.layout = Layout::nchw;
  } else if (desc.rank == 4 && desc.is_packed(Layout::nhwc)) {
    p.layout = Layout::nhwc;
  } else {
    bad("softmax: tensor " + desc.to_string() + " is neither contiguous nor packed nhwc");
  }
  p.validate();
  return p;
}

TensorDesc SoftmaxProblem::desc() const {
  if (rank == 4) return TensorDesc::packed(dtype, layout, dims[0], dims[1], dims[2], dims[3]);
  return TensorDesc::contiguous(dtype, dims.data(), rank);
}

namespace {
// The dims in memory order and the axis's position among them.
struct MemoryView {
  Dims dims{1, 1, 1, 1, 1, 1};
  int axis = 0;
};
MemoryView memory_view(const SoftmaxProblem& p) {
  MemoryView v;
  if (p.rank == 4 && p.layout == Layout::nhwc) {
    v.dims = {p.dims[0], p.dims[2], p.dims[3], p.dims[1], 1, 1};
    v.axis = kNhwcPosition[p.axis];
  } else {
    v.dims = p.dims;
    v.axis = p.axis;
  }
  return v;
}
}  // namespace

std::int64_t SoftmaxProblem::outer() const {
  const MemoryView v = memory_view(*this);
  std::int64_t out = 1;
  for (int i = 0; i < v.axis; ++i) out *= v.dims[static_cast<std::size_t>(i)];
  return out;
}
std::int64_t SoftmaxProblem::axis_size() const { return dims[static_cast<std::size_t>(axis)]; }
std::int64_t SoftmaxProblem::inner() const {
  const MemoryView v = memory_view(*this);
  std::int64_t out = 1;
  for (int i = v.axis + 1; i < rank; ++i) out *= v.dims[static_cast<std::size_t>(i)];
  return out;
}
std::int64_t SoftmaxProblem::elements() const {
  std::int64_t out = 1;
  for (int i = 0; i < rank; ++i) out *= dims[static_cast<std::size_t>(i)];
  return out;
}

void SoftmaxProblem::validate() const {
  detail::check_rank_and_dims("softmax", rank, dims);
  if (axis < 0 || axis >= rank) {
    bad("softmax problem: axis " + std::to_string(axis) + " is out of range for rank " +
        std::to_string(rank) + " (valid: 0 to " + std::to_string(rank - 1) + ")");
  }
  if (layout == Layout::nhwc && rank != 4) {
    bad("softmax problem: layout nhwc needs rank 4 (N, C, H, W), not rank " + std::to_string(rank) +
        "; other ranks are row-major (layout nchw)");
  }
  detail::check_float_dtype_and_bytes("softmax", dtype, dims, rank);
}

std::vector<TensorArg> SoftmaxProblem::tensors() const {
  const TensorDesc d = desc();
  if (!backward) return {{ArgId::src, d, false, "src (input)"}, {ArgId::dst, d, true, "dst (output)"}};
  return {{ArgId::diff_dst, d, false, "diff_dst (output gradient)"},
          {ArgId::dst, d, false, "dst (forward output)"},
          {ArgId::diff_src, d, true, "diff_src (input gradient)"}};
}

double SoftmaxProblem::flops() const { return (backward ? 4.0 : 5.0) * static_cast<double>(elements()); }

double SoftmaxProblem::min_bytes() const {
  return (backward ? 3.0 : 2.0) * static_cast<double>(elements()) * static_cast<double>(size_of(dtype));
}

double SoftmaxProblem::tolerance() const {
  if (dtype != DType::f32) return 1e-2;
  return 1e-5 * std::max(1.0, std::sqrt(static_cast<double>(axis_size()) / 1024.0));
}

std::string SoftmaxProblem::key() const {
  return std::string("softmax-") + (backward ? "B" : "F") + "-" + galley::to_string(dtype) + "-" +
         to_string(layout) + "-" + to_string(algorithm) + "-a" + std::to_string(axis) + "-s" +
         detail::dims_text(dims, rank);
}

SoftmaxProblem SoftmaxProblem::parse_key(std::string_view key) {
  detail::KeyReader r("softmax", key, "softmax-F-f32-nchw-softmax-a1-s2x3x4x5");
  SoftmaxProblem p;
  p.backward = r.direction() == 'B';
  p.dtype = r.dtype();
  p.layout = r.layout();
  p.algorithm = r.one_of("algorithm", {"softmax", "logsoftmax"}) == 0 ? SoftmaxAlgorithm::softmax
                                                                      : SoftmaxAlgorithm::log_softmax;
  const std::int64_t axis = r.count("a");
  if (axis >= kMaxRank) r.bad_field("axis below " + std::to_string(kMaxRank));
  p.axis = static_cast<int>(axis);
  r.dims("s", p.dims, p.rank);
  r.end();
  try {
    p.validate();
  } catch (const Error& e) {
    r.fail(e.what());
  }
  return p;
}

std::string SoftmaxProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  std::string line = "galley bench softmax --shape " + detail::dims_text(dims, rank) + " --axis " +
                     std::to_string(axis) + (algorithm == SoftmaxAlgorithm::log_softmax ? " --log" : "") +
                     " -F " + (backward ? "2" : "1") + " --dtype " + galley::to_string(dtype) + " --layout " +
                     to_string(layout) + " --device " + device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

std::size_t SoftmaxProblem::hash() const noexcept {
  std::uint64_t h = 0;
  const auto mix = [&h](std::int64_t v) {
    h ^= static_cast<std::uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  for (std::int64_t d : dims) mix(d);
  for (std::int64_t v : {static_cast<std::int64_t>(rank), static_cast<std::int64_t>(axis),
                         static_cast<std::int64_t>(algorithm), static_cast<std::int64_t>(dtype),
                         static_cast<std::int64_t>(layout), static_cast<std::int64_t>(backward)}) {
    mix(v);
  }
  return static_cast<std::size_t>(h);
}

namespace {
const bool kSoftmaxProblemRegistered = register_problem_ops(problem_ops<SoftmaxProblem>());
}  // namespace

}  // namespace galley::dnn
