// Batch and group norm kernels (gpu.bnorm.planes, gpu.gnorm.planes): a packed 4-D tensor as n x c
// planes of hw pixels. nchw training forward: (1) blocks reduce ranges of a plane's pixels to Welford
// partials, (2) one block per statistic merges its partials in a fixed order and writes
// saved_mean/saved_invstd (and batch norm's running statistics), (3) one thread per plane turns
// them into y = a*(x - m) + c coefficients, (4) one vectorised pass writes y. Inference runs (3) and
// (4) only. Backward: partial sums of dy and dy*(x - mean), one block per channel (dscale, dshift)
// and a block or part of one per statistic (the sums dx needs), coefficients of
// dx = a*dy + b*(x - m) + c, one pass. Two reads of x and one write for training, as the minimum
// without keeping x on chip; no atomics, so the bits are the same on every run. nhwc runs the same
// stages with its own partial and elementwise kernels, the coefficients computed by each thread for
// the channels it owns (no stage (3), and inference is one kernel); where the partial pass has
// blocks enough, the elementwise pass takes its ranges in reverse, so x (and dy) are read again most
// recent first, while the L2 cache still holds them.
#include <type_traits>

#include "norm_device.cuh"
#include "norm_kernels.hpp"

namespace galley::backends::gpu {
namespace {

// Plane sums in one block aim at this many blocks over the whole problem.
constexpr std::int64_t kTargetBlocks = 1024;
// The finalize kernels' threads per statistic where that gives at most 4 partials a thread.
constexpr int kFinalizeSmallThreads = 64;

__device__ __forceinline__ std::int64_t stat_of(const PlaneGeometry& g, std::int64_t image,
                                                std::int64_t channel) {
  return g.groups == 0 ? channel : image * g.groups + channel / (g.c / g.groups);
}

/// The i-th of the partial planes (segment * c + channel) a statistic gathers.
__device__ __forceinline__ std::int64_t plane_of_stat(const PlaneGeometry& g, std::int64_t stat,
                                                      std::int64_t i) {
  if (g.groups == 0) return i * g.c + stat;
  const std::int64_t cpg = g.c / g.groups;
  return (stat / g.groups) * g.c + (stat % g.groups) * cpg + i;
}
__host__ __device__ __forceinline__ std::int64_t planes_per_stat(const PlaneGeometry& g) {
  return g.groups == 0 ? g.segments : g.c / g.groups;
}

// ---- (1) partial reductions -------------------------------------------------------------------

/// What one element adds: its x (forward statistics) or its dy and dy * (x - center) (backward).
template <bool kBackward>
struct Partial;
template <>
struct Partial<false> {
  using State = Welford<float>;
};
template <>
struct Partial<true> {
  using State = Sum2<float>;
};

/// NCHW: `group` consecutive threads (a power of two up to kNormThreads) reduce one plane's range,
/// so small planes (7x7) share a block instead of idling most of it.
template <typename T, int kVec, bool kBackward>
__global__ void plane_partial_nchw(PlaneGeometry g, int group, const T* __restrict__ x,
                                   const T* __restrict__ dy, const float* __restrict__ saved_mean,
                                   float* __restrict__ partial) {
  using State = typename Partial<kBackward>::State;
  __shared__ State shared[kNormThreads];
  const int lane = int(threadIdx.x) % group;
  const std::int64_t p = std::int64_t(blockIdx.x) * (kNormThreads / group) + int(threadIdx.x) / group;
  const std::int64_t s = blockIdx.y;
  const bool active = p < g.planes();
  const std::int64_t begin = s * g.split_len, end = active ? min64(g.hw, begin + g.split_len) : begin;
  const T* xp = x + (active ? p : 0) * g.hw;
  State st{};
  // Backward: dy * (x - mean). Forward: Welford over x - center, the plane's first value, so the
  // running means stay small and keep every bit a mean of 1e4 would round away in f32.
  const float center = !active ? 0.f : kBackward ? saved_mean[stat_of(g, p / g.c, p % g.c)] : ldg_f32(xp);
  for (std::int64_t i = begin + std::int64_t(lane) * kVec; i < end; i += std::int64_t(group) * kVec) {
    if constexpr (kVec == 8) {
      float v[8];
      load8(xp + i, v);
      if constexpr (kBackward) {
        float d[8];
        load8(dy + p * g.hw + i, d);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          st.a += d[j];
          st.b += d[j] * (v[j] - center);
        }
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] -= center;
        welford_add8(st, v);
      }
    } else {
      const float v = ldg_f32(xp + i);
      if constexpr (kBackward) {
        const float d = ldg_f32(dy + p * g.hw + i);
        st.a += d;
        st.b += d * (v - center);
      } else {
        st.add(v - center);
      }
    }
  }
  shared[threadIdx.x] = st;
  const State t = group_merge(shared, group);
  if (lane == 0 && active) {
    float* out = partial + (s * g.partial_planes() + p) * (kBackward ? 2 : 4);
    if constexpr (kBackward) {
      out[0] = t.a, out[1] = t.b;
    } else {
      out[0] = t.n, out[1] = center, out[2] = t.mean, out[3] = t.m2;
    }
  }
}

