// Host-side launchers of the single-source GEMM kernels (gemm_tc.cu, gemm_simt.cu), in plain C++
// types so the solver glue and the cuBLAS solver call them without vendor headers. Each enqueues on
// `stream` (a native cudaStream_t / hipStream_t) and throws Error(backend_error) when a launch fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dnn/gemm_lowering.hpp"
#include "galley/core/dtype.hpp"

namespace galley::backends::gpu {

/// One tile shape of the tensor-core kernel: a bm x bn block tile over k slices of 32, warps of
/// wm x wn, `stages` shared-memory buffers (2 = double buffering); or, with `wgmma`, one of the
/// Hopper kernel's tiles (../cuda/gemm_wgmma.hpp: bm / 64 warpgroups over k slices of 64, filled by
/// TMA with `tma`, else by cp.async; wm and wn unused).
struct GemmTile {
  int bm = 128, bn = 128, wm = 64, wn = 32, stages = 3;
  bool wgmma = false, tma = false;
  /// "128x128-w64x32-s3", "wgmma-128x256-s4" or "wgmma-tma-128x256-s4"
  std::string to_string() const;
  static std::optional<GemmTile> parse(std::string_view text);
  int threads() const { return wgmma ? 2 * bm + (tma ? 32 : 0) : (bm / wm) * (bn / wn) * 32; }
  friend bool operator==(const GemmTile&, const GemmTile&) = default;
};

/// The tile shapes the mma.sync kernel is built for, the general default first.
const GemmTile* gemm_tc_tiles(std::size_t* count);
/// The Hopper wgmma tiles `dtype` can take on the current device, largest first: none unless this
/// build has them, the device runs them (compute capability 9.0), dtype is f16 or bf16, and
/// GALLEY_DEBUG_GEMM_WGMMA is not 0.
std::vector<GemmTile> gemm_tc_wgmma_tiles(DType dtype);

/// A tile's pace for the default order (gemm_tc_candidates()): its whole-device rate on a product
/// that fills every multiprocessor many times over, relative to the fastest tile of `dtype`, and
/// how many of its blocks share a multiprocessor.
struct GemmTilePace {
  double rate = 1;
  int blocks_per_sm = 1;
};
GemmTilePace gemm_tc_tile_pace(const GemmTile& tile, DType dtype);

/// True when this build has the tensor-core kernel (CUDA; hip has no mma.sync).
bool gemm_tc_available();
/// Whether the tensor-core kernel takes f32 (as 3xTF32): a build with mma.sync, unless
/// GALLEY_DEBUG_3XTF32=0.
bool gemm_tc_takes_f32();
/// Why `call` cannot take the tensor-core path, empty when it can: f16/bf16 (and f32 where
/// gemm_tc_takes_f32()), each operand's contiguous extent and row pitch a whole number of 16-byte
/// chunks (8 or 4 elements), grid limits.
std::string gemm_tc_unfit(const dnn::GemmCall& call, DType dtype);
/// out = alpha op(X) op(Y) + beta out + bias on tensor cores, f32 accumulation; pointers 16-byte
/// aligned.
void launch_gemm_tc(const dnn::GemmCall& call, DType dtype, const GemmTile& tile, const void* x,
                    const void* y, void* out, const void* bias, void* stream);

/// Why `call` cannot take the SIMT kernel (grid limits only), empty when it can.
std::string gemm_simt_unfit(const dnn::GemmCall& call);
/// The same product with f32 FMA (no TF32) on any shape, alignment and dtype.
void launch_gemm_simt(const dnn::GemmCall& call, DType dtype, const void* x, const void* y, void* out,
                      const void* bias, void* stream);

/// Workspace column_sums() needs for a rows x cols matrix.
std::size_t column_sums_workspace(std::int64_t rows, std::int64_t cols);
/// dst[j] = sum over rows of src[i][j] (src rows x cols row-major, dst of cols), f32 sums.
void launch_column_sums(DType dtype, const void* src, std::int64_t rows, std::int64_t cols, void* dst,
                        void* workspace, void* stream);
/// dst = src converted from f32 to `dtype`, count elements.
void launch_from_f32(DType dtype, const float* src, void* dst, std::int64_t count, void* stream);
/// out[b][i][j] += bias[j] over `rows` rows of `cols` (pitch `ld`), in out's dtype.
void launch_add_bias(DType dtype, void* out, const void* bias, std::int64_t rows, std::int64_t cols,
                     std::int64_t ld, void* stream);

}  // namespace galley::backends::gpu
