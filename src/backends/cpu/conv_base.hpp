// The common frame of the cpu conv solvers: device/direction/dtype checks, f16/bf16 staging
// through f32 workspace, the fused epilogue (conv_epilogue.hpp), argument checks and the host-task
// launch. A solver supplies only its f32 algorithm: check_f32, f32_workspace_bytes and compute_f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "backends/cpu/conv_epilogue.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/dnn/prepared_weights.hpp"

namespace galley::backends::cpu {

/// A problem's sizes as plain integers, in the names the kernels use.
struct ConvShape {
  std::int64_t n, c, h, w;  ///< input
  std::int64_t k, ho, wo;   ///< output channels and size
  std::int64_t r, s;        ///< filter height (y) and width (x)
  std::int64_t ph, pw;      ///< padding
  std::int64_t sh, sw;      ///< strides
  std::int64_t dh, dw;      ///< dilations
  std::int64_t g, cg, kg;   ///< groups, channels per group in and out
  bool nhwc;
  static ConvShape of(const dnn::ConvProblem& problem);
};

/// How many blocks to cut `total` items into so `want` workers are busy, each block holding at
/// least `min_block` items (never fewer than one block, never more than `total`).
inline std::int64_t block_count(std::int64_t total, std::int64_t min_block, std::int64_t want) {
  std::int64_t blocks = want;
  if (min_block > 0) blocks = blocks < total / min_block ? blocks : total / min_block;
  if (blocks > total) blocks = total;
  return blocks < 1 ? 1 : blocks;
}

/// Output-channel blocks to cut each GEMM task into when the (image, group, pixel block) tasks are
/// too few, or too few to share evenly, for `workers` (batch 1 on a 14x14 or 28x28 plane: one or
/// three tasks for two workers, one of them idle half the time): the smallest count that makes
/// the tasks a multiple of the workers, at least two each, with blocks of at least 24 rows (four
/// register tiles). 1 when the tasks already suffice or the rows are too few to cut.
std::int64_t row_block_count(std::int64_t tasks, std::int64_t rows, std::int64_t workers);

/// First row of block `b` of `blocks` over `rows` rows. Blocks start on multiples of the AVX-512
/// SGEMM's register tile height (avx512::kMr), so no block but the last ends in a part-filled tile.
std::int64_t row_block_start(std::int64_t rows, std::int64_t b, std::int64_t blocks);

/// Workers that per-worker workspace is sized for: min(pool size, tasks), at least 1.
std::int64_t slot_count(std::int64_t tasks);

/// Runs fn(slot, task) for every task in [0, tasks) on `slots` pool workers; each slot is owned
/// by one thread at a time (so it may index a private workspace buffer) and takes tasks from a
/// shared counter, which balances uneven tasks.
void run_slotted(std::int64_t tasks, std::int64_t slots,
                 const std::function<void(std::int64_t slot, std::int64_t task)>& fn);

/// The problem in f32 with batch `n`: what a f16/bf16 solver runs on its f32 staging copies.
inline dnn::ConvProblem as_f32(dnn::ConvProblem problem, std::int64_t n) {
  problem.dtype = DType::f32;
  problem.n = n;
  return problem;
}
/// Element counts of x, y and w.
inline std::size_t elems_x(const dnn::ConvProblem& p) {
  return static_cast<std::size_t>(p.n * p.c * p.h * p.w);
}
inline std::size_t elems_y(const dnn::ConvProblem& p) {
  return static_cast<std::size_t>(p.n * p.k * p.out_h() * p.out_w());
}
inline std::size_t elems_w(const dnn::ConvProblem& p) {
  return static_cast<std::size_t>(p.k * (p.c / p.groups) * p.y * p.x);
}

/// Rounds a byte count up to the 64-byte cache line that separates workspace sub-buffers.
constexpr std::size_t align_up64(std::size_t bytes) { return (bytes + 63) & ~std::size_t{63}; }

/// The f32 staging buffers a f16/bf16 solver cuts from its workspace, each 64-byte aligned: the
/// whole weights (or weight gradient), then x and y for `chunk` (the problem in f32 with the batch
/// of one chunk of images), then what is left for the f32 algorithm.
struct StagingBuffers {
  float* w;
  float* x;
  float* y;
  void* rest;
};
inline StagingBuffers carve_staging(const dnn::ConvProblem& problem, const dnn::ConvProblem& chunk,
                                    void* workspace) {
  auto* base = static_cast<char*>(workspace);
  StagingBuffers b{};
  b.w = reinterpret_cast<float*>(base);
  base += align_up64(elems_w(problem) * sizeof(float));
  b.x = reinterpret_cast<float*>(base);
  base += align_up64(elems_x(chunk) * sizeof(float));
  b.y = reinterpret_cast<float*>(base);
  base += align_up64(elems_y(chunk) * sizeof(float));
  b.rest = base;
  return b;
}

/// A solver's use of the call's PreparedWeights slot. The tag names the solver, the problem, the
/// weights' address and the ISA level in effect, so another pick, problem, weights array or kernel
/// level prepares again instead of reading a form made for something else.
class PreparedSlot {
 public:
  PreparedSlot(dnn::PreparedWeights& slot, std::string tag) : slot_(slot), tag_(std::move(tag)) {}