// ---- (2) per statistic / per channel ------------------------------------------------------------

/// One block of kThreads per statistic: merges its planes' partials in double, writes
/// saved_mean/saved_invstd, the mean's f32 rounding error into mean_lo, and, with running
/// statistics given, updates them.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    stat_finalize(PlaneGeometry g, const float* __restrict__ partial, float epsilon,
                  float* __restrict__ saved_mean, float* __restrict__ saved_invstd,
                  float* __restrict__ running_mean, float* __restrict__ running_var, float momentum,
                  float* __restrict__ mean_lo) {
  __shared__ Welford<double> shared[kThreads];
  const std::int64_t stat = blockIdx.x;
  const std::int64_t items = planes_per_stat(g) * g.splits;
  Welford<double> w{};
  for (std::int64_t i = threadIdx.x; i < items; i += kThreads) {
    const std::int64_t plane = plane_of_stat(g, stat, i / g.splits), s = i % g.splits;
    const float* in = partial + (s * g.partial_planes() + plane) * 4;
    Welford<double> o{};
    o.n = in[0], o.mean = double(in[1]) + double(in[2]), o.m2 = in[3];
    w.merge(o);
  }
  shared[threadIdx.x] = w;
  tree_merge<Welford<double>, kThreads>(shared);
  if (threadIdx.x != 0) return;
  const Welford<double>& t = shared[0];
  const double var = t.n > 0 ? t.m2 / t.n : 0.0;
  saved_mean[stat] = float(t.mean);
  mean_lo[stat] = float(t.mean - double(float(t.mean)));
  saved_invstd[stat] = float(1.0 / sqrt(var + double(epsilon)));
  if (running_mean != nullptr) {
    const double unbiased = t.n > 1 ? var * t.n / (t.n - 1) : var;
    running_mean[stat] = float((1.0 - momentum) * running_mean[stat] + double(momentum) * t.mean);
    running_var[stat] = float((1.0 - momentum) * running_var[stat] + double(momentum) * unbiased);
  }
}

/// Blocks [0, c): channel c's dscale = sum r * sum(dy*(x-mean)) and dshift = sum dy over images;
/// the blocks after them: a statistic's sum of g = dy*scale and of g*xhat, into `stat_sums`, by
/// `stat_group` threads (a power of two dividing kNormThreads), kNormThreads / stat_group
/// statistics a block.
__global__ void grad_finalize(PlaneGeometry g, int stat_group, const float* __restrict__ partial,
                              const float* __restrict__ scale, const float* __restrict__ saved_invstd,
                              float* __restrict__ dscale, float* __restrict__ dshift,
                              float* __restrict__ stat_sums) {
  __shared__ Sum2<double> shared[kNormThreads];
  const bool channel_block = blockIdx.x < g.c;
  const int group = channel_block ? kNormThreads : stat_group;
  const int lane = int(threadIdx.x) % group;
  const std::int64_t id =
      channel_block ? std::int64_t(blockIdx.x)
                    : (std::int64_t(blockIdx.x) - g.c) * (kNormThreads / group) + int(threadIdx.x) / group;
  const bool active = channel_block || id < g.stats();
  const std::int64_t items = !active ? 0 : (channel_block ? g.segments : planes_per_stat(g)) * g.splits;
  Sum2<double> acc{};
  for (std::int64_t i = lane; i < items; i += group) {
    const std::int64_t s = i % g.splits;
    const std::int64_t plane = channel_block ? (i / g.splits) * g.c + id : plane_of_stat(g, id, i / g.splits);
    const std::int64_t ch = plane % g.c;
    const float* in = partial + (s * g.partial_planes() + plane) * 2;
    const double r = saved_invstd[stat_of(g, plane / g.c, ch)];
    if (channel_block) {
      acc.a += in[1] * r;
      acc.b += in[0];
    } else {
      acc.a += double(scale[ch]) * in[0];
      acc.b += double(scale[ch]) * in[1] * r;
    }
  }
  shared[threadIdx.x] = acc;
  const Sum2<double> t = group_merge(shared, group);
  if (lane != 0 || !active) return;
  if (channel_block) {
    dscale[id] = float(t.a);
    dshift[id] = float(t.b);
  } else {
    stat_sums[2 * id] = float(t.a);
    stat_sums[2 * id + 1] = float(t.b);
  }
}

// ---- (3) per-plane coefficients ------------------------------------------------------------------

/// What the coefficients are computed from. Forward: `mean` and `invstd` the saved statistics, or
/// with `running_var` given (inference) `mean` the running mean and invstd from running_var and
/// epsilon; `mean_lo` the mean's f32 rounding error (null for inference). Backward: `mean` and
/// `invstd` the saved statistics, `stat_sums` grad_finalize's per-statistic sums.
struct CoefInputs {
  const float* mean;
  const float* invstd;
  const float* running_var;
  float epsilon;
  const float* mean_lo;
  const float* scale;
  const float* shift;
  const float* stat_sums;
};

/// Forward y = a*((x - m) - l) + c (the centre first, so a large mean does not cancel, l the mean's
/// f32 rounding error); backward dx = a*dy + b*(x - m) + c, i.e.
/// r*(scale*dy - sum_g/M - xhat*sum_gxhat/M).
struct Coef {
  float a, b, m, l, c;
};

