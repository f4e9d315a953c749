// The fused epilogue of the cpu conv solvers, y = act(conv + bias[k] + residual) (see
// dnn::ConvEpilogue), written once for all of them: an f32 solver applies it to each output tile
// while the tile is in cache (or hands it to the AVX-512 SGEMM as post-ops, applied in registers
// before the store); f16/bf16 ones to the f32 outputs of a chunk of images in the same pass that
// rounds them. A fused call so reads and writes y once where the unfused sequence makes three
// more passes over it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "backends/cpu/sgemm_avx512.hpp"
#include "galley/dnn/conv_problem.hpp"

namespace galley::backends::cpu {

class ConvEpilogueRunner {
 public:
  /// `bias` ([K]) and `residual` (shaped as y) in the problem's dtype, as the epilogue needs them.
  ConvEpilogueRunner(const dnn::ConvProblem& problem, const void* bias, const void* residual);

  bool empty() const { return problem_.epilogue.empty(); }

  /// Applies the epilogue to the f32 outputs `y32` of images [n0, n0 + count) (packed in the
  /// problem's layout, image n0 first) and stores them at `out` in the problem's dtype, `out`
  /// pointing at image n0 of y. For f32, `out` may be `y32` itself. Parallel over the pool.
  void apply(std::int64_t n0, std::int64_t count, float* y32, void* out) const;

  /// For an f32 problem, applies the epilogue in place to one output tile a solver has just
  /// written, while it is in cache. NCHW: `rows` channels from k0 of image n, each `cols` pixels
  /// from pixel p0, rows `ld` floats apart. NHWC: `rows` pixels of the whole batch from pixel
  /// index p0 (n * ho * wo + pixel; `n` ignored), each `cols` channels from k0, rows `ld` apart.
  /// Runs the AVX-512 post-ops (avx512::apply_post_ops) where gemm_post_ops() has them.
  void apply_tile(float* y, std::int64_t ld, std::int64_t n, std::int64_t k0, std::int64_t p0,
                  std::int64_t rows, std::int64_t cols) const;

  /// For an f32 problem, the post-ops that let conv_blas's sgemm apply the epilogue itself as it
  /// stores the output tile apply_tile(y, ld, n, k0, p0, ...) would take (post-op element (0, 0)
  /// is that tile's first element), so the tile is not read and written again; nullopt when the
  /// GEMM cannot (OpenBLAS below AVX-512, an activation that is not a compare and a select): the
  /// caller then calls apply_tile after the GEMM.
  std::optional<avx512::PostOps> gemm_post_ops(std::int64_t n, std::int64_t k0, std::int64_t p0) const;

 private:
  dnn::ConvProblem problem_;
  // Output pixels per image and channel, computed once: solvers ask for post-ops per plane or tile.
  std::int64_t pixels_;
  std::vector<float> bias_;  // f32 copy, empty without a bias
  const void* residual_;     // in the problem's dtype
  // The GEMM's form of the epilogue with null pointers, when it can take it.
  std::optional<avx512::PostOps> gemm_post_;
};

/// One image's output rows of one group (NCHW, f32): y[k, :] = w[k, :] . b for k in [0, rows), w's
/// rows `depth` floats apart and b's and y's `cols`, the rows split into `row_blocks` GEMM tasks;
/// `k_first` is the group's first output channel in the image `n`. The epilogue (null: none) runs
/// in the GEMM's stores where gemm_post_ops() has it, else on each task's tile right after.
void gemm_image_rows(std::int64_t rows, std::int64_t row_blocks, std::int64_t cols, std::int64_t depth,
                     const float* w, const float* b, float* y, std::int64_t n, std::int64_t k_first,
                     const ConvEpilogueRunner* epilogue);

}  // namespace galley::backends::cpu
