#include "backends/cpu/conv_bwd_base.hpp"

#include <algorithm>
#include <string>

#include "backends/cpu/conv_base.hpp"
#include "backends/cpu/conv_convert.hpp"
#include "dnn/conv_backward_args.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::cpu {

dnn::Applicability CpuConvBwdSolver::check(const dnn::ConvProblem& problem,
                                           const runtime::Device& device) const {
  if (!device.is_cpu()) return dnn::Applicability::no("runs on cpu only, not " + device.name());
  if (problem.direction != direction_) {
    return dnn::Applicability::no(std::string(dnn::to_string(direction_)) + " only, not " +
                                  dnn::to_string(problem.direction));
  }
  if (problem.dtype != DType::f32 && problem.dtype != DType::f16 && problem.dtype != DType::bf16) {
    return dnn::Applicability::no(std::string("dtype ") + to_string(problem.dtype) +
                                  " (valid: f32, f16, bf16)");
  }
  return check_f32(problem);
}

std::int64_t CpuConvBwdSolver::images_per_chunk(const dnn::ConvProblem& p) const {
  const std::size_t per_image = (elems_x(p) + elems_y(p)) / static_cast<std::size_t>(p.n) * sizeof(float);
  const auto fit = static_cast<std::int64_t>(kLowPrecisionChunkBytes / std::max<std::size_t>(per_image, 1));
  return std::clamp<std::int64_t>(fit, 1, p.n);
}

std::size_t CpuConvBwdSolver::workspace_bytes(const dnn::ConvProblem& problem,
                                              const runtime::Device& /*device*/) const {
  if (problem.dtype == DType::f32) return f32_workspace_bytes(problem);
  const std::int64_t nb = images_per_chunk(problem);
  const std::int64_t rest = problem.n % nb;
  const dnn::ConvProblem chunk = as_f32(problem, nb);
  std::size_t inner = f32_workspace_bytes(chunk);
  if (rest != 0) inner = std::max(inner, f32_workspace_bytes(as_f32(problem, rest)));
  return align_up64(elems_w(problem) * sizeof(float)) + align_up64(elems_x(chunk) * sizeof(float)) +
         align_up64(elems_y(chunk) * sizeof(float)) + inner;
}

void CpuConvBwdSolver::compute_data_f32(const dnn::ConvProblem& /*problem*/, const float* /*dy*/,
                                        const float* /*w*/, float* /*dx*/, void* /*ws*/) const {
  throw Error(Status::internal, std::string(name()) + " has no backward_data algorithm");
}

void CpuConvBwdSolver::compute_weights_f32(const dnn::ConvProblem& /*problem*/, const float* /*x*/,
                                           const float* /*dy*/, float* /*dw*/, bool /*accumulate*/,
                                           void* /*ws*/) const {
  throw Error(Status::internal, std::string(name()) + " has no backward_weights algorithm");
}

void CpuConvBwdSolver::compute(const dnn::ConvProblem& problem, const dnn::ConvArgs& args) const {
  if (problem.dtype != DType::f32) {
    if (direction_ == dnn::ConvDirection::backward_data) {
      compute_data_staged(problem, args);
    } else {
      compute_weights_staged(problem, args);
    }
    return;
  }
  if (direction_ == dnn::ConvDirection::backward_data) {
    const dnn::BackwardDataArgs a = dnn::backward_data_args(args);
    compute_data_f32(problem, static_cast<const float*>(a.dy), static_cast<const float*>(a.w),
                     static_cast<float*>(a.dx), args.workspace);
  } else {
    const dnn::BackwardWeightsArgs a = dnn::backward_weights_args(args);
    compute_weights_f32(problem, static_cast<const float*>(a.x), static_cast<const float*>(a.dy),
                        static_cast<float*>(a.dw), false, args.workspace);
  }
}