__device__ __forceinline__ Coef forward_coef(const PlaneGeometry& g, const CoefInputs& in, std::int64_t image,
                                             std::int64_t ch) {
  const std::int64_t st = stat_of(g, image, ch);
  const float r = in.running_var != nullptr ? 1.0f / sqrtf(in.running_var[ch] + in.epsilon) : in.invstd[st];
  return {r * in.scale[ch], 0.f, in.mean[st], in.mean_lo != nullptr ? in.mean_lo[st] : 0.f, in.shift[ch]};
}

__device__ __forceinline__ Coef backward_coef(const PlaneGeometry& g, const CoefInputs& in,
                                              std::int64_t image, std::int64_t ch) {
  const std::int64_t st = stat_of(g, image, ch);
  const double m = double(g.count());
  const double r = in.invstd[st], mu = in.mean[st];
  const double b = -r * r * in.stat_sums[2 * st + 1] / m;
  return {float(r * in.scale[ch]), float(b), float(mu), 0.f, float(-r * in.stat_sums[2 * st] / m)};
}

/// One thread per plane (nchw): its coefficients into ka, kb (backward), km, kl (forward), kc.
template <bool kBackward>
__global__ void plane_coef(PlaneGeometry g, CoefInputs in, float* __restrict__ ka, float* __restrict__ kb,
                           float* __restrict__ km, float* __restrict__ kl, float* __restrict__ kc) {
  for (std::int64_t p = grid_stride_start(); p < g.planes(); p += grid_stride_step()) {
    const Coef k = kBackward ? backward_coef(g, in, p / g.c, p % g.c) : forward_coef(g, in, p / g.c, p % g.c);
    ka[p] = k.a;
    km[p] = k.m;
    kc[p] = k.c;
    if constexpr (kBackward) {
      kb[p] = k.b;
    } else {
      kl[p] = k.l;
    }
  }
}

// ---- (4) the elementwise pass ---------------------------------------------------------------------

/// nchw: out = ka[p]*((u - km[p]) - kl[p]) + kc[p], or with kTwo ka[p]*u + kb[p]*(v - km[p]) + kc[p]; kVec
/// elements a step.
template <typename T, int kVec, bool kTwo>
__global__ void plane_apply(PlaneGeometry g, const T* __restrict__ u, const T* __restrict__ v,
                            const float* __restrict__ ka, const float* __restrict__ kb,
                            const float* __restrict__ km, const float* __restrict__ kl,
                            const float* __restrict__ kc, T* __restrict__ out) {
  const std::int64_t vectors = g.planes() * g.hw / kVec;
  for (std::int64_t i = grid_stride_start(); i < vectors; i += grid_stride_step()) {
    const std::int64_t e = i * kVec;
    float a[kVec], b[kVec], m[kVec], l[kVec], c[kVec], uu[kVec], vv[kVec];
    // A vector may straddle two planes (hw not a multiple of 8, but at least 8): the elements
    // past the plane's end take the next plane's coefficients.
    const std::int64_t p = e / g.hw, first_of_next = (p + 1) * g.hw - e;
    const std::int64_t q = first_of_next < kVec ? p + 1 : p;
    const float pa = ka[p], pb = kTwo ? kb[p] : 0.f, pm = km[p], pl = kTwo ? 0.f : kl[p], pc = kc[p];
    const float qa = ka[q], qb = kTwo ? kb[q] : 0.f, qm = km[q], ql = kTwo ? 0.f : kl[q], qc = kc[q];
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const bool next = j >= first_of_next;
      a[j] = next ? qa : pa, b[j] = next ? qb : pb, m[j] = next ? qm : pm, l[j] = next ? ql : pl;
      c[j] = next ? qc : pc;
    }
    if constexpr (kVec == 8) {
      load8(u + e, uu);
      if constexpr (kTwo) load8(v + e, vv);
    } else {
      uu[0] = ldg_f32(u + e);
      if constexpr (kTwo) vv[0] = ldg_f32(v + e);
    }
    float o[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      o[j] =
          kTwo ? fmaf(a[j], uu[j], fmaf(b[j], vv[j] - m[j], c[j])) : fmaf(a[j], (uu[j] - m[j]) - l[j], c[j]);
    }
    if constexpr (kVec == 8) {
      store8(out + e, o);
    } else {
      out[e] = from_f32<T>(o[0]);
    }
  }
}

// ---- nhwc: partials and the elementwise pass ------------------------------------------------------
// A statistic's values are columns of rows of c contiguous channels. threadIdx.x owns a fixed vector
// of kVec channels (its accumulators or coefficients stay in registers), threadIdx.y strides over
// the rows with several loads in flight before any is used; a row's address is row * c + channel,
// no division per element. blockIdx.x is the channel tile, blockIdx.z the segment.

/// Rows a thread loads before using any: 128 bytes of each input tensor (eight 16-byte loads of
/// f16/bf16, four of f32 pairs), half that when two tensors are read.
template <typename T, bool kTwoInputs>
constexpr int kNhwcRowsInFlight = (sizeof(T) == 4 ? 4 : 8) / (kTwoInputs ? 2 : 1);