  /// `count` floats, 64-byte aligned, that fill() wrote on the first call with this tag (fill may
  /// use the pool); later calls return them as they are. The pointer keeps them alive.
  std::shared_ptr<const float> floats(std::size_t count, const std::function<void(float*)>& fill) const;

 private:
  dnn::PreparedWeights& slot_;
  std::string tag_;
};

/// w in a solver's own form, which fill() writes: kept in `slot` across calls when the call has
/// one (`keep` then holds it alive for this call), else written to `scratch` (in the workspace) on
/// every call.
const float* prepared_or_scratch(const PreparedSlot* slot, std::size_t count, float* scratch,
                                 const std::function<void(float*)>& fill, std::shared_ptr<const float>& keep);

class CpuConvSolver : public dnn::ConvSolver {
 public:
  /// Says no for: a non-cpu device, a direction other than forward, a dtype other than f32, f16,
  /// bf16; otherwise asks check_f32.
  dnn::Applicability check(const dnn::ConvProblem& problem, const runtime::Device& device) const final;
  /// f32: the algorithm's own workspace. f16/bf16: f32 copies of the weights and of a chunk of
  /// images of x and y, plus the algorithm's workspace for that chunk.
  std::size_t workspace_bytes(const dnn::ConvProblem& problem, const runtime::Device& device) const final;
  /// Checks the arguments now (Error(invalid_argument) naming the bad one) and enqueues the work
  /// as one host task on `stream`.
  void run(runtime::Stream& stream, const dnn::ConvProblem& problem, const dnn::ConvArgs& args) const final;
  /// Every forward algorithm here takes a fused epilogue: compute() applies it to each chunk of
  /// outputs through ConvEpilogueRunner (conv_epilogue.hpp).
  bool implements_fused_parts() const final { return true; }

  /// The whole convolution, synchronously on the calling thread and the pool. run() calls this
  /// from its host task; benchmarks and tests may call it directly.
  void compute(const dnn::ConvProblem& problem, const dnn::ConvArgs& args) const;

  /// Bytes the f16/bf16 staging holds per chunk of images, so tests can see the chunking work.
  static constexpr std::size_t kLowPrecisionChunkBytes = std::size_t{32} << 20;

 protected:
  /// Algorithm limits only (filter, stride, groups, layout); dtype and device are already fine.
  virtual dnn::Applicability check_f32(const dnn::ConvProblem& problem) const = 0;
  /// Exact workspace of compute_f32 for this problem (its dtype reads as f32).
  virtual std::size_t f32_workspace_bytes(const dnn::ConvProblem& /*problem*/) const { return 0; }
  /// The convolution on packed f32 tensors in problem.layout (`ws` holds f32_workspace_bytes),
  /// then `epilogue` on y (null: none; given for f32 problems only): on each output tile while it
  /// is in cache where the algorithm can, else in one pass after it (epilogue->apply). `prepared`
  /// (null: none; given for f32 problems whose call has a slot) is where an algorithm that packs
  /// or transforms w may keep that form across calls; the workspace is sized as without it.
  virtual void compute_f32(const dnn::ConvProblem& problem, const float* x, const float* w, float* y,
                           void* ws, const ConvEpilogueRunner* epilogue,
                           const PreparedSlot* prepared) const = 0;

 private:
  std::int64_t images_per_chunk(const dnn::ConvProblem& problem) const;
};

}  // namespace galley::backends::cpu
