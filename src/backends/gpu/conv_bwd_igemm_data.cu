// gpu.conv.bwd_data_igemm's kernel: backward-data as an implicit GEMM (tensor cores for f16/bf16
// where the build has them, fp32 SIMT otherwise; conv_bwd_igemm.cuh).
//
// dx[n, c, h, w] = sum over (k, r, s) of dy[n, k, p, q] * w[k, c, r, s] where h = p * stride_h -
// pad_h + r * dil_h (likewise w). For a given h only the taps r with (h + pad_h - r * dil_h) divisible
// by stride_h contribute, and which ones depends only on h % stride_h. So the dx pixels are split into
// stride_h * stride_w phases; within a phase every pixel sees the same taps, evenly spaced
// (r = r_first + i * stride_h / gcd(stride_h, dil_h)), and dy's row is hh + offset(r) for the pixel's
// row hh in the phase. Per (group, phase) the kernel computes
//   D[c][pixel] = A[c][(tap, k)] * B[(tap, k)][pixel],  A = the weights, B = dy gathered on the fly,
// reducing tap by tap, kBk output channels at a time when k per group is a multiple of kBk ("chunk"
// mode: one bounds check per step) and over the flat (tap, k) index otherwise.
#include "conv_bwd_igemm.cuh"

namespace galley::backends::gpu {
namespace {

using bwd_igemm::kThreads;

/// The taps of one dimension that reach output rows of phase `a`: first, spacing and count, and
/// the dy row offset of the first one (dy row = phase row + offset - i * offset_step).
struct PhaseTaps {
  int first = 0, step = 1, count = 0;
  int offset = 0, offset_step = 0;
};

__host__ __device__ inline int gcd_int(int a, int b) {
  while (b != 0) {
    const int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

__host__ __device__ inline PhaseTaps phase_taps(int a, int pad, int dil, int stride, int extent) {
  PhaseTaps t;
  t.step = stride / gcd_int(stride, dil);
  t.first = -1;
  for (int r = 0; r < t.step && r < extent; ++r) {
    const int d = a + pad - r * dil;
    if (((d % stride) + stride) % stride == 0) {
      t.first = r;
      break;
    }
  }
  if (t.first < 0) return PhaseTaps{0, t.step, 0, 0, 0};
  t.count = (extent - 1 - t.first) / t.step + 1;
  // (a + pad - r * dil) is a multiple of stride for these taps; the division is exact, even below 0.
  t.offset = (a + pad - t.first * dil) / stride;
  t.offset_step = t.step * dil / stride;
  return t;
}

template <typename T, bool kNhwc, bool kChunk, int BM, int BN, int kBk>
struct DataLoader {
  static constexpr int EA = BM * kBk / kThreads, EB = BN * kBk / kThreads;
  static constexpr int kTprB = kBk / EB;

  int a_row, a_k, b_col, b_k;
  ConvParams cp;  // a copy: a reference to the kernel parameter would cost a local-memory copy
  const T* __restrict__ dy;
  const T* __restrict__ w;
  int g, m0;
  PhaseTaps th, tw;
  int kred;  // taps * kg
  // This thread's B column: its dx pixel's image, phase row / column, and whether it exists.
  const T* dy_img;
  int hh, ww;
  bool b_valid;
  bool a_valid;

  __device__ DataLoader(const ConvParams& p, const T* dy_, const T* w_, int g_, int m0_, int j0,
                        PhaseTaps th_, PhaseTaps tw_, int ah, int aw, int hp, int wp)
      : cp(p), dy(dy_), w(w_), g(g_), m0(m0_), th(th_), tw(tw_) {
    const int tid = threadIdx.x;
    // A: threads along c (contiguous in KRSC weights).
    a_row = tid % BM;
    a_k = (tid / BM) * EA;
    a_valid = m0 + a_row < cp.cg;
    // B: nhwc dy is contiguous in k, nchw dy in the pixel.
    b_col = kNhwc ? tid / kTprB : tid % BN;
    b_k = kNhwc ? (tid % kTprB) * EB : (tid / BN) * EB;
    kred = th.count * tw.count * cp.kg;
    const int pix = j0 + b_col;
    const int n = pix / (hp * wp), rest = pix - n * (hp * wp);
    hh = rest / wp;
    ww = rest - hh * wp;
    b_valid = n < cp.n && hh * cp.stride_h + ah < cp.h && ww * cp.stride_w + aw < cp.w;
    const std::int64_t PQ = std::int64_t(cp.p) * cp.q;
    dy_img = kNhwc ? dy + std::int64_t(b_valid ? n : 0) * PQ * cp.k + g * cp.kg
                   : dy + (std::int64_t(b_valid ? n : 0) * cp.k + g * cp.kg) * PQ;
  }

  __device__ __forceinline__ float weight(int k, int c, int r, int s) const {
    const std::int64_t kk = std::int64_t(g) * cp.kg + k;
    return ldg_f32(
        w + (kNhwc ? ((kk * cp.r + r) * cp.s + s) * cp.cg + c : ((kk * cp.cg + c) * cp.r + r) * cp.s + s));
  }
  // dy at this thread's pixel through tap (i, j) of the phase, channel k of the group; 0 off the edge.
  __device__ __forceinline__ float grad(int i, int j, int k) const {
    const int op = hh + th.offset - i * th.offset_step, oq = ww + tw.offset - j * tw.offset_step;
    if (!b_valid || unsigned(op) >= unsigned(cp.p) || unsigned(oq) >= unsigned(cp.q)) return 0.f;
    return ldg_f32(dy_img + (kNhwc ? std::int64_t(op * cp.q + oq) * cp.k + k
                                   : std::int64_t(k) * cp.p * cp.q + op * cp.q + oq));
  }

  __device__ __forceinline__ void load(int step, float (&a)[EA], float (&b)[EB]) const {
    const int c = m0 + a_row;
    if (kChunk) {
      const int chunks = cp.kg / kBk;
      const int tap = step / chunks, k0 = (step - tap * chunks) * kBk;
      const int i = tap / tw.count, j = tap - i * tw.count;
      const int r = th.first + i * th.step, s = tw.first + j * tw.step;
#pragma unroll
      for (int e = 0; e < EA; ++e) a[e] = a_valid ? weight(k0 + a_k + e, c, r, s) : 0.f;
      const int op = hh + th.offset - i * th.offset_step, oq = ww + tw.offset - j * tw.offset_step;
      const bool inb = b_valid && unsigned(op) < unsigned(cp.p) && unsigned(oq) < unsigned(cp.q);
      if (kNhwc) {
        const T* src = dy_img + std::int64_t(op * cp.q + oq) * cp.k + k0 + b_k;
        if constexpr (EB == 8 && !std::is_same_v<T, float>) {
          // 8 neighbouring 16-bit channels in one 16-byte load: k, the group's first channel and
          // k0 + b_k are multiples of 8 in chunk mode, so the address is aligned.
          if (inb) {
            load8(src, b);
          } else {
#pragma unroll
            for (int e = 0; e < EB; ++e) b[e] = 0.f;
          }
        } else {
#pragma unroll
          for (int e = 0; e < EB; ++e) b[e] = inb ? ldg_f32(src + e) : 0.f;
        }
      } else {
        const std::int64_t PQ = std::int64_t(cp.p) * cp.q;
        const T* src = dy_img + (k0 + b_k) * PQ + op * cp.q + oq;
#pragma unroll
        for (int e = 0; e < EB; ++e) b[e] = inb ? ldg_f32(src + e * PQ) : 0.f;
      }
    } else {
      const int k0 = step * kBk;
#pragma unroll
      for (int e = 0; e < EA; ++e) {
        const int kk = k0 + a_k + e;
        float v = 0.f;
        if (a_valid && kk < kred) {
          const int tap = kk / cp.kg, k = kk - tap * cp.kg;
          const int i = tap / tw.count, j = tap - i * tw.count;
          v = weight(k, c, th.first + i * th.step, tw.first + j * tw.step);
        }
        a[e] = v;
      }
#pragma unroll
      for (int e = 0; e < EB; ++e) {
        const int kk = k0 + b_k + e;
        float v = 0.f;
        if (kk < kred) {
          const int tap = kk / cp.kg, k = kk - tap * cp.kg;
          const int i = tap / tw.count, j = tap - i * tw.count;
          v = grad(i, j, k);
        }
        b[e] = v;
      }
    }
  }
};

// Grid: x = pixel tiles of the largest phase, y = channel tiles of a group, z = (split, phase, group).
template <typename T, bool kNhwc, bool kChunk, int BM, int BN, bool kMma>
__global__ void __launch_bounds__(kThreads, BM* BN > 128 * 64 ? 1 : 2)
    bwd_data_igemm_kernel(ConvParams cp, const T* __restrict__ dy, const T* __restrict__ w,
                          T* __restrict__ dx, float* __restrict__ partial, int splits) {
  const int phases = cp.stride_h * cp.stride_w;
  const int g = blockIdx.z % cp.groups;
  const int phase = (blockIdx.z / cp.groups) % phases;
  const int split = blockIdx.z / (cp.groups * phases);
  const int ah = phase / cp.stride_w, aw = phase - ah * cp.stride_w;
  const int hp = (cp.h + cp.stride_h - 1) / cp.stride_h, wp = (cp.w + cp.stride_w - 1) / cp.stride_w;
  const PhaseTaps th = phase_taps(ah, cp.pad_h, cp.dil_h, cp.stride_h, cp.r);
  const PhaseTaps tw = phase_taps(aw, cp.pad_w, cp.dil_w, cp.stride_w, cp.s);
  const int m0 = blockIdx.y * BM, j0 = blockIdx.x * BN;

  using Main = bwd_igemm::Mainloop<T, BM, BN, kMma>;
  constexpr int kBk = Main::kBk;
  DataLoader<T, kNhwc, kChunk, BM, BN, kBk> ld(cp, dy, w, g, m0, j0, th, tw, ah, aw, hp, wp);
  const int taps = th.count * tw.count;
  const int total_steps = kChunk ? taps * (cp.kg / kBk) : (taps * cp.kg + kBk - 1) / kBk;
  const bwd_igemm::StepRange range = bwd_igemm::split_steps(total_steps, split, splits);
  float acc[BM / 16][BN / 16];
  Main::run(ld, range.begin, range.end, acc);

  const std::int64_t HW = std::int64_t(cp.h) * cp.w;
#pragma unroll
  for (int j = 0; j < BN / 16; ++j) {
    const int pix = j0 + Main::col(j);
    const int n = pix / (hp * wp), rest = pix - n * (hp * wp);
    const int h = (rest / wp) * cp.stride_h + ah, x = (rest % wp) * cp.stride_w + aw;
    if (n >= cp.n || h >= cp.h || x >= cp.w) continue;
#pragma unroll
    for (int i = 0; i < BM / 16; ++i) {
      const int m = m0 + Main::row(i);
      if (m >= cp.cg) continue;
      const std::int64_t c = std::int64_t(g) * cp.cg + m;
      const std::int64_t idx = kNhwc ? (n * HW + std::int64_t(h) * cp.w + x) * cp.c + c
                                     : (n * std::int64_t(cp.c) + c) * HW + std::int64_t(h) * cp.w + x;
      if (splits > 1)
        partial[split * (std::int64_t(cp.n) * cp.c * HW) + idx] = acc[i][j];
      else
        dx[idx] = from_f32<T>(acc[i][j]);
    }
  }
}

template <typename T, bool kNhwc, bool kChunk>
void launch_tile(const ConvParams& p, const BwdIgemmPlan& plan, const T* dy, const T* w, T* dx,
                 float* partial, GpuStream stream) {
  const int hp = ceil_div(p.h, p.stride_h), wp = ceil_div(p.w, p.stride_w);
  const dim3 grid(ceil_div(std::int64_t(p.n) * hp * wp, plan.bn), ceil_div(p.cg, plan.bm),
                  p.groups * bwd_data_igemm_phases(p) * plan.splits);
  bwd_igemm::with_mainloop<T>(p.dtype, [&](auto mma) {
    if (plan.tile == 0)
      bwd_data_igemm_kernel<T, kNhwc, kChunk, 128, 128, mma.value>
          <<<grid, kThreads, 0, stream>>>(p, dy, w, dx, partial, plan.splits);
    else
      bwd_data_igemm_kernel<T, kNhwc, kChunk, 64, 64, mma.value>
          <<<grid, kThreads, 0, stream>>>(p, dy, w, dx, partial, plan.splits);
  });
}

}  // namespace

int bwd_data_igemm_phases(const ConvParams& p) {
  const std::int64_t phases = std::int64_t(p.stride_h) * p.stride_w;
  return phases * p.groups > 65535 ? 0 : int(phases);
}

BwdIgemmPlan plan_conv_bwd_data_igemm(const ConvParams& p, int sm_count) {
  const int phases = std::max(1, bwd_data_igemm_phases(p));
  // The phase with the most taps sets the longest block's step count.
  int most_r = 0, most_s = 0;
  for (int a = 0; a < p.stride_h; ++a)
    most_r = std::max(most_r, phase_taps(a, p.pad_h, p.dil_h, p.stride_h, p.r).count);
  for (int a = 0; a < p.stride_w; ++a)
    most_s = std::max(most_s, phase_taps(a, p.pad_w, p.dil_w, p.stride_w, p.s).count);
  const int bk = bwd_igemm::step_depth(p.dtype);
  const std::int64_t steps = std::max<std::int64_t>(1, std::int64_t(most_r) * most_s * ceil_div(p.kg, bk));
  const std::int64_t phase_pixels = std::int64_t(p.n) * ceil_div(p.h, p.stride_h) * ceil_div(p.w, p.stride_w);
  auto tiles_of = [&](int bm, int bn) {
    return std::int64_t(ceil_div(phase_pixels, bn)) * ceil_div(p.cg, bm) * p.groups * phases;
  };
  return bwd_igemm::plan_bwd_igemm(tiles_of, steps, bk, bwd_igemm::peak_rate(p.dtype), p.x_elems(),
                                   p.groups * phases, sm_count);
}

void launch_conv_bwd_data_igemm(const ConvParams& p, const BwdIgemmPlan& plan, const void* dy, const void* w,
                                void* dx, void* workspace, void* stream) {
  if (bwd_data_igemm_phases(p) == 0)
    throw Error(Status::invalid_argument, "gpu.conv.bwd_data_igemm: groups x stride phases exceed the grid");
  if (plan.splits > 1 && workspace == nullptr)
    throw Error(Status::invalid_argument, "gpu.conv.bwd_data_igemm: split-K plan needs a workspace of " +
                                              std::to_string(plan.workspace_bytes) + " bytes, got none");
  float* partial = plan.splits > 1 ? static_cast<float*>(workspace) : nullptr;
  const GpuStream s = as_stream(stream);
  const bool chunk = p.kg % bwd_igemm::step_depth(p.dtype) == 0;
  dispatch_dtype(p.dtype, "gpu.conv.bwd_data_igemm", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* dyt = static_cast<const T*>(dy);
    const T* wt = static_cast<const T*>(w);
    T* dxt = static_cast<T*>(dx);
    if (p.nhwc)
      chunk ? launch_tile<T, true, true>(p, plan, dyt, wt, dxt, partial, s)
            : launch_tile<T, true, false>(p, plan, dyt, wt, dxt, partial, s);
    else
      chunk ? launch_tile<T, false, true>(p, plan, dyt, wt, dxt, partial, s)
            : launch_tile<T, false, false>(p, plan, dyt, wt, dxt, partial, s);
  });
  check_launch("gpu.conv.bwd_data_igemm");
  if (plan.splits > 1) launch_bwd_splitk_sum(p.dtype, p.x_elems(), plan.splits, partial, dx, stream);
}

}  // namespace galley::backends::gpu