/// kVec elements as loaded: rows in flight hold their storage width (4 registers for 8 halves)
/// until used, not 8 floats each.
template <typename T, int kVec>
struct Packed {
  T v;
};
template <typename T>
struct Packed<T, 8> {
  uint4 w;
};
template <>
struct Packed<float, 8> {
  float4 lo, hi;
};

template <typename T, int kVec>
__device__ __forceinline__ Packed<T, kVec> load_packed(const T* ptr) {
  if constexpr (kVec == 1) {
    return {*ptr};
  } else if constexpr (std::is_same_v<T, float>) {
    return {__ldg(reinterpret_cast<const float4*>(ptr)), __ldg(reinterpret_cast<const float4*>(ptr) + 1)};
  } else {
    return {__ldg(reinterpret_cast<const uint4*>(ptr))};
  }
}

/// Whether the elementwise pass marks its reads evict-first (ld.global.cs, CUDA only). Within one
/// call that lets its output displace lines it has already used instead of those it has yet to
/// read, if a hit takes the mark (up to the whole L2 cache reused rather than about half). Off: the
/// lines it reads last, the ranges' first rows, then stay cached for a next partial pass over the
/// same tensor (repeated calls on one buffer), which starts on them.
constexpr bool kApplyReadsEvictFirst = false;

/// load_packed for the elementwise pass's reads, the last of each value in the operation.
template <typename T, int kVec>
__device__ __forceinline__ Packed<T, kVec> load_packed_last(const T* ptr) {
#if !GALLEY_GPU_HIP
  if constexpr (kApplyReadsEvictFirst && kVec == 8) {
    if constexpr (std::is_same_v<T, float>) {
      return {__ldcs(reinterpret_cast<const float4*>(ptr)), __ldcs(reinterpret_cast<const float4*>(ptr) + 1)};
    } else {
      return {__ldcs(reinterpret_cast<const uint4*>(ptr))};
    }
  }
#endif
  return load_packed<T, kVec>(ptr);
}

template <typename T, int kVec>
__device__ __forceinline__ void unpack(const Packed<T, kVec>& p, float (&out)[kVec]) {
  if constexpr (kVec == 1) {
    out[0] = to_f32(p.v);
  } else if constexpr (std::is_same_v<T, float>) {
    out[0] = p.lo.x, out[1] = p.lo.y, out[2] = p.lo.z, out[3] = p.lo.w;
    out[4] = p.hi.x, out[5] = p.hi.y, out[6] = p.hi.z, out[7] = p.hi.w;
  } else {
    const std::uint32_t words[4] = {p.w.x, p.w.y, p.w.z, p.w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = unpack2(words[i], static_cast<T*>(nullptr));
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
}
template <typename T, int kVec>
__device__ __forceinline__ void store_vec(T* ptr, const float (&v)[kVec]) {
  if constexpr (kVec == 8) {
    store8(ptr, v);
  } else {
    *ptr = from_f32<T>(v[0]);
  }
}

/// Partials of one (range, segment, channel tile), blockIdx.y the range. Forward: Welford over
/// x - centre, the segment's first row (as nchw: small running means keep the bits a large mean
/// would round away); the channels of a thread advance in step, so they share the count and its
/// reciprocal. Backward: sum dy and sum dy * (x - mean).
template <typename T, int kVec, bool kBackward>
__global__ void __launch_bounds__(kNormThreads)
    nhwc_partial(PlaneGeometry g, const T* __restrict__ x, const T* __restrict__ dy,
                 const float* __restrict__ saved_mean, float* __restrict__ partial) {
  using State = typename Partial<kBackward>::State;
  constexpr int kRows = kNhwcRowsInFlight<T, kBackward>;
  __shared__ State shared[kNormThreads * kVec];
  const int tx = int(blockDim.x), ty = int(blockDim.y);
  const std::int64_t range = blockIdx.y, seg = blockIdx.z;
  const std::int64_t c0 = (std::int64_t(blockIdx.x) * tx + threadIdx.x) * kVec;
  const bool active = c0 < g.c;
  const std::int64_t len = g.segment_len();
  const std::int64_t begin = range * g.split_len, end = min64(len, begin + g.split_len);
  const std::int64_t seg_offset = seg * len * g.c + (active ? c0 : 0);
  float center[kVec];
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    center[j] = !active ? 0.f : kBackward ? saved_mean[stat_of(g, seg, c0 + j)] : ldg_f32(x + seg_offset + j);
  }
  float acc_a[kVec] = {}, acc_b[kVec] = {};  // Welford mean and M2, or sum dy and sum dy*(x - mean)
  float count = 0;
  const std::int64_t first = begin + threadIdx.y;
  const std::int64_t mine = active && first < end ? (end - first + ty - 1) / ty : 0;
  const std::int64_t step = std::int64_t(ty) * g.c;
  const T* px = x + seg_offset + first * g.c;
  const T* pd = kBackward ? dy + seg_offset + first * g.c : nullptr;
  auto accumulate = [&](const Packed<T, kVec>& pv, const Packed<T, kVec>& pdy) {
    float v[kVec], d[kVec];
    unpack(pv, v);
    if constexpr (kBackward) unpack(pdy, d);
    if constexpr (kBackward) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        acc_a[j] += d[j];
        acc_b[j] += d[j] * (v[j] - center[j]);
      }
    } else {
      count += 1;
      const float inverse = 1.0f / count;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float value = v[j] - center[j];
        const float delta = value - acc_a[j];
        acc_a[j] += delta * inverse;
        acc_b[j] += delta * (value - acc_a[j]);
      }
    }
  };
  std::int64_t k = 0;
  for (; k + kRows <= mine; k += kRows) {
    Packed<T, kVec> v[kRows], d[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      v[r] = load_packed<T, kVec>(px + r * step);
      if constexpr (kBackward) d[r] = load_packed<T, kVec>(pd + r * step);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) accumulate(v[r], d[r]);
    px += kRows * step;
    if constexpr (kBackward) pd += kRows * step;
  }
  // Row by row after the last whole batch: plane_geometry makes ranges whole batches, so only a
  // segment's last range can have such rows.
  for (; k < mine; ++k) {
    Packed<T, kVec> v, d;
    v = load_packed<T, kVec>(px);
    if constexpr (kBackward) d = load_packed<T, kVec>(pd);
    accumulate(v, d);
    px += step;
    if constexpr (kBackward) pd += step;
  }
  // Merge over threadIdx.y in a fixed tree (ty need not be a power of two).
  const int tid = int(threadIdx.y) * tx + int(threadIdx.x);
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    State st{};
    if constexpr (kBackward) {
      st.a = acc_a[j], st.b = acc_b[j];
    } else {
      st.n = count, st.mean = acc_a[j], st.m2 = acc_b[j];
    }
    shared[tid * kVec + j] = st;
  }
  __syncthreads();
  int top = 1;
  while (top < ty) top *= 2;
  for (int stride = top / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.y) < stride && int(threadIdx.y) + stride < ty) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) shared[tid * kVec + j].merge(shared[(tid + stride * tx) * kVec + j]);
    }
    __syncthreads();
  }
  if (threadIdx.y != 0 || !active) return;
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    const State& t = shared[tid * kVec + j];
    float* out = partial + ((range * g.segments + seg) * g.c + c0 + j) * (kBackward ? 2 : 4);
    if constexpr (kBackward) {
      out[0] = t.a, out[1] = t.b;
    } else {
      out[0] = t.n, out[1] = center[j], out[2] = t.mean, out[3] = t.m2;
    }
  }
}

