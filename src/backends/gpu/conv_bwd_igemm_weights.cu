// gpu.conv.bwd_weights_igemm's kernel: backward-weights as an implicit GEMM (tensor cores for
// f16/bf16 where the build has them, fp32 SIMT otherwise; conv_bwd_igemm.cuh).
//
// Per group: D[k][j] = A[k][pixel] * B[pixel][j], where A is dy, B the im2col of x gathered on the fly
// and j runs over (c, r, s) in the weights' storage order (c * r * s + tap for KCRS, tap * cg + c for
// KRSC), so D's rows are dw's rows as stored. The reduction is over all n * p * q output pixels, long
// next to the output, so the planner usually splits it across blocks (split-K), whose fp32 partials
// launch_bwd_splitk_sum adds in a fixed order. NHWC f16/bf16 with channels not a multiple of 8 (one
// group: an RGB first layer) takes the tensor-core path on x padded to 8 channels in the workspace,
// its padded dw rows cut back after, instead of the general loads' 2-byte gathers.
#include "channel_pad.cuh"
#include "conv_bwd_igemm.cuh"
#include "conv_bwd_weights_nhwc_tc.hpp"

namespace galley::backends::gpu {
namespace {

using bwd_igemm::kThreads;

template <typename T, bool kNhwc, int BM, int BN, int kBk>
struct WeightsLoader {
  static constexpr int EA = BM * kBk / kThreads, EB = BN * kBk / kThreads;
  static constexpr int kTprA = kBk / EA, kTprB = kBk / EB;

  int a_row, a_k, b_col, b_k;
  ConvParams cp;                 // a copy: a reference to the kernel parameter would cost a local-memory copy
  const T* __restrict__ dy_row;  // dy of this thread's output channel (image 0)
  const T* __restrict__ x_chan;  // x of this thread's input channel (image 0)
  bool a_valid, b_valid;
  int dh, dw;  // this thread's tap offset from an output pixel's window corner, padding included
  int pixels;

  __device__ WeightsLoader(const ConvParams& p, const T* dy, const T* x, int g, int m0, int j0) : cp(p) {
    const int tid = threadIdx.x;
    // nchw: dy and x are contiguous along pixels, so threads run along the reduction; nhwc: along
    // the channels (k for A, c for B).
    a_row = kNhwc ? tid % BM : tid / kTprA;
    a_k = kNhwc ? (tid / BM) * EA : (tid % kTprA) * EA;
    b_col = kNhwc ? tid % BN : tid / kTprB;
    b_k = kNhwc ? (tid / BN) * EB : (tid % kTprB) * EB;
    pixels = cp.n * cp.p * cp.q;
    const int m = m0 + a_row;
    a_valid = m < cp.kg;
    const int k = g * cp.kg + (a_valid ? m : 0);
    dy_row = kNhwc ? dy + k : dy + std::int64_t(k) * cp.p * cp.q;
    const int RS = cp.r * cp.s, kred = cp.cg * RS;
    const int j = j0 + b_col;
    b_valid = j < kred;
    const int jj = b_valid ? j : 0;
    int c, tap;
    if (kNhwc) {
      tap = jj / cp.cg;
      c = jj - tap * cp.cg;
    } else {
      c = jj / RS;
      tap = jj - c * RS;
    }
    const int r = tap / cp.s, s = tap - r * cp.s;
    dh = r * cp.dil_h - cp.pad_h;
    dw = s * cp.dil_w - cp.pad_w;
    const std::int64_t cc = std::int64_t(g) * cp.cg + c;
    x_chan = kNhwc ? x + cc : x + cc * cp.h * cp.w;
  }

