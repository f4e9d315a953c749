// LayerNormProblem: validation, tensors, key and repro line.
#include "galley/dnn/lnorm_problem.hpp"

#include <functional>
#include <string>

#include "dnn/key_text.hpp"
#include "dnn/norm_common.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/problem.hpp"

namespace galley::dnn {

using norm::bad;

namespace {

std::string dims_text(const Dims& dims, int first, int last) {
  std::string out;
  for (int i = first; i < last; ++i) {
    if (i > first) out += 'x';
    out += std::to_string(dims[static_cast<std::size_t>(i)]);
  }
  return out;
}

}  // namespace

LayerNormProblem LayerNormProblem::of(std::initializer_list<std::int64_t> shape, int normalized_dims,
                                      DType dtype) {
  LayerNormProblem p;
  if (shape.size() < 1 || shape.size() > static_cast<std::size_t>(kMaxRank)) {
    bad("lnorm problem: rank " + std::to_string(shape.size()) + " is outside 1.." + std::to_string(kMaxRank));
  }
  p.rank = static_cast<int>(shape.size());
  int i = 0;
  for (std::int64_t d : shape) p.dims[static_cast<std::size_t>(i++)] = d;
  p.axis = p.rank - normalized_dims;
  p.dtype = dtype;
  return p;
}

std::int64_t LayerNormProblem::outer() const {
  std::int64_t out = 1;
  for (int i = 0; i < axis; ++i) out *= dims[static_cast<std::size_t>(i)];
  return out;
}

std::int64_t LayerNormProblem::inner() const {
  std::int64_t out = 1;
  for (int i = axis; i < rank; ++i) out *= dims[static_cast<std::size_t>(i)];
  return out;
}

void LayerNormProblem::validate() const {
  if (rank < 1 || rank > kMaxRank) {
    bad("lnorm problem: rank = " + std::to_string(rank) + " is outside 1.." + std::to_string(kMaxRank));
  }
  for (int i = 0; i < kMaxRank; ++i) {
    const std::int64_t d = dims[static_cast<std::size_t>(i)];
    if (i < rank && d < 1)
      bad("lnorm problem: dims[" + std::to_string(i) + "] = " + std::to_string(d) + " must be positive");
    if (i >= rank && d != 1) {
      bad("lnorm problem: dims[" + std::to_string(i) + "] = " + std::to_string(d) + " past rank " +
          std::to_string(rank) + " must be 1");
    }
  }
  if (axis < 0 || axis >= rank) {
    bad("lnorm problem: axis (first normalised dim, -o) = " + std::to_string(axis) + " must be in [0, " +
        std::to_string(rank - 1) + "] for rank " + std::to_string(rank));
  }
  norm::check_dtype_epsilon("lnorm problem", dtype, epsilon);
  norm::checked_product("lnorm problem: element count", dims.data(), rank, size_of(dtype));
}

TensorDesc LayerNormProblem::data_desc() const { return TensorDesc::contiguous(dtype, dims.data(), rank); }

TensorDesc LayerNormProblem::affine_desc() const {
  return TensorDesc::contiguous(DType::f32, dims.data() + axis, rank - axis);
}

TensorDesc LayerNormProblem::stat_desc() const {
  if (axis == 0) return TensorDesc::contiguous(DType::f32, {1});
  return TensorDesc::contiguous(DType::f32, dims.data(), axis);
}

std::vector<TensorArg> LayerNormProblem::tensors() const {
  const TensorDesc data = data_desc(), affine = affine_desc(), stat = stat_desc();
  if (direction == NormDirection::backward) {
    return {{ArgId::diff_dst, data, false, "dy (output gradient)"},
            {ArgId::src, data, false, "x (input)"},
            {ArgId::scale, affine, false, "scale (gamma)"},
            {ArgId::saved_mean, stat, false, "saved_mean"},
            {ArgId::saved_invstd, stat, false, "saved_invstd", false, Fill::positive},
            {ArgId::diff_src, data, true, "dx (input gradient)"},
            {ArgId::diff_scale, affine, true, "dscale (gamma gradient)"},
            {ArgId::diff_shift, affine, true, "dshift (beta gradient)"}};
  }
  return {{ArgId::src, data, false, "x (input)"},        {ArgId::scale, affine, false, "scale (gamma)"},
          {ArgId::shift, affine, false, "shift (beta)"}, {ArgId::dst, data, true, "y (output)"},
          {ArgId::saved_mean, stat, true, "saved_mean"}, {ArgId::saved_invstd, stat, true, "saved_invstd"}};
}

double LayerNormProblem::flops() const {
  return (direction == NormDirection::backward ? 11.0 : 8.0) * static_cast<double>(outer()) *
         static_cast<double>(inner());
}

double LayerNormProblem::min_bytes() const { return norm::tensor_bytes(tensors()); }

double LayerNormProblem::tolerance() const { return norm::norm_tolerance(dtype, 1e-4); }

std::string LayerNormProblem::key() const {
  return std::string("lnorm-") + norm::direction_letter(direction) + "-" + galley::to_string(dtype) + "-d" +
         dims_text(dims, 0, rank) + "-a" + std::to_string(axis) + "-e" + norm::format_real(epsilon);
}

LayerNormProblem LayerNormProblem::parse_key(std::string_view key) {
  detail::KeyReader r("lnorm", key, "lnorm-F-f32-d8x197x768-a2-e0.00001");
  LayerNormProblem p;
  p.direction = norm::direction_of(r.direction());
  p.dtype = r.dtype();
  r.dims("d", p.dims, p.rank);
  const std::int64_t axis = r.count("a");
  if (axis > kMaxRank) r.bad_field("axis");
  p.axis = static_cast<int>(axis);
  p.epsilon = r.field<double>("e", "epsilon in fixed notation", norm::parse_real_canonical);
  r.end();
  p.validate();
  return p;
}

std::string LayerNormProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  std::string line = "galley bench lnorm -X " + dims_text(dims, 0, rank) + " -o " + std::to_string(axis) +
                     " -F " + (direction == NormDirection::backward ? "2" : "1") + " --epsilon " +
                     norm::format_real(epsilon) + " --dtype " + galley::to_string(dtype) + " --device " +
                     device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

std::size_t LayerNormProblem::hash() const noexcept {
  std::uint64_t hv = 0;
  const auto mix = [&](std::uint64_t v) { hv ^= v + 0x9e3779b97f4a7c15ull + (hv << 6) + (hv >> 2); };
  for (std::int64_t d : dims) mix(static_cast<std::uint64_t>(d));
  for (std::int64_t v : {static_cast<std::int64_t>(rank), static_cast<std::int64_t>(axis),
                         static_cast<std::int64_t>(dtype), static_cast<std::int64_t>(direction)}) {
    mix(static_cast<std::uint64_t>(v));
  }
  mix(std::hash<double>{}(epsilon));
  return static_cast<std::size_t>(hv);
}

namespace {
const bool kRegistered = register_problem_ops(problem_ops<LayerNormProblem>());
}  // namespace

}  // namespace galley::dnn