/// The elementwise pass: forward y from x (u), backward dx from dy (u) and x (v). Block (x, y, z)
/// takes `ranges` ranges of `range_len` rows per segment (grid-striding over y) and walks each from
/// its end in chunks of ty * kRows rows. The blocks and the rows within a range run in the reverse of
/// the partial pass's order: given that pass's ranges (range_len == g.split_len), every block starts
/// on the rows the partial pass read last, the likeliest still in the L2 cache, and works back to
/// those it read first, so the cache is drained from its most recent end. Smaller problems take
/// short ranges of one chunk instead, for more blocks.
template <typename T, int kVec, int kRows, bool kBackward>
__global__ void __launch_bounds__(kNormThreads, 2)
    nhwc_apply(PlaneGeometry g, CoefInputs in, const T* __restrict__ u, const T* __restrict__ v,
               T* __restrict__ out, std::int64_t range_len, std::int64_t ranges) {
  const int tx = int(blockDim.x), ty = int(blockDim.y);
  const std::int64_t tile = std::int64_t(gridDim.x) - 1 - blockIdx.x;
  const std::int64_t c0 = (tile * tx + threadIdx.x) * kVec;
  if (c0 >= g.c) return;
  const std::int64_t seg = g.segments - 1 - std::int64_t(blockIdx.z);
  float a[kVec], b[kVec], m[kVec], l[kVec], c[kVec];
  bool have_coef = false;
  const std::int64_t len = g.segment_len();
  const std::int64_t base = seg * len * g.c + c0, step = std::int64_t(ty) * g.c;
  const std::int64_t chunk_rows = std::int64_t(ty) * kRows;
  for (std::int64_t r = blockIdx.y; r < ranges; r += gridDim.y) {
    const std::int64_t begin = (ranges - 1 - r) * range_len, end = min64(len, begin + range_len);
    for (std::int64_t chunk = (end - begin + chunk_rows - 1) / chunk_rows - 1; chunk >= 0; --chunk) {
      const std::int64_t first = begin + chunk * chunk_rows + threadIdx.y;
      // Rows of this chunk left to the thread, times ty: row k is in the range while k * ty < left.
      const int left = int(min64(end - first, chunk_rows));
      const std::int64_t off = base + first * g.c;
      const T* pu_row = u + off;
      const T* pv_row = kBackward ? v + off : nullptr;
      Packed<T, kVec> pu[kRows], pv[kRows];
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        if (k * ty < left) {
          pu[k] = load_packed_last<T, kVec>(pu_row + k * step);
          if constexpr (kBackward) pv[k] = load_packed_last<T, kVec>(pv_row + k * step);
        }
      }
      // The coefficients after the first rows' loads are issued, so their latencies overlap.
      if (!have_coef) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const Coef k = kBackward ? backward_coef(g, in, seg, c0 + j) : forward_coef(g, in, seg, c0 + j);
          a[j] = k.a, b[j] = k.b, m[j] = k.m, l[j] = k.l, c[j] = k.c;
        }
        have_coef = true;
      }
      T* po_row = out + off;
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        if (k * ty < left) {
          float uu[kVec], vv[kVec], o[kVec];
          unpack(pu[k], uu);
          if constexpr (kBackward) unpack(pv[k], vv);
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            o[j] = kBackward ? fmaf(a[j], uu[j], fmaf(b[j], vv[j] - m[j], c[j]))
                             : fmaf(a[j], (uu[j] - m[j]) - l[j], c[j]);
          }
          store_vec<T, kVec>(po_row + k * step, o);
        }
      }
    }
  }
}

