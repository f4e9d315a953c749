// Launchers of the single-source backward convolution kernels (conv_bwd_*.cu) and the plans of the
// implicit-GEMM ones. Vendor-neutral like conv_params.hpp: streams are `void*`, pointers are device
// memory, and each launcher enqueues on `stream` and throws Error(backend_error) naming the kernel
// when the launch fails. Every kernel accumulates in fp32 and writes its whole output tensor (no
// zero-filled output expected, no atomics: results are bitwise reproducible for a given plan).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "conv_params.hpp"

namespace galley::backends::gpu {

// gpu.conv.bwd_data_direct: one thread per dx element, gathering dy over (k, r, s) with the
// stride/dilation divisibility test; 64-bit indexing, every dtype, layout and group count.
void launch_conv_bwd_data_direct(const ConvParams& p, const void* dy, const void* w, void* dx, void* stream);
// gpu.conv.bwd_weights_direct: 32 threads reduce each dw element over (n, p, q) through shared
// memory in a fixed order; 64-bit indexing, every dtype, layout and group count.
void launch_conv_bwd_weights_direct(const ConvParams& p, const void* x, const void* dy, void* dw,
                                    void* stream);

// Depthwise (groups == c, any channel multiplier k / c).
/// How gpu.conv.bwd_data_depthwise runs a problem. `flipped`: unit stride, multiplier 1,
/// pad <= (r - 1) * dilation on both axes and 32-bit tensors, where dx is the forward depthwise
/// convolution of dy with the spatially flipped filter and padding (r - 1) * dilation - pad, run by
/// launch_conv_depthwise on a flipped copy of w in the workspace. Else one thread per dx element
/// gathers its dy taps.
struct DepthwiseBwdDataPlan {
  bool flipped = false;
  std::size_t workspace_bytes = 0;
};
DepthwiseBwdDataPlan plan_conv_bwd_data_depthwise(const ConvParams& p);
void launch_conv_bwd_data_depthwise(const ConvParams& p, const DepthwiseBwdDataPlan& plan, const void* dy,
                                    const void* w, void* dx, void* workspace, void* stream);
/// The forward problem whose output is `p`'s dx when plan_conv_bwd_data_depthwise(p).flipped: input
/// dy (n x k x p x q), output dx (n x c x h x w), same filter size and dilation, padding
/// (r - 1) * dilation - pad, unit stride.
ConvParams depthwise_bwd_data_as_forward(const ConvParams& p);
/// Writes w (k x 1 x r x s) with each filter's taps in reverse order: tap (i, j) of the copy is
/// tap (r - 1 - i, s - 1 - j) of w.
void launch_flip_depthwise_filter(const ConvParams& p, const void* w, void* flipped, void* stream);

/// How gpu.conv.bwd_weights_depthwise splits its reduction over (n, p, q); the fp32 partials of a
/// split run live in the workspace and are summed in a fixed order. `strips`: 3x3 or 5x5 filters,
/// multiplier 1, 32-bit tensors, run by the row-strip kernel (conv_bwd_depthwise_weights_strips.cu)
/// in tasks of `band` output rows x 4 columns; else the general kernel.
struct DepthwiseBwdWeightsPlan {
  bool strips = false;
  int band = 0;
  int splits = 1;
  std::size_t workspace_bytes = 0;
  std::string describe(const ConvParams& p) const;
};
DepthwiseBwdWeightsPlan plan_conv_bwd_weights_depthwise(const ConvParams& p, int sm_count);
void launch_conv_bwd_weights_depthwise(const ConvParams& p, const DepthwiseBwdWeightsPlan& plan,
                                       const void* x, const void* dy, void* dw, void* workspace,
                                       void* stream);
/// The row-strip kernel's half of the two above (called by them when plan.strips).
bool bwd_weights_depthwise_strips_apply(const ConvParams& p);
DepthwiseBwdWeightsPlan plan_bwd_weights_depthwise_strips(const ConvParams& p, int sm_count);
void launch_bwd_weights_depthwise_strips(const ConvParams& p, const DepthwiseBwdWeightsPlan& plan,
                                         const void* x, const void* dy, void* dw, void* workspace,
                                         void* stream);

/// True when the backward implicit GEMMs run `dtype` on tensor cores (mma.sync m16n8k16, sm_80 or
/// newer): f16 and bf16 in the cuda build. f32, and every dtype on HIP, take the fp32 SIMT main loop.
bool bwd_igemm_uses_tensor_cores(DType dtype);

/// A tiling of the backward implicit GEMMs: block tile bm x bn, split-K over `splits` slices whose
/// fp32 partials (splits x output elements) live in the workspace.
struct BwdIgemmPlan {
  int tile = 0;  ///< index into the kernels' tile table
  int bm = 0, bn = 0;
  int splits = 1;
  bool nhwc_tc =
      false;           ///< bwd-weights' NHWC tensor-core path (conv_bwd_weights_nhwc_tc.hpp): its tile table
  int group_pack = 1;  ///< groups one tile of that path takes
  int tap_pack = 1;    ///< filter taps one column tile of that path takes (one narrow group)
  bool wgmma = false;  ///< that path's tile is one of its Hopper wgmma tiles
  /// That path on x's channels padded to a multiple of 8 in the workspace (an RGB first layer),
  /// its dw rows unpadded after.
  bool channels_padded = false;
  std::size_t workspace_bytes = 0;
  std::string describe() const;
};

// gpu.conv.bwd_data_igemm: per group and per stride phase (the dx pixels that share h % stride_h and
// w % stride_w, which therefore see the same filter taps), dx[c][pixel] = W^T[c][(tap, k)] *
// dy[(tap, k)][pixel], so no block multiplies the zeros a strided gather would insert.
BwdIgemmPlan plan_conv_bwd_data_igemm(const ConvParams& p, int sm_count);
void launch_conv_bwd_data_igemm(const ConvParams& p, const BwdIgemmPlan& plan, const void* dy, const void* w,
                                void* dx, void* workspace, void* stream);
/// Stride phases the backward-data implicit GEMM launches (stride_h * stride_w); 0 past the grid's reach.
int bwd_data_igemm_phases(const ConvParams& p);

// gpu.conv.bwd_weights_igemm: per group, dw[k][(c, r, s) in storage order] = dy[k][pixel] *
// im2col(x)[pixel][(c, r, s)], reducing over n * p * q pixels, split-K across blocks.
/// The cost model's plan: the first of bwd_weights_igemm_plans().
BwdIgemmPlan plan_conv_bwd_weights_igemm(const ConvParams& p, int sm_count);
/// The plans worth timing (the tuner's configs), the model's first; the NHWC tensor-core path lists
/// several tiles and split counts, the general kernel its one.
std::vector<BwdIgemmPlan> bwd_weights_igemm_plans(const ConvParams& p, int sm_count);
/// The plan of `tile` (of the table the problem's path uses) with `splits`; nullopt where no plan
/// of the list's kind runs the problem that way.
std::optional<BwdIgemmPlan> bwd_weights_igemm_plan_for(const ConvParams& p, int sm_count, int tile,
                                                       int splits);
void launch_conv_bwd_weights_igemm(const ConvParams& p, const BwdIgemmPlan& plan, const void* x,
                                   const void* dy, void* dw, void* workspace, void* stream);

// gpu.conv.bwd_weights_winograd (conv_bwd_weights_winograd.cu): Winograd F(3x3, 4x4) over dy's 4x4
// tiles, the 36 products as grouped 1x1 igemm_f32 GEMMs over the tiles. The plan's gemm is that view.
/// It runs what winograd_refusal() (conv_params.hpp) accepts: f32, 3x3, stride 1, dilation 1, groups 1.
WinogradPlan plan_bwd_weights_winograd(const ConvParams& p, int sm_count);
void launch_conv_bwd_weights_winograd(const ConvParams& p, const WinogradPlan& plan, const void* x,
                                      const void* dy, void* dw, void* workspace, void* stream);

// Backward-data through a forward solver (conv_bwd_data_as_forward.cu), any groups, any layout and
// dtype.
/// w (p's layout, k x c x r x s, c of k's group) to the forward view's filter: k and c swapped within
/// each group, both spatial axes reversed, in the same layout.
void launch_flip_filter(const ConvParams& p, const void* w, void* flipped, void* stream);
/// dx (p's x, in p's layout) from the compact forward product on the stride grid (n x c x p x q in
/// p's layout): those pixels copied, every other one zero.
void launch_scatter_stride_grid(const ConvParams& p, const void* compact, void* dx, void* stream);

/// One axis of a stride phase of backward-data (conv_bwd_data_as_forward.cu): the dx rows
/// a + stride * i (i < rows) see the filter taps first_tap + stride * j (j < taps), and are rows
/// i + off of a unit-stride forward convolution of dy (`out` rows) with those taps reversed, padded
/// by pad on both sides, view rows long. taps == 0: no tap reaches these rows, which are zero.
struct StridePhaseAxis {
  int taps = 0, first_tap = 0, rows = 0, pad = 0, off = 0, view = 0;
};
/// Phase `a` (< stride) of an axis of `in` dx rows and `out` dy rows, padding `pad`, `filter` taps,
/// dilation 1.
StridePhaseAxis stride_phase_axis(int a, int stride, int pad, int filter, int in, int out);
/// The stride phases of one backward-data problem that one launch handles together (their view
/// filters, their scatters onto dx): one launch each instead of one a phase, the host's launch work
/// being much of a strided layer's time.
inline constexpr int kMaxStridePhases = 16;
struct StridePhaseSet {
  struct Phase {
    int ah = 0, aw = 0;
    StridePhaseAxis h, w;
    void* filter = nullptr;     ///< the view's filter (phases with taps on both axes)
    const void* out = nullptr;  ///< the view's output (n x c x h.view x w.view), null: zeros
  };
  int count = 0;
  Phase phase[kMaxStridePhases];
};
/// Every phase's view filter (phases with taps on both axes), from w (p's layout): k and c swapped
/// within each group, the phase's taps reversed, in the same layout.
void launch_phase_filters(const ConvParams& p, const void* w, const StridePhaseSet& set, void* stream);
/// dx's pixels of every phase from its view's output.
void launch_phase_scatters(const ConvParams& p, const StridePhaseSet& set, void* dx, void* stream);

/// in (A, M, B) -> out (B, M, A), packed, in `dtype` (conv_swap_outer_inner.cu); M <= 65535.
void launch_swap_outer_inner(DType dtype, const void* in, void* out, std::int64_t A, std::int64_t M,
                             std::int64_t B, void* stream);

/// Folds an fp32 column matrix (launch_im2col's layout, groups == 1) into dx, as p.dtype:
/// cuda.conv.cublas_bwd_data's second pass.
void launch_bwd_col2im(const ConvParams& p, const float* col, void* dx, void* stream);

/// Sums `splits` fp32 slices of `elems` elements laid out back to back into `out` (as `dtype`), in
/// slice order.
void launch_bwd_splitk_sum(DType dtype, std::int64_t elems, int splits, const float* partial, void* out,
                           void* stream);

}  // namespace galley::backends::gpu
