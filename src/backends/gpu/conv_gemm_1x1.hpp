// gpu.conv.gemm_1x1: fp32 NCHW 1x1 convolutions (no padding, one group, any stride) as one batched
// SGEMM per image, Y[n] (K x P*Q) = W (K x C) * X[n] (C x P*Q). Host-side view of the kernel in
// conv_gemm_1x1.cu: what it can run, its tile choice and its launcher.
#pragma once

#include <string>

#include "conv_params.hpp"

namespace galley::backends::gpu {

/// Empty when gpu.conv.gemm_1x1 can run `p`, else why not (1x1 filter, no padding, groups 1, f32, NCHW).
std::string gemm_1x1_refusal(const ConvParams& p);
/// Empty when gpu.conv.igemm_f32_nchw (the same kernel, reducing tap by tap over any filter, padding,
/// stride and dilation) can run `p`, else why not (groups 1, f32, NCHW, C >= 16, not a plain 1x1).
std::string igemm_f32_nchw_refusal(const ConvParams& p);

/// A block tile and split-K factor of the 1x1 kernel, chosen from the problem and the
/// multiprocessor count alone, so workspace_bytes() and run() always agree.
struct Gemm1x1Plan {
  int tile = 0;                ///< index into the kernel's tile table
  int bm = 0, bn = 0, bk = 0;  ///< output channels, pixels and input channels per block step
  int splits = 1;              ///< split-K factor; > 1 needs an fp32 workspace of splits * y_elems
  bool taps = false;           ///< tap-by-tap reduction (gpu.conv.igemm_f32_nchw): weights rearranged first
  int steps = 0;               ///< reduction steps of BK channels (times the taps)
  std::size_t partial_offset = 0;  ///< where the split-K partials start in the workspace
  std::size_t workspace_bytes = 0;
  std::string describe() const;
};

Gemm1x1Plan plan_gemm_1x1(const ConvParams& p, int sm_count);
/// The plan with tile `tile` (clamped to the table) and at most `splits` non-empty splits, for
/// measuring choices the planner does not make.
Gemm1x1Plan gemm_1x1_plan_for(const ConvParams& p, int tile, int splits);
/// How many tiles the kernel has (for measurement tools).
int gemm_1x1_tile_count();

/// What the kernel can apply in its own store, before y is written: y = relu?(conv + bias[k] +
/// residual), f32, the residual shaped as y. Only without split-K (whose partial sums are not y);
/// the solver runs any other epilogue as a pass after the kernel.
struct Gemm1x1StoreEpilogue {
  const float* bias = nullptr;      ///< [K], or null
  const float* residual = nullptr;  ///< shaped as y, or null
  bool relu = false;
};

/// Enqueues the kernel (and split-K's reduce) on `stream` (cudaStream_t / hipStream_t); throws
/// Error(backend_error) if a launch fails. x, w, y are device pointers of p.x_elems(), p.w_elems(),
/// p.y_elems() floats; workspace holds plan.workspace_bytes (may be null when that is 0). A
/// non-empty `epilogue` needs plan.splits == 1 (Error(invalid_argument) otherwise).
void launch_conv_gemm_1x1(const ConvParams& p, const Gemm1x1Plan& plan, const void* x, const void* w, void* y,
                          void* workspace, void* stream, const Gemm1x1StoreEpilogue& epilogue = {});

}  // namespace galley::backends::gpu