// ---- host side ----------------------------------------------------------------------------------

bool vectorised(const PlaneGeometry& g) { return g.nhwc ? g.c % 8 == 0 : g.hw % 8 == 0; }
/// The elementwise pass reads 8-vectors of the flat tensor: in nchw they may cross one plane
/// boundary (hw >= 8), so only the total must be a multiple of 8.
bool apply_vectorised(const PlaneGeometry& g) {
  return g.hw % 8 == 0 || (g.hw >= 8 && (g.planes() * g.hw) % 8 == 0);
}

/// nhwc block shape: tx threads over the channel vectors of a tile (at most 32, the tiles as even
/// as they can be), ty = kNormThreads / tx over rows.
struct NhwcShape {
  std::int64_t tiles;
  int tx, ty;
};
NhwcShape nhwc_shape(std::int64_t c) {
  const std::int64_t vectors = c % 8 == 0 ? c / 8 : c;
  const std::int64_t tiles = (vectors + 31) / 32;
  const int tx = int((vectors + tiles - 1) / tiles);
  return {tiles, tx, kNormThreads / tx};
}

// nhwc partial blocks aim at this many blocks over the whole problem: a few per multiprocessor.
constexpr std::int64_t kNhwcTargetBlocks = 512;
// The elementwise pass takes the partial pass's ranges (in reverse, for what the L2 cache still
// holds of them) when they give at least this many blocks, about two per multiprocessor; otherwise
// chunks of kNhwcRowsInFlight rows a thread, or one row a thread when full chunks give fewer blocks
// than kNhwcMinApplyBlocks, so small tensors still spread over the device.
constexpr std::int64_t kNhwcMirrorMinBlocks = 256;
constexpr std::int64_t kNhwcMinApplyBlocks = 512;

struct Workspace {
  float* partial;
  float* stat_sums;
  float* ka;
  float* kb;
  float* km;
  float* kl;
  float* kc;
};

/// nchw keeps per-plane coefficients in the workspace; nhwc threads compute theirs.
std::int64_t coef_floats(const PlaneGeometry& g) { return g.nhwc ? 0 : 5 * g.planes(); }

Workspace carve(const PlaneGeometry& g, void* base) {
  auto* f = static_cast<float*>(base);
  Workspace w{};
  w.partial = f;
  f += g.splits * g.partial_planes() * 4;
  w.stat_sums = f;
  f += 2 * g.stats();
  if (coef_floats(g) == 0) return w;
  w.ka = f;
  f += g.planes();
  w.kb = f;
  f += g.planes();
  w.km = f;
  f += g.planes();
  w.kl = f;
  f += g.planes();
  w.kc = f;
  return w;
}

template <typename T, bool kBackward>
void launch_partial(const PlaneGeometry& g, const T* x, const T* dy, const float* saved_mean, float* partial,
                    GpuStream s) {
  if (g.nhwc) {
    // Ranges then segments: blocks start in memory order, which the elementwise pass reverses.
    const NhwcShape sh = nhwc_shape(g.c);
    const dim3 block(unsigned(sh.tx), unsigned(sh.ty));
    const dim3 grid(unsigned(sh.tiles), unsigned(g.splits), unsigned(g.segments));
    if (vectorised(g)) {
      nhwc_partial<T, 8, kBackward><<<grid, block, 0, s>>>(g, x, dy, saved_mean, partial);
    } else {
      nhwc_partial<T, 1, kBackward><<<grid, block, 0, s>>>(g, x, dy, saved_mean, partial);
    }
  } else {
    // Threads per plane: enough for one pass over a range, 32 to kNormThreads.
    const int group = threads_for((g.split_len + (vectorised(g) ? 7 : 0)) / (vectorised(g) ? 8 : 1));
    const std::int64_t per_block = kNormThreads / group;
    const dim3 grid(unsigned((g.planes() + per_block - 1) / per_block), unsigned(g.splits));
    if (vectorised(g)) {
      plane_partial_nchw<T, 8, kBackward><<<grid, kNormThreads, 0, s>>>(g, group, x, dy, saved_mean, partial);
    } else {
      plane_partial_nchw<T, 1, kBackward><<<grid, kNormThreads, 0, s>>>(g, group, x, dy, saved_mean, partial);
    }
  }
}