  __device__ __forceinline__ void load(int step, float (&a)[EA], float (&b)[EB]) const {
    const int PQ = cp.p * cp.q;
    {
      int pix = step * kBk + a_k;
      int n = pix / PQ, pq = pix - n * PQ;
#pragma unroll
      for (int e = 0; e < EA; ++e) {
        float v = 0.f;
        if (a_valid && pix < pixels)
          v = ldg_f32(dy_row + (kNhwc ? std::int64_t(pix) * cp.k : std::int64_t(n) * cp.k * PQ + pq));
        a[e] = v;
        ++pix;
        if (++pq == PQ) pq = 0, ++n;
      }
    }
    {
      int pix = step * kBk + b_k;
      int n = pix / PQ, pq = pix - n * PQ;
      int op = pq / cp.q, oq = pq - op * cp.q;
      const std::int64_t HW = std::int64_t(cp.h) * cp.w;
#pragma unroll
      for (int e = 0; e < EB; ++e) {
        float v = 0.f;
        const int ih = op * cp.stride_h + dh, iw = oq * cp.stride_w + dw;
        if (b_valid && pix < pixels && unsigned(ih) < unsigned(cp.h) && unsigned(iw) < unsigned(cp.w))
          v = ldg_f32(x_chan + (kNhwc ? (n * HW + ih * cp.w + iw) * cp.c : n * cp.c * HW + ih * cp.w + iw));
        b[e] = v;
        ++pix;
        if (++oq == cp.q) {
          oq = 0;
          if (++op == cp.p) op = 0, ++n;
        }
      }
    }
  }
};

// Grid: x = column tiles over (c, r, s), y = row tiles over k of a group, z = (split, group).
template <typename T, bool kNhwc, int BM, int BN, bool kMma>
__global__ void __launch_bounds__(kThreads, BM* BN > 128 * 64 ? 1 : 2)
    bwd_weights_igemm_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ dy,
                             T* __restrict__ dw, float* __restrict__ partial, int splits) {
  const int g = blockIdx.z % cp.groups;
  const int split = blockIdx.z / cp.groups;
  const int m0 = blockIdx.y * BM, j0 = blockIdx.x * BN;
  using Main = bwd_igemm::Mainloop<T, BM, BN, kMma>;
  constexpr int kBk = Main::kBk;
  WeightsLoader<T, kNhwc, BM, BN, kBk> ld(cp, dy, x, g, m0, j0);
  const int total_steps = (ld.pixels + kBk - 1) / kBk;
  const bwd_igemm::StepRange range = bwd_igemm::split_steps(total_steps, split, splits);
  float acc[BM / 16][BN / 16];
  Main::run(ld, range.begin, range.end, acc);

  const int kred = cp.cg * cp.r * cp.s;
#pragma unroll
  for (int i = 0; i < BM / 16; ++i) {
    const int m = m0 + Main::row(i);
    if (m >= cp.kg) continue;
#pragma unroll
    for (int j = 0; j < BN / 16; ++j) {
      const int col = j0 + Main::col(j);
      if (col >= kred) continue;
      const std::int64_t idx = (std::int64_t(g) * cp.kg + m) * kred + col;
      if (splits > 1)
        partial[split * (std::int64_t(cp.k) * kred) + idx] = acc[i][j];
      else
        dw[idx] = from_f32<T>(acc[i][j]);
    }
  }
}

template <typename T, bool kNhwc>
void launch_tile(const ConvParams& p, const BwdIgemmPlan& plan, const T* x, const T* dy, T* dw,
                 float* partial, GpuStream stream) {
  const dim3 grid(ceil_div(p.kred(), plan.bn), ceil_div(p.kg, plan.bm), p.groups * plan.splits);
  bwd_igemm::with_mainloop<T>(p.dtype, [&](auto mma) {
    if (plan.tile == 0)
      bwd_weights_igemm_kernel<T, kNhwc, 128, 128, mma.value>
          <<<grid, kThreads, 0, stream>>>(p, x, dy, dw, partial, plan.splits);
    else
      bwd_weights_igemm_kernel<T, kNhwc, 64, 64, mma.value>
          <<<grid, kThreads, 0, stream>>>(p, x, dy, dw, partial, plan.splits);
  });
}

}  // namespace

bool bwd_igemm_uses_tensor_cores(DType dtype) { return bwd_igemm::uses_mma(dtype); }

std::string BwdIgemmPlan::describe() const {
  std::string s = std::string(channels_padded ? "channels padded to 8, " : "") +
                  (nhwc_tc ? "nhwc 16-byte loads, " : "") + "tile " + std::to_string(bm) + "x" +
                  std::to_string(bn);
  if (group_pack > 1) s += ", " + std::to_string(group_pack) + " groups a tile";
  if (tap_pack > 1) s += ", " + std::to_string(tap_pack) + " taps a tile";
  if (splits > 1) s += ", split-k " + std::to_string(splits);
  return s;
}

namespace {
BwdIgemmPlan plan_general(const ConvParams& p, int sm_count) {
  const int bk = bwd_igemm::step_depth(p.dtype);
  const std::int64_t steps = std::max<std::int64_t>(1, (p.pixels() + bk - 1) / bk);
  auto tiles_of = [&](int bm, int bn) {
    return std::int64_t(ceil_div(p.kred(), bn)) * ceil_div(p.kg, bm) * p.groups;
  };
  return bwd_igemm::plan_bwd_igemm(tiles_of, steps, bk, bwd_igemm::peak_rate(p.dtype), p.w_elems(), p.groups,
                                   sm_count);
}
}  // namespace

namespace {
/// p with x's channels padded to a multiple of 8 (dw then has as many per row).
ConvParams channel_padded(const ConvParams& p) {
  ConvParams v = p;
  v.c = v.cg = (p.c + 7) / 8 * 8;
  return v;
}
/// Whether p takes the tensor-core path on channel-padded x.
bool pads_channels_for_tc(const ConvParams& p) {
  return p.groups == 1 && p.c % 8 != 0 && bwd_weights_nhwc_tc_applies(channel_padded(p));
}
std::size_t aligned256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }
/// The padded x and the padded dw, at the front of the workspace; the path's own workspace follows.
std::size_t padding_bytes(const ConvParams& p) {
  const ConvParams v = channel_padded(p);
  return aligned256(std::size_t(v.x_elems()) * 2) + aligned256(std::size_t(v.w_elems()) * 2);
}
BwdIgemmPlan padded_plan(BwdIgemmPlan plan, const ConvParams& p) {
  plan.channels_padded = true;
  plan.workspace_bytes += padding_bytes(p);
  return plan;
}
}  // namespace