// Low precision, backward data: the weights once, then chunks of whole images of dy in and dx
// out (contiguous in both layouts), so the workspace stays bounded whatever the batch.
void CpuConvBwdSolver::compute_data_staged(const dnn::ConvProblem& problem, const dnn::ConvArgs& args) const {
  const dnn::BackwardDataArgs a = dnn::backward_data_args(args);
  const std::int64_t nb = images_per_chunk(problem);
  const dnn::ConvProblem full_chunk = as_f32(problem, nb);
  const StagingBuffers staging = carve_staging(problem, full_chunk, args.workspace);
  float* const w32 = staging.w;
  float* const dx32 = staging.x;
  float* const dy32 = staging.y;
  void* const base = staging.rest;

  const std::size_t esize = size_of(problem.dtype);
  convert_to_f32(problem.dtype, a.w, w32, elems_w(problem));
  const std::size_t x_image = elems_x(problem) / static_cast<std::size_t>(problem.n);
  const std::size_t y_image = elems_y(problem) / static_cast<std::size_t>(problem.n);
  for (std::int64_t n0 = 0; n0 < problem.n; n0 += nb) {
    const std::int64_t count = std::min(nb, problem.n - n0);
    const auto first = static_cast<std::size_t>(n0), images = static_cast<std::size_t>(count);
    convert_to_f32(problem.dtype, static_cast<const char*>(a.dy) + first * y_image * esize, dy32,
                   y_image * images);
    compute_data_f32(as_f32(problem, count), dy32, w32, dx32, base);
    convert_from_f32(problem.dtype, dx32, static_cast<char*>(a.dx) + first * x_image * esize,
                     x_image * images);
  }
}

// Low precision, backward weights: chunks of images of x and dy in, the weight gradient summed
// over the chunks in f32 and rounded once at the end.
void CpuConvBwdSolver::compute_weights_staged(const dnn::ConvProblem& problem,
                                              const dnn::ConvArgs& args) const {
  const dnn::BackwardWeightsArgs a = dnn::backward_weights_args(args);
  const std::int64_t nb = images_per_chunk(problem);
  const dnn::ConvProblem full_chunk = as_f32(problem, nb);
  const StagingBuffers staging = carve_staging(problem, full_chunk, args.workspace);
  float* const dw32 = staging.w;
  float* const x32 = staging.x;
  float* const dy32 = staging.y;
  void* const base = staging.rest;

  const std::size_t esize = size_of(problem.dtype);
  const std::size_t x_image = elems_x(problem) / static_cast<std::size_t>(problem.n);
  const std::size_t y_image = elems_y(problem) / static_cast<std::size_t>(problem.n);
  for (std::int64_t n0 = 0; n0 < problem.n; n0 += nb) {
    const std::int64_t count = std::min(nb, problem.n - n0);
    const auto first = static_cast<std::size_t>(n0), images = static_cast<std::size_t>(count);
    convert_to_f32(problem.dtype, static_cast<const char*>(a.x) + first * x_image * esize, x32,
                   x_image * images);
    convert_to_f32(problem.dtype, static_cast<const char*>(a.dy) + first * y_image * esize, dy32,
                   y_image * images);
    compute_weights_f32(as_f32(problem, count), x32, dy32, dw32, n0 > 0, base);
  }
  convert_from_f32(problem.dtype, dw32, a.dw, elems_w(problem));
}

void CpuConvBwdSolver::run(runtime::Stream& stream, const dnn::ConvProblem& problem,
                           const dnn::ConvArgs& args) const {
  const std::string op(name());
  problem.validate();
  if (const auto ok = check(problem, stream.device()); !ok) {
    throw Error(Status::unsupported, op + " cannot run " + problem.key() + ": " + ok.reason);
  }
  // Named as the pass sees them.
  const auto require = [&op](const void* ptr, const char* what) {
    if (ptr == nullptr) throw Error(Status::invalid_argument, op + ": " + what + " is null");
  };
  if (direction_ == dnn::ConvDirection::backward_data) {
    require(args.dy, "dy");
    require(args.w, "w");
    require(args.dx, "dx");
  } else {
    require(args.x, "x");
    require(args.dy, "dy");
    require(args.dw, "dw");
  }
  const std::size_t need = workspace_bytes(problem, stream.device());
  if (need > 0 && (args.workspace == nullptr || args.workspace_bytes < need)) {
    throw Error(Status::invalid_argument, op + ": workspace of " + std::to_string(args.workspace_bytes) +
                                              " bytes at " + (args.workspace ? "non-null" : "null") +
                                              " pointer, needs " + std::to_string(need) + " bytes");
  }
  // The task outlives this call: capture the problem and pointers by value. Solvers are
  // registered for the life of the process, so `this` stays valid.
  stream.launch(op, [&] { stream.host_task([this, problem, args] { compute(problem, args); }); });
}

}  // namespace galley::backends::cpu