template <typename T, int kVec, int kRows, bool kBackward>
void launch_nhwc_apply_ranges(const PlaneGeometry& g, const NhwcShape& sh, const CoefInputs& in, const T* u,
                              const T* v, T* out, std::int64_t range_len, GpuStream s) {
  const std::int64_t ranges = (g.segment_len() + range_len - 1) / range_len;
  const dim3 grid(unsigned(sh.tiles), unsigned(std::min<std::int64_t>(ranges, 65535)), unsigned(g.segments));
  nhwc_apply<T, kVec, kRows, kBackward>
      <<<grid, dim3(unsigned(sh.tx), unsigned(sh.ty)), 0, s>>>(g, in, u, v, out, range_len, ranges);
}

template <typename T, int kVec, bool kBackward>
void launch_nhwc_apply_vec(const PlaneGeometry& g, const CoefInputs& in, const T* u, const T* v, T* out,
                           GpuStream s) {
  constexpr int kRows = kNhwcRowsInFlight<T, kBackward>;
  const NhwcShape sh = nhwc_shape(g.c);
  if (sh.tiles * g.splits * g.segments >= kNhwcMirrorMinBlocks) {
    launch_nhwc_apply_ranges<T, kVec, kRows, kBackward>(g, sh, in, u, v, out, g.split_len, s);
    return;
  }
  const std::int64_t rows = std::int64_t(sh.ty) * kRows;
  const std::int64_t full_blocks = sh.tiles * g.segments * ((g.segment_len() + rows - 1) / rows);
  if (full_blocks >= kNhwcMinApplyBlocks) {
    launch_nhwc_apply_ranges<T, kVec, kRows, kBackward>(g, sh, in, u, v, out, rows, s);
  } else {
    launch_nhwc_apply_ranges<T, kVec, 1, kBackward>(g, sh, in, u, v, out, sh.ty, s);
  }
}

template <typename T, bool kBackward>
void launch_nhwc_apply(const PlaneGeometry& g, const CoefInputs& in, const T* u, const T* v, T* out,
                       GpuStream s) {
  if (vectorised(g)) {
    launch_nhwc_apply_vec<T, 8, kBackward>(g, in, u, v, out, s);
  } else {
    launch_nhwc_apply_vec<T, 1, kBackward>(g, in, u, v, out, s);
  }
}

/// nchw: the per-plane coefficients, then the elementwise pass.
template <typename T, bool kTwo>
void launch_plane_apply(const PlaneGeometry& g, const CoefInputs& in, const T* u, const T* v,
                        const Workspace& w, T* out, GpuStream s) {
  plane_coef<kTwo>
      <<<grid_for(g.planes(), kNormThreads), kNormThreads, 0, s>>>(g, in, w.ka, w.kb, w.km, w.kl, w.kc);
  const bool vec = apply_vectorised(g);
  const std::int64_t vectors = g.planes() * g.hw / (vec ? 8 : 1);
  const unsigned grid = grid_for(vectors, kNormThreads);
  auto kernel = vec ? plane_apply<T, 8, kTwo> : plane_apply<T, 1, kTwo>;
  kernel<<<grid, kNormThreads, 0, s>>>(g, u, v, w.ka, w.kb, w.km, w.kl, w.kc, out);
}

template <typename T, bool kTwo>
void launch_apply(const PlaneGeometry& g, const CoefInputs& in, const T* u, const T* v, const Workspace& w,
                  T* out, GpuStream s) {
  if (g.nhwc) {
    launch_nhwc_apply<T, kTwo>(g, in, u, v, out, s);
  } else {
    launch_plane_apply<T, kTwo>(g, in, u, v, w, out, s);
  }
}

}  // namespace

PlaneGeometry plane_geometry(std::int64_t n, std::int64_t c, std::int64_t hw, std::int64_t groups, bool nhwc,
                             DType dtype) {
  PlaneGeometry g{n, c, hw, groups, nhwc, dtype, 1, hw, n};
  if (nhwc) {
    // Batch norm's rows are every image's pixels (one segment), group norm's an image's.
    g.segments = groups == 0 ? 1 : n;
    const NhwcShape sh = nhwc_shape(c);
    // Ranges are whole batches of 8 rows a thread (a multiple of every kNhwcRowsInFlight), so both
    // passes load every batch but a segment's last with all of their rows in flight at once; at
    // least one batch a range, and at least kNhwcTargetBlocks blocks where the rows allow.
    const std::int64_t len = g.segment_len();
    const std::int64_t batch = 8 * std::int64_t(sh.ty);
    const std::int64_t batches = (len + batch - 1) / batch;
    std::int64_t splits = (kNhwcTargetBlocks + g.segments * sh.tiles - 1) / (g.segments * sh.tiles);
    splits = std::min(splits, batches);
    g.split_len = batches / splits * batch;
    g.splits = (len + g.split_len - 1) / g.split_len;
    return g;
  }
  // Blocks without splitting: a plane each.
  const std::int64_t base = n * c;
  std::int64_t splits = std::max<std::int64_t>(1, (kTargetBlocks + base - 1) / base);
  splits = std::min<std::int64_t>(splits, std::max<std::int64_t>(1, hw / 256));  // at least 256 pixels each
  std::int64_t len = (hw + splits - 1) / splits;
  len = (len + 7) / 8 * 8;  // keeps 8-wide loads inside one range
  g.split_len = len;
  g.splits = (hw + len - 1) / len;
  return g;
}