std::vector<BwdIgemmPlan> bwd_weights_igemm_plans(const ConvParams& p, int sm_count) {
  if (bwd_weights_nhwc_tc_applies(p)) return bwd_weights_nhwc_tc_plans(p, sm_count);
  if (pads_channels_for_tc(p)) {
    std::vector<BwdIgemmPlan> plans = bwd_weights_nhwc_tc_plans(channel_padded(p), sm_count);
    for (BwdIgemmPlan& plan : plans) plan = padded_plan(plan, p);
    return plans;
  }
  return {plan_general(p, sm_count)};
}

std::optional<BwdIgemmPlan> bwd_weights_igemm_plan_for(const ConvParams& p, int sm_count, int tile,
                                                       int splits) {
  if (bwd_weights_nhwc_tc_applies(p)) return bwd_weights_nhwc_tc_plan_for(p, sm_count, tile, splits);
  if (pads_channels_for_tc(p)) {
    const std::optional<BwdIgemmPlan> plan =
        bwd_weights_nhwc_tc_plan_for(channel_padded(p), sm_count, tile, splits);
    if (!plan) return std::nullopt;
    return padded_plan(*plan, p);
  }
  const BwdIgemmPlan only = plan_general(p, sm_count);
  if (only.tile == tile && only.splits == splits) return only;
  return std::nullopt;
}

BwdIgemmPlan plan_conv_bwd_weights_igemm(const ConvParams& p, int sm_count) {
  return bwd_weights_igemm_plans(p, sm_count).front();
}

void launch_conv_bwd_weights_igemm(const ConvParams& p, const BwdIgemmPlan& planned, const void* x,
                                   const void* dy, void* dw, void* workspace, void* stream) {
  if (planned.channels_padded) {
    if (workspace == nullptr)
      throw Error(Status::invalid_argument,
                  "gpu.conv.bwd_weights_igemm: the channel-padded plan needs a workspace of " +
                      std::to_string(planned.workspace_bytes) + " bytes, got none");
    const ConvParams v = channel_padded(p);
    auto* base = static_cast<unsigned char*>(workspace);
    void* x_padded = base;
    void* dw_padded = base + aligned256(std::size_t(v.x_elems()) * 2);
    BwdIgemmPlan inner = planned;
    inner.channels_padded = false;
    inner.workspace_bytes -= padding_bytes(p);
    launch_pad_channels(x, x_padded, std::int64_t(p.n) * p.h * p.w, p.c, v.c, as_stream(stream));
    if (launch_bwd_weights_nhwc_tc(v, inner, x_padded, dy, dw_padded, base + padding_bytes(p), stream)) {
      launch_unpad_channels(dw_padded, dw, std::int64_t(p.k) * p.r * p.s, v.c, p.c, as_stream(stream));
      return;
    }
  } else if (planned.nhwc_tc && launch_bwd_weights_nhwc_tc(p, planned, x, dy, dw, workspace, stream)) {
    return;
  }
  BwdIgemmPlan plan = planned;
  if (planned.nhwc_tc) {
    // A tensor off 16-byte alignment (a wrapped pointer): the general loads, within the workspace
    // the planned path was given.
    plan = plan_general(p, 1);
    if (plan.workspace_bytes > planned.workspace_bytes) plan.splits = 1, plan.workspace_bytes = 0;
  }
  if (plan.splits > 1 && workspace == nullptr)
    throw Error(Status::invalid_argument, "gpu.conv.bwd_weights_igemm: split-K plan needs a workspace of " +
                                              std::to_string(plan.workspace_bytes) + " bytes, got none");
  float* partial = plan.splits > 1 ? static_cast<float*>(workspace) : nullptr;
  const GpuStream s = as_stream(stream);
  dispatch_dtype(p.dtype, "gpu.conv.bwd_weights_igemm", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xt = static_cast<const T*>(x);
    const T* dyt = static_cast<const T*>(dy);
    T* dwt = static_cast<T*>(dw);
    p.nhwc ? launch_tile<T, true>(p, plan, xt, dyt, dwt, partial, s)
           : launch_tile<T, false>(p, plan, xt, dyt, dwt, partial, s);
  });
  check_launch("gpu.conv.bwd_weights_igemm");
  if (plan.splits > 1) launch_bwd_splitk_sum(p.dtype, p.w_elems(), plan.splits, partial, dw, stream);
}

}  // namespace galley::backends::gpu
