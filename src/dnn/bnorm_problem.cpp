// BatchNormProblem: validation, tensors, key and repro line.
#include "galley/dnn/bnorm_problem.hpp"

#include <cmath>
#include <functional>
#include <string>

#include "dnn/key_text.hpp"
#include "dnn/norm_common.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/problem.hpp"

namespace galley::dnn {

using norm::bad;

const char* to_string(BatchNormMode mode) noexcept {
  return mode == BatchNormMode::inference ? "inference" : "training";
}

void BatchNormProblem::validate() const {
  const struct {
    const char* name;
    std::int64_t value;
  } sizes[] = {{"n (batch, -n)", n}, {"c (channels, -c)", c}, {"h (height, -H)", h}, {"w (width, -W)", w}};
  for (const auto& s : sizes) {
    if (s.value < 1)
      bad(std::string("bnorm problem: ") + s.name + " = " + std::to_string(s.value) + " must be positive");
  }
  norm::check_dtype_epsilon("bnorm problem", dtype, epsilon);
  if (!std::isfinite(momentum) || momentum < 0 || momentum > 1) {
    bad("bnorm problem: momentum = " + std::to_string(momentum) + " must be in [0, 1]");
  }
  if (direction == NormDirection::backward && mode != BatchNormMode::training) {
    bad("bnorm problem: backward needs mode training (it reads the saved batch statistics), not inference");
  }
  const std::int64_t all[] = {n, c, h, w};
  norm::checked_product("bnorm problem: element count (n*c*h*w)", all, 4, size_of(dtype));
  if (mode == BatchNormMode::training && n * h * w < 2) {
    bad("bnorm problem: training needs more than one value per channel (n*h*w = " +
        std::to_string(n * h * w) + "): the running variance is unbiased");
  }
}

TensorDesc BatchNormProblem::data_desc() const { return TensorDesc::packed(dtype, layout, n, c, h, w); }
TensorDesc BatchNormProblem::channel_desc() const { return TensorDesc::contiguous(DType::f32, {c}); }

std::vector<TensorArg> BatchNormProblem::tensors() const {
  const TensorDesc data = data_desc(), chan = channel_desc();
  if (direction == NormDirection::backward) {
    return {{ArgId::diff_dst, data, false, "dy (output gradient)"},
            {ArgId::src, data, false, "x (input)"},
            {ArgId::scale, chan, false, "scale (gamma)"},
            {ArgId::saved_mean, chan, false, "saved_mean"},
            {ArgId::saved_invstd, chan, false, "saved_invstd", false, Fill::positive},
            {ArgId::diff_src, data, true, "dx (input gradient)"},
            {ArgId::diff_scale, chan, true, "dscale (gamma gradient)"},
            {ArgId::diff_shift, chan, true, "dshift (beta gradient)"}};
  }
  if (mode == BatchNormMode::inference) {
    return {{ArgId::src, data, false, "x (input)"},
            {ArgId::scale, chan, false, "scale (gamma)"},
            {ArgId::shift, chan, false, "shift (beta)"},
            {ArgId::mean, chan, false, "running_mean"},
            {ArgId::variance, chan, false, "running_var", false, Fill::positive},
            {ArgId::dst, data, true, "y (output)"}};
  }
  return {{ArgId::src, data, false, "x (input)"},
          {ArgId::scale, chan, false, "scale (gamma)"},
          {ArgId::shift, chan, false, "shift (beta)"},
          {ArgId::dst, data, true, "y (output)"},
          {ArgId::saved_mean, chan, true, "saved_mean"},
          {ArgId::saved_invstd, chan, true, "saved_invstd"},
          {ArgId::mean, chan, true, "running_mean", true, Fill::uniform},
          {ArgId::variance, chan, true, "running_var", true, Fill::positive}};
}

double BatchNormProblem::flops() const {
  const double per = direction == NormDirection::backward ? 11 : mode == BatchNormMode::inference ? 2 : 8;
  return per * static_cast<double>(n) * static_cast<double>(c) * static_cast<double>(h) *
         static_cast<double>(w);
}

double BatchNormProblem::min_bytes() const { return norm::tensor_bytes(tensors()); }

double BatchNormProblem::tolerance() const {
  const bool one_pass = direction == NormDirection::forward && mode == BatchNormMode::inference;
  return norm::norm_tolerance(dtype, one_pass ? 1e-5 : 1e-4);
}

std::string BatchNormProblem::key() const {
  return std::string("bnorm-") + norm::direction_letter(direction) + "-" +
         (mode == BatchNormMode::training ? "train" : "infer") + "-" + galley::to_string(dtype) + "-" +
         to_string(layout) + "-n" + std::to_string(n) + "-c" + std::to_string(c) + "-h" + std::to_string(h) +
         "-w" + std::to_string(w) + "-e" + norm::format_real(epsilon) + "-m" + norm::format_real(momentum);
}

BatchNormProblem BatchNormProblem::parse_key(std::string_view key) {
  detail::KeyReader r("bnorm", key, "bnorm-F-train-f32-nchw-n32-c64-h56-w56-e0.00001-m0.1");
  BatchNormProblem p;
  p.direction = norm::direction_of(r.direction());
  p.mode = r.one_of("mode", {"train", "infer"}) == 0 ? BatchNormMode::training : BatchNormMode::inference;
  p.dtype = r.dtype();
  p.layout = r.layout();
  p.n = r.count("n");
  p.c = r.count("c");
  p.h = r.count("h");
  p.w = r.count("w");
  p.epsilon = r.field<double>("e", "epsilon in fixed notation", norm::parse_real_canonical);
  p.momentum = r.field<double>("m", "momentum in fixed notation", norm::parse_real_canonical);
  r.end();
  p.validate();
  return p;
}

std::string BatchNormProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  const bool backward = direction == NormDirection::backward;
  std::string line = "galley bench bnorm -n " + std::to_string(n) + " -c " + std::to_string(c) + " -H " +
                     std::to_string(h) + " -W " + std::to_string(w) + " -m 1 -F " +
                     (backward                          ? "0"
                      : mode == BatchNormMode::training ? "1"
                                                        : "2") +
                     " -b " + (backward ? "1" : "0") + " --epsilon " + norm::format_real(epsilon) +
                     " --momentum " + norm::format_real(momentum) + " --dtype " + galley::to_string(dtype) +
                     " --layout " + to_string(layout) + " --device " + device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

std::size_t BatchNormProblem::hash() const noexcept {
  std::uint64_t hv = 0;
  const auto mix = [&](std::uint64_t v) { hv ^= v + 0x9e3779b97f4a7c15ull + (hv << 6) + (hv >> 2); };
  for (std::int64_t v : {n, c, h, w, static_cast<std::int64_t>(dtype), static_cast<std::int64_t>(layout),
                         static_cast<std::int64_t>(mode), static_cast<std::int64_t>(direction)}) {
    mix(static_cast<std::uint64_t>(v));
  }
  mix(std::hash<double>{}(epsilon));
  mix(std::hash<double>{}(momentum));
  return static_cast<std::size_t>(hv);
}

namespace {
const bool kRegistered = register_problem_ops(problem_ops<BatchNormProblem>());
}  // namespace

}  // namespace galley::dnn