const char* plane_geometry_limit(const PlaneGeometry& g) {
  if (g.splits > 65535) return "too many pixels per plane for the grid (more than 65535 ranges)";
  if (g.split_len > (std::int64_t(1) << 24))
    return "a pixel range is longer than 2^24 (f32 counts stop being exact)";
  if (g.nhwc && g.segments > 65535) return "batch n > 65535 (the grid's z dimension) in nhwc group norm";
  if (g.nhwc && nhwc_shape(g.c).tiles > 0x7fffffffLL) return "too many channel tiles for the grid";
  if (g.planes() > 0x7fffffffLL || g.c + g.stats() > 0x7fffffffLL) return "more than 2^31 - 1 planes";
  return nullptr;
}

std::size_t plane_workspace_bytes(const PlaneGeometry& g) {
  return std::size_t(g.splits * g.partial_planes() * 4 + 2 * g.stats() + coef_floats(g)) * sizeof(float);
}

void launch_plane_forward_training(const PlaneGeometry& g, const dnn::NormArgs& a, double epsilon,
                                   bool update_running, double momentum, void* stream, const char* what) {
  const GpuStream s = as_stream(stream);
  const Workspace w = carve(g, a.workspace);
  dispatch_dtype(g.dtype, what, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto* x = static_cast<const T*>(a.x);
    launch_partial<T, false>(g, x, nullptr, nullptr, w.partial, s);
    auto* saved_mean = static_cast<float*>(a.saved_mean);
    auto* saved_invstd = static_cast<float*>(a.saved_invstd);
    // Statistics of few partials (nhwc group norm: a group's channels times an image's ranges) take
    // small blocks: more of them resident at once, and a shallower merge tree.
    const bool small = planes_per_stat(g) * g.splits <= 4 * kFinalizeSmallThreads;
    auto finalize = small ? stat_finalize<kFinalizeSmallThreads> : stat_finalize<kNormThreads>;
    finalize<<<unsigned(g.stats()), small ? kFinalizeSmallThreads : kNormThreads, 0, s>>>(
        g, w.partial, float(epsilon), saved_mean, saved_invstd,
        update_running ? static_cast<float*>(a.running_mean) : nullptr,
        update_running ? static_cast<float*>(a.running_var) : nullptr, float(momentum), w.stat_sums);
    const CoefInputs in{saved_mean,
                        saved_invstd,
                        nullptr,
                        0.f,
                        w.stat_sums,
                        static_cast<const float*>(a.scale),
                        static_cast<const float*>(a.shift),
                        nullptr};
    launch_apply<T, false>(g, in, x, nullptr, w, static_cast<T*>(a.y), s);
  });
  check_launch(what);
}

void launch_plane_forward_inference(const PlaneGeometry& g, const dnn::NormArgs& a, double epsilon,
                                    void* stream, const char* what) {
  const GpuStream s = as_stream(stream);
  const Workspace w = carve(g, a.workspace);
  dispatch_dtype(g.dtype, what, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const CoefInputs in{static_cast<const float*>(a.running_mean),
                        nullptr,
                        static_cast<const float*>(a.running_var),
                        float(epsilon),
                        nullptr,
                        static_cast<const float*>(a.scale),
                        static_cast<const float*>(a.shift),
                        nullptr};
    launch_apply<T, false>(g, in, static_cast<const T*>(a.x), nullptr, w, static_cast<T*>(a.y), s);
  });
  check_launch(what);
}

void launch_plane_backward(const PlaneGeometry& g, const dnn::NormArgs& a, void* stream, const char* what) {
  const GpuStream s = as_stream(stream);
  const Workspace w = carve(g, a.workspace);
  const auto* saved_mean = static_cast<const float*>(a.saved_mean);
  const auto* saved_invstd = static_cast<const float*>(a.saved_invstd);
  const auto* scale = static_cast<const float*>(a.scale);
  dispatch_dtype(g.dtype, what, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto* x = static_cast<const T*>(a.x);
    const auto* dy = static_cast<const T*>(a.dy);
    launch_partial<T, true>(g, x, dy, saved_mean, w.partial, s);
    // As stat_finalize: statistics of few partials share a block, kFinalizeSmallThreads each.
    const int stat_group =
        planes_per_stat(g) * g.splits <= 4 * kFinalizeSmallThreads ? kFinalizeSmallThreads : kNormThreads;
    const std::int64_t stats_per_block = kNormThreads / stat_group;
    grad_finalize<<<unsigned(g.c + (g.stats() + stats_per_block - 1) / stats_per_block), kNormThreads, 0,
                    s>>>(g, stat_group, w.partial, scale, saved_invstd, static_cast<float*>(a.dscale),
                         static_cast<float*>(a.dshift), w.stat_sums);
    const CoefInputs in{saved_mean, saved_invstd, nullptr, 0.f, nullptr, scale, nullptr, w.stat_sums};
    launch_apply<T, true>(g, in, dy, x, w, static_cast<T*>(a.dx), s);
  });
  check_launch(what);
}

}  // namespace galley::backends::gpu
