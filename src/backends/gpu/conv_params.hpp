// Host-side view of one convolution for the single-source GPU kernels: a flat, 32-bit POD that
// kernels take by value, and the launchers' declarations. Vendor-neutral on purpose (streams are
// `void*`), so the cuda plugin's plain .cpp files (cuBLAS, cuDNN) can include it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "galley/core/dtype.hpp"

namespace galley::dnn {
struct ConvProblem;
}

namespace galley::backends::gpu {

/// The problem as kernels see it. Filter height/width are r/s (the problem's y/x), output p/q.
/// 32-bit on purpose: the fast solvers' check() refuses tensors of 2^31 elements or more.
struct ConvParams {
  int n = 1, c = 1, h = 1, w = 1;
  int k = 1, r = 1, s = 1;
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int groups = 1;
  int p = 1, q = 1;    ///< output height, width
  int cg = 1, kg = 1;  ///< channels per group in and out
  bool nhwc = false;
  DType dtype = DType::f32;

  std::int64_t x_elems() const { return std::int64_t(n) * c * h * w; }
  std::int64_t y_elems() const { return std::int64_t(n) * k * p * q; }
  std::int64_t w_elems() const { return std::int64_t(k) * cg * r * s; }
  std::int64_t pixels() const { return std::int64_t(n) * p * q; }
  /// Reduction length of one output: cg * r * s.
  std::int64_t kred() const { return std::int64_t(cg) * r * s; }
};

/// Builds the kernel view of a validated problem (throws Error(invalid_argument) if it is not).
ConvParams make_params(const dnn::ConvProblem& problem);

/// Empty when every tensor fits the 32-bit indexing of the fast kernels, else the reason.
std::string too_large_for_int32(const ConvParams& p);

/// A tiling choice for the implicit-GEMM kernels, derived only from the problem and the
/// device's multiprocessor count so that workspace_bytes() and run() always agree.
struct IgemmPlan {
  int tile = 0;        ///< index into the kernel's tile table
  int bm = 0, bn = 0;  ///< block tile over GEMM rows/cols
  int splits = 1;      ///< split-K factor; > 1 needs an fp32 workspace of splits * y_elems
  bool wgmma = false;  ///< a Hopper wgmma tile of igemm_tc (conv_igemm_wgmma.hpp)
  std::size_t workspace_bytes = 0;
  std::string describe() const;
};

IgemmPlan plan_igemm_f32(const ConvParams& p, int sm_count);
/// The cost model's plan; `wgmma` false keeps it to the mma.sync tiles (a path without the wgmma ones).
IgemmPlan plan_igemm_tc(const ConvParams& p, int sm_count, bool wgmma = true);
/// A plan with a given tile index and split count (for measuring tiles the planner skips).
IgemmPlan igemm_f32_plan_for(const ConvParams& p, int tile, int splits);
IgemmPlan igemm_tc_plan_for(const ConvParams& p, int tile, int splits);
/// `plan` for a path without the wgmma tiles (NCHW output): a wgmma tile becomes the mma.sync tile
/// that stands in for it, same splits; other plans are returned as they are.
IgemmPlan igemm_tc_without_wgmma(const ConvParams& p, const IgemmPlan& plan);
/// How igemm_tc's NHWC solver feeds channels that are not a multiple of 8 ("scalar gather", "channels
/// padded to 8 ...", "column pairs folded ..."); empty when they are.
std::string igemm_tc_channel_note(const ConvParams& p);

// Launchers. Each enqueues on `stream` (a cudaStream_t / hipStream_t) and throws
// Error(backend_error) naming the kernel if the launch fails. Pointers are device memory.
void launch_conv_direct(const ConvParams& p, const void* x, const void* w, void* y, void* stream);
void launch_conv_depthwise(const ConvParams& p, const void* x, const void* w, void* y, void* stream);
void launch_conv_grouped(const ConvParams& p, const void* x, const void* w, void* y, void* stream);
/// True when launch_conv_grouped takes its tensor-core path for this problem (for detail()).
bool grouped_uses_mma(const ConvParams& p);
/// True when a group's weights fit the SIMT path's shared memory (48 KiB as fp32) and n * groups
/// fits a grid dimension.
bool grouped_simt_fits(const ConvParams& p);
void launch_conv_igemm_f32(const ConvParams& p, const IgemmPlan& plan, const void* x, const void* w, void* y,
                           void* workspace, void* stream);
void launch_conv_igemm_tc(const ConvParams& p, const IgemmPlan& plan, const void* x, const void* w, void* y,
                          void* workspace, void* stream);
/// True when this build has the mma.sync tensor-core kernels (CUDA); false on HIP, where
/// launch_conv_igemm_tc runs the SIMT implicit GEMM instead.
bool igemm_tc_has_mma();
/// The tensor-core kernel of launch_conv_igemm_tc (x NHWC, w KRSC, `p` an NHWC view) writing y as
/// NCHW; split-K partials are NCHW too. CUDA only (throws Error(unsupported) on HIP).
void launch_conv_igemm_tc_nchw_out(const ConvParams& p, const IgemmPlan& plan, const void* x, const void* w,
                                   void* y, void* workspace, void* stream);
/// gpu.conv.igemm_tc_nchw: f16/bf16 NCHW through the tensor-core kernel, x (and w unless 1x1)
/// transposed into the workspace first. The plan's workspace_bytes covers the transposed copies
/// and the split-K partials. On HIP: the SIMT implicit GEMM on the NCHW tensors directly.
IgemmPlan plan_igemm_tc_nchw(const ConvParams& p, int sm_count);
/// plan_igemm_tc_nchw() with a given tile and split count: a wgmma tile becomes its mma.sync stand-in
/// (igemm_tc_without_wgmma), the workspace holds the transposed copies.
IgemmPlan igemm_tc_nchw_plan_for(const ConvParams& p, int tile, int splits);
void launch_conv_igemm_tc_nchw(const ConvParams& p, const IgemmPlan& plan, const void* x, const void* w,
                               void* y, void* workspace, void* stream);
/// gpu.conv.winograd (F(4x4,3x3), f32): tile counts, the grouped-GEMM view of the 36 products
/// (run by launch_conv_igemm_f32) and where the transformed tensors sit in the workspace.
struct WinogradPlan {
  int tiles_h = 0, tiles_w = 0;
  ConvParams gemm;
  IgemmPlan gemm_plan;
  std::size_t u_offset = 0, v_offset = 0, m_offset = 0, gemm_offset = 0, workspace_bytes = 0;
};
/// Fills plan.gemm, plan.gemm_plan and the workspace layout of a Winograd solver: the 36 products as
/// one grouped 1x1 convolution (groups 36, NHWC or NCHW) of a 1 x `pixels` image with `cg` channels
/// and `kg` outputs a group, on igemm_f32 with at least `min_splits` splits; the workspace holds u (the
/// GEMM's weights if `u_is_weights`, else its activations), v (the other operand), m (its output),
/// then the GEMM's own part.
void plan_winograd_gemm(WinogradPlan& plan, int pixels, int cg, int kg, bool nhwc, int min_splits,
                        bool u_is_weights, int sm_count);
/// A WinogradPlan's parts of `workspace`: the three transformed tensors and the GEMM's own part (null
/// when it needs none). Throws Error(invalid_argument) naming `who` when the workspace is null.
struct WinogradBuffers {
  float *u = nullptr, *v = nullptr, *m = nullptr;
  void* gemm = nullptr;
};
WinogradBuffers winograd_buffers(const WinogradPlan& plan, void* workspace, const std::string& who);
/// Empty when gpu.conv.winograd can run `p` (f32, 3x3, stride 1, dilation 1, groups 1), else why not.
std::string winograd_refusal(const ConvParams& p);
WinogradPlan plan_winograd(const ConvParams& p, int sm_count);
void launch_conv_winograd(const ConvParams& p, const WinogradPlan& plan, const void* x, const void* w,
                          void* y, void* workspace, void* stream);
/// Sums `splits` fp32 partial outputs laid out back to back into y (converted to p.dtype).
void launch_splitk_reduce(const ConvParams& p, int splits, const float* partial, void* y, void* stream);
/// im2col for GEMM-based solvers. nchw: col[n][c*r*s][p*q]; nhwc: col[n*p*q][r*s*c]. groups == 1.
void launch_im2col(const ConvParams& p, const void* x, void* col, void* stream);

}  // namespace galley::backends::gpu
