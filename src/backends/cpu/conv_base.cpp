#include "backends/cpu/conv_base.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>

#include "backends/cpu/conv_convert.hpp"
#include "backends/cpu/conv_epilogue.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::cpu {

ConvShape ConvShape::of(const dnn::ConvProblem& p) {
  return ConvShape{p.n,
                   p.c,
                   p.h,
                   p.w,
                   p.k,
                   p.out_h(),
                   p.out_w(),
                   p.y,
                   p.x,
                   p.pad_h,
                   p.pad_w,
                   p.stride_h,
                   p.stride_w,
                   p.dilation_h,
                   p.dilation_w,
                   p.groups,
                   p.c / p.groups,
                   p.k / p.groups,
                   p.layout == dnn::Layout::nhwc};
}

std::int64_t slot_count(std::int64_t tasks) {
  return std::max<std::int64_t>(1, std::min<std::int64_t>(pool_size(), tasks));
}

namespace {
constexpr std::int64_t kMinRowBlock = 24;  // four register tiles high
}  // namespace

std::int64_t row_block_count(std::int64_t tasks, std::int64_t rows, std::int64_t workers) {
  tasks = std::max<std::int64_t>(tasks, 1);
  if (workers <= 1 || tasks >= 4 * workers || tasks % workers == 0) return 1;
  const std::int64_t most = std::max<std::int64_t>(1, rows / kMinRowBlock);
  for (std::int64_t blocks = 2; blocks <= most; ++blocks) {
    if ((tasks * blocks) % workers == 0 && tasks * blocks >= 2 * workers) return blocks;
  }
  return most;
}

std::int64_t row_block_start(std::int64_t rows, std::int64_t b, std::int64_t blocks) {
  const std::int64_t tiles = (rows + avx512::kMr - 1) / avx512::kMr;
  return std::min(rows, avx512::kMr * (tiles * b / blocks));
}

void run_slotted(std::int64_t tasks, std::int64_t slots,
                 const std::function<void(std::int64_t slot, std::int64_t task)>& fn) {
  std::atomic<std::int64_t> next{0};
  parallel_for(0, slots, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t slot = lo; slot < hi; ++slot) {
      for (std::int64_t t = next.fetch_add(1); t < tasks; t = next.fetch_add(1)) fn(slot, t);
    }
  });
}

std::shared_ptr<const float> PreparedSlot::floats(std::size_t count,
                                                  const std::function<void(float*)>& fill) const {
  const std::shared_ptr<const void> data = slot_.get(tag_, [&]() -> std::shared_ptr<const void> {
    const std::size_t bytes = align_up64(std::max<std::size_t>(count, 1) * sizeof(float));
    void* raw = std::aligned_alloc(64, bytes);
    if (raw == nullptr) throw std::bad_alloc();
    std::shared_ptr<float> out(static_cast<float*>(raw), [](float* p) { std::free(p); });
    fill(out.get());
    return out;
  });
  return std::static_pointer_cast<const float>(data);
}

const float* prepared_or_scratch(const PreparedSlot* slot, std::size_t count, float* scratch,
                                 const std::function<void(float*)>& fill,
                                 std::shared_ptr<const float>& keep) {
  if (slot == nullptr) {
    fill(scratch);
    return scratch;
  }
  keep = slot->floats(count, fill);
  return keep.get();
}

dnn::Applicability CpuConvSolver::check(const dnn::ConvProblem& problem,
                                        const runtime::Device& device) const {
  if (!device.is_cpu()) return dnn::Applicability::no("runs on cpu only, not " + device.name());
  if (problem.direction != dnn::ConvDirection::forward) {
    return dnn::Applicability::no(std::string("forward only, not ") + dnn::to_string(problem.direction));
  }
  if (problem.dtype != DType::f32 && problem.dtype != DType::f16 && problem.dtype != DType::bf16) {
    return dnn::Applicability::no(std::string("dtype ") + to_string(problem.dtype) +
                                  " (valid: f32, f16, bf16)");
  }
  return check_f32(problem);
}

