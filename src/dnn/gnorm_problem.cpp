// GroupNormProblem: validation, tensors, key and repro line.
#include "galley/dnn/gnorm_problem.hpp"

#include <functional>
#include <string>

#include "dnn/key_text.hpp"
#include "dnn/norm_common.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/problem.hpp"

namespace galley::dnn {

using norm::bad;

void GroupNormProblem::validate() const {
  const struct {
    const char* name;
    std::int64_t value;
  } sizes[] = {{"n (batch, -n)", n},
               {"c (channels, -c)", c},
               {"h (height, -H)", h},
               {"w (width, -W)", w},
               {"groups (-g)", groups}};
  for (const auto& s : sizes) {
    if (s.value < 1)
      bad(std::string("gnorm problem: ") + s.name + " = " + std::to_string(s.value) + " must be positive");
  }
  if (c % groups != 0) {
    bad("gnorm problem: groups (-g) = " + std::to_string(groups) +
        " does not divide c (channels) = " + std::to_string(c));
  }
  norm::check_dtype_epsilon("gnorm problem", dtype, epsilon);
  const std::int64_t all[] = {n, c, h, w};
  norm::checked_product("gnorm problem: element count (n*c*h*w)", all, 4, size_of(dtype));
}

TensorDesc GroupNormProblem::data_desc() const { return TensorDesc::packed(dtype, layout, n, c, h, w); }
TensorDesc GroupNormProblem::channel_desc() const { return TensorDesc::contiguous(DType::f32, {c}); }
TensorDesc GroupNormProblem::stat_desc() const { return TensorDesc::contiguous(DType::f32, {n, groups}); }

std::vector<TensorArg> GroupNormProblem::tensors() const {
  const TensorDesc data = data_desc(), chan = channel_desc(), stat = stat_desc();
  if (direction == NormDirection::backward) {
    return {{ArgId::diff_dst, data, false, "dy (output gradient)"},
            {ArgId::src, data, false, "x (input)"},
            {ArgId::scale, chan, false, "scale (gamma)"},
            {ArgId::saved_mean, stat, false, "saved_mean"},
            {ArgId::saved_invstd, stat, false, "saved_invstd", false, Fill::positive},
            {ArgId::diff_src, data, true, "dx (input gradient)"},
            {ArgId::diff_scale, chan, true, "dscale (gamma gradient)"},
            {ArgId::diff_shift, chan, true, "dshift (beta gradient)"}};
  }
  return {{ArgId::src, data, false, "x (input)"},        {ArgId::scale, chan, false, "scale (gamma)"},
          {ArgId::shift, chan, false, "shift (beta)"},   {ArgId::dst, data, true, "y (output)"},
          {ArgId::saved_mean, stat, true, "saved_mean"}, {ArgId::saved_invstd, stat, true, "saved_invstd"}};
}

double GroupNormProblem::flops() const {
  return (direction == NormDirection::backward ? 11.0 : 8.0) * static_cast<double>(n) *
         static_cast<double>(c) * static_cast<double>(h) * static_cast<double>(w);
}

double GroupNormProblem::min_bytes() const { return norm::tensor_bytes(tensors()); }

double GroupNormProblem::tolerance() const { return norm::norm_tolerance(dtype, 1e-4); }

std::string GroupNormProblem::key() const {
  return std::string("gnorm-") + norm::direction_letter(direction) + "-" + galley::to_string(dtype) + "-" +
         to_string(layout) + "-n" + std::to_string(n) + "-c" + std::to_string(c) + "-h" + std::to_string(h) +
         "-w" + std::to_string(w) + "-g" + std::to_string(groups) + "-e" + norm::format_real(epsilon);
}

GroupNormProblem GroupNormProblem::parse_key(std::string_view key) {
  detail::KeyReader r("gnorm", key, "gnorm-F-f32-nchw-n8-c64-h28-w28-g32-e0.00001");
  GroupNormProblem p;
  p.direction = norm::direction_of(r.direction());
  p.dtype = r.dtype();
  p.layout = r.layout();
  p.n = r.count("n");
  p.c = r.count("c");
  p.h = r.count("h");
  p.w = r.count("w");
  p.groups = r.count("g");
  p.epsilon = r.field<double>("e", "epsilon in fixed notation", norm::parse_real_canonical);
  r.end();
  p.validate();
  return p;
}

std::string GroupNormProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  std::string line = "galley bench gnorm -n " + std::to_string(n) + " -c " + std::to_string(c) + " -H " +
                     std::to_string(h) + " -W " + std::to_string(w) + " -g " + std::to_string(groups) +
                     " -F " + (direction == NormDirection::backward ? "2" : "1") + " --epsilon " +
                     norm::format_real(epsilon) + " --dtype " + galley::to_string(dtype) + " --layout " +
                     to_string(layout) + " --device " + device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

std::size_t GroupNormProblem::hash() const noexcept {
  std::uint64_t hv = 0;
  const auto mix = [&](std::uint64_t v) { hv ^= v + 0x9e3779b97f4a7c15ull + (hv << 6) + (hv >> 2); };
  for (std::int64_t v : {n, c, h, w, groups, static_cast<std::int64_t>(dtype),
                         static_cast<std::int64_t>(layout), static_cast<std::int64_t>(direction)}) {
    mix(static_cast<std::uint64_t>(v));
  }
  mix(std::hash<double>{}(epsilon));
  return static_cast<std::size_t>(hv);
}

namespace {
const bool kRegistered = register_problem_ops(problem_ops<GroupNormProblem>());
}  // namespace

}  // namespace galley::dnn