std::int64_t CpuConvSolver::images_per_chunk(const dnn::ConvProblem& p) const {
  const std::size_t per_image = (elems_x(p) + elems_y(p)) / static_cast<std::size_t>(p.n) * sizeof(float);
  const auto fit = static_cast<std::int64_t>(kLowPrecisionChunkBytes / std::max<std::size_t>(per_image, 1));
  return std::clamp<std::int64_t>(fit, 1, p.n);
}

std::size_t CpuConvSolver::workspace_bytes(const dnn::ConvProblem& problem,
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

void CpuConvSolver::compute(const dnn::ConvProblem& problem, const dnn::ConvArgs& args) const {
  const ConvEpilogueRunner epilogue(problem, args.bias, args.residual);
  if (problem.dtype == DType::f32) {
    // Low precision stages w through the workspace on every call, so only f32 takes a slot.
    std::optional<PreparedSlot> prepared;
    if (args.prepared != nullptr) {
      prepared.emplace(*args.prepared, std::string(name()) + " " + problem.key() + " w@" +
                                           std::to_string(reinterpret_cast<std::uintptr_t>(args.w)) + " " +
                                           std::string(to_string(cpu_isa())));
    }
    compute_f32(problem, static_cast<const float*>(args.x), static_cast<const float*>(args.w),
                static_cast<float*>(args.y), args.workspace, epilogue.empty() ? nullptr : &epilogue,
                prepared ? &*prepared : nullptr);
    return;
  }
  // Low precision: convert the weights once, then stage chunks of whole images (contiguous in
  // both layouts) through f32 buffers so the workspace stays bounded whatever the batch.
  const std::int64_t nb = images_per_chunk(problem);
  const dnn::ConvProblem full_chunk = as_f32(problem, nb);
  const StagingBuffers staging = carve_staging(problem, full_chunk, args.workspace);
  float* const w32 = staging.w;
  float* const x32 = staging.x;
  float* const y32 = staging.y;
  void* const inner = staging.rest;

  const std::size_t esize = size_of(problem.dtype);
  convert_to_f32(problem.dtype, args.w, w32, elems_w(problem));
  const std::size_t x_image = elems_x(problem) / static_cast<std::size_t>(problem.n);
  const std::size_t y_image = elems_y(problem) / static_cast<std::size_t>(problem.n);
  for (std::int64_t n0 = 0; n0 < problem.n; n0 += nb) {
    const std::int64_t count = std::min(nb, problem.n - n0);
    const dnn::ConvProblem chunk = as_f32(problem, count);
    const auto offset = static_cast<std::size_t>(n0);
    convert_to_f32(problem.dtype, static_cast<const char*>(args.x) + offset * x_image * esize, x32,
                   x_image * static_cast<std::size_t>(count));
    compute_f32(chunk, x32, w32, y32, inner, nullptr, nullptr);
    char* const out = static_cast<char*>(args.y) + offset * y_image * esize;
    if (epilogue.empty()) {
      convert_from_f32(problem.dtype, y32, out, y_image * static_cast<std::size_t>(count));
    } else {
      epilogue.apply(n0, count, y32, out);  // in the rounding pass, while the chunk is in cache
    }
  }
}

void CpuConvSolver::run(runtime::Stream& stream, const dnn::ConvProblem& problem,
                        const dnn::ConvArgs& args) const {
  const std::string op(name());
  problem.validate();
  if (const auto ok = check(problem, stream.device()); !ok) {
    throw Error(Status::unsupported, op + " cannot run " + problem.key() + ": " + ok.reason);
  }
  if (args.x == nullptr) throw Error(Status::invalid_argument, op + ": x is null");
  if (args.w == nullptr) throw Error(Status::invalid_argument, op + ": w is null");
  if (args.y == nullptr) throw Error(Status::invalid_argument, op + ": y is null");
  if (problem.epilogue.bias && args.bias == nullptr)
    throw Error(Status::invalid_argument, op + ": bias is null");
  if (problem.epilogue.residual && args.residual == nullptr) {
    throw Error(Status::invalid_argument, op + ": residual is null");
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
