// Batch and group norm kernels (gpu.bnorm.planes, gpu.gnorm.planes): a packed 4-D tensor as n x c
// planes of hw pixels. Training forward: (1) blocks reduce ranges of a plane's pixels to Welford
// partials, (2) one block per statistic merges its partials in a fixed order and writes
// saved_mean/saved_invstd (and batch norm's running statistics), (3) one thread per plane turns
// them into y = a*(x - m) + c coefficients, (4) one vectorised pass writes y. Inference runs (3) and (4)
// only. Backward: partial sums of dy and dy*(x - mean), one block per channel (dscale, dshift) and
// per statistic (the sums dx needs), coefficients of dx = a*dy + b*(x - m) + c, one pass. Two reads of x
// and one write for training, as the minimum without keeping x on chip; no atomics, so the bits are
// the same on every run.
#include "norm_device.cuh"
#include "norm_kernels.hpp"

namespace galley::backends::gpu {
namespace {

// Plane sums in one block aim at this many blocks over the whole problem.
constexpr std::int64_t kTargetBlocks = 1024;

__device__ __forceinline__ std::int64_t stat_of(const PlaneGeometry& g, std::int64_t image,
                                                std::int64_t channel) {
  return g.groups == 0 ? channel : image * g.groups + channel / (g.c / g.groups);
}

/// The i-th of the planes a statistic gathers.
__device__ __forceinline__ std::int64_t plane_of_stat(const PlaneGeometry& g, std::int64_t stat,
                                                      std::int64_t i) {
  if (g.groups == 0) return i * g.c + stat;
  const std::int64_t cpg = g.c / g.groups;
  return (stat / g.groups) * g.c + (stat % g.groups) * cpg + i;
}
__device__ __forceinline__ std::int64_t planes_per_stat(const PlaneGeometry& g) {
  return g.groups == 0 ? g.n : g.c / g.groups;
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
    float* out = partial + (s * g.planes() + p) * (kBackward ? 2 : 4);
    if constexpr (kBackward) {
      out[0] = t.a, out[1] = t.b;
    } else {
      out[0] = t.n, out[1] = center, out[2] = t.mean, out[3] = t.m2;
    }
  }
}

/// NHWC: threadIdx.x walks channel vectors (kVec channels each), threadIdx.y pixels; blockIdx.y is
/// the image, blockIdx.z the pixel range.
template <typename T, int kVec, bool kBackward>
__global__ void plane_partial_nhwc(PlaneGeometry g, const T* __restrict__ x, const T* __restrict__ dy,
                                   const float* __restrict__ saved_mean, float* __restrict__ partial) {
  using State = typename Partial<kBackward>::State;
  __shared__ State shared[kNormThreads];
  const std::int64_t image = blockIdx.y, s = blockIdx.z;
  const std::int64_t c0 = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  const bool active = c0 < g.c;
  const std::int64_t begin = s * g.split_len, end = min64(g.hw, begin + g.split_len);
  State st[kVec]{};
  float center[kVec];
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    // As in nchw: the mean (backward) or the image's first pixel (forward, the Welford shift).
    center[j] = !active     ? 0.f
                : kBackward ? saved_mean[stat_of(g, image, c0 + j)]
                            : ldg_f32(x + image * g.hw * g.c + c0 + j);
  }
  if (active) {
    float count = 0;
    for (std::int64_t pix = begin + threadIdx.y; pix < end; pix += blockDim.y) {
      const std::int64_t off = (image * g.hw + pix) * g.c + c0;
      count += 1;
      const float inverse = 1.0f / count;
      float v[kVec], d[kVec];
      if constexpr (kVec == 8) {
        load8(x + off, v);
        if constexpr (kBackward) load8(dy + off, d);
      } else {
        v[0] = ldg_f32(x + off);
        if constexpr (kBackward) d[0] = ldg_f32(dy + off);
      }
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        if constexpr (kBackward) {
          st[j].a += d[j];
          st[j].b += d[j] * (v[j] - center[j]);
        } else {
          st[j].add_counted(v[j] - center[j], count, inverse);
        }
      }
    }
  }
  // Merge over threadIdx.y one channel of the vector at a time, in a fixed tree.
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll 1
  for (int j = 0; j < kVec; ++j) {
    shared[tid] = st[j];
    __syncthreads();
    for (int stride = blockDim.y / 2; stride > 0; stride /= 2) {
      if (int(threadIdx.y) < stride) shared[tid].merge(shared[tid + stride * blockDim.x]);
      __syncthreads();
    }
    if (threadIdx.y == 0 && active) {
      const State& t = shared[threadIdx.x];
      float* out = partial + (s * g.planes() + image * g.c + c0 + j) * (kBackward ? 2 : 4);
      if constexpr (kBackward) {
        out[0] = t.a, out[1] = t.b;
      } else {
        out[0] = t.n, out[1] = center[j], out[2] = t.mean, out[3] = t.m2;
      }
    }
    __syncthreads();
  }
}

// ---- (2) per statistic / per channel ------------------------------------------------------------

/// One block per statistic: merges its planes' partials in double, writes saved_mean/saved_invstd,
/// the mean's f32 rounding error into mean_lo, and, with running statistics given, updates them.
__global__ void stat_finalize(PlaneGeometry g, const float* __restrict__ partial, float epsilon,
                              float* __restrict__ saved_mean, float* __restrict__ saved_invstd,
                              float* __restrict__ running_mean, float* __restrict__ running_var,
                              float momentum, float* __restrict__ mean_lo) {
  __shared__ Welford<double> shared[kNormThreads];
  const std::int64_t stat = blockIdx.x;
  const std::int64_t items = planes_per_stat(g) * g.splits;
  Welford<double> w{};
  for (std::int64_t i = threadIdx.x; i < items; i += kNormThreads) {
    const std::int64_t plane = plane_of_stat(g, stat, i / g.splits), s = i % g.splits;
    const float* in = partial + (s * g.planes() + plane) * 4;
    Welford<double> o{};
    o.n = in[0], o.mean = double(in[1]) + double(in[2]), o.m2 = in[3];
    w.merge(o);
  }
  shared[threadIdx.x] = w;
  tree_merge(shared);
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
/// blocks [c, c + stats): a statistic's sum of g = dy*scale and of g*xhat, into `stat_sums`.
__global__ void grad_finalize(PlaneGeometry g, const float* __restrict__ partial,
                              const float* __restrict__ scale, const float* __restrict__ saved_invstd,
                              float* __restrict__ dscale, float* __restrict__ dshift,
                              float* __restrict__ stat_sums) {
  __shared__ Sum2<double> shared[kNormThreads];
  const bool channel_block = blockIdx.x < g.c;
  const std::int64_t id = channel_block ? std::int64_t(blockIdx.x) : std::int64_t(blockIdx.x) - g.c;
  const std::int64_t items = (channel_block ? g.n : planes_per_stat(g)) * g.splits;
  Sum2<double> acc{};
  for (std::int64_t i = threadIdx.x; i < items; i += kNormThreads) {
    const std::int64_t s = i % g.splits;
    const std::int64_t plane = channel_block ? (i / g.splits) * g.c + id : plane_of_stat(g, id, i / g.splits);
    const std::int64_t ch = plane % g.c;
    const float* in = partial + (s * g.planes() + plane) * 2;
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
  tree_merge(shared);
  if (threadIdx.x != 0) return;
  if (channel_block) {
    dscale[id] = float(shared[0].a);
    dshift[id] = float(shared[0].b);
  } else {
    stat_sums[2 * id] = float(shared[0].a);
    stat_sums[2 * id + 1] = float(shared[0].b);
  }
}

// ---- (3) per-plane coefficients ------------------------------------------------------------------

/// Forward: y = ka*((x - km) - kl) + kc: the centre first, so a large mean does not cancel, and kl
/// the mean's f32 rounding error (mean_lo, null for inference's running mean). With `running_var` given
/// (inference) the statistic of channel c is the running one, else saved_mean/saved_invstd.
__global__ void coef_forward(PlaneGeometry g, const float* __restrict__ mean,
                             const float* __restrict__ invstd, const float* __restrict__ running_var,
                             float epsilon, const float* __restrict__ scale, const float* __restrict__ shift,
                             const float* __restrict__ mean_lo, float* __restrict__ ka,
                             float* __restrict__ km, float* __restrict__ kl, float* __restrict__ kc) {
  for (std::int64_t p = grid_stride_start(); p < g.planes(); p += grid_stride_step()) {
    const std::int64_t ch = p % g.c, st = stat_of(g, p / g.c, ch);
    const float r = running_var != nullptr ? 1.0f / sqrtf(running_var[ch] + epsilon) : invstd[st];
    const float k = r * scale[ch];
    ka[p] = k;
    km[p] = mean[st];
    kl[p] = mean_lo != nullptr ? mean_lo[st] : 0.f;
    kc[p] = shift[ch];
  }
}

/// Backward: dx = ka*dy + kb*(x - km) + kc, i.e. r*(scale*dy - sum_g/M - xhat*sum_gxhat/M).
__global__ void coef_backward(PlaneGeometry g, const float* __restrict__ saved_mean,
                              const float* __restrict__ saved_invstd, const float* __restrict__ scale,
                              const float* __restrict__ stat_sums, float* __restrict__ ka,
                              float* __restrict__ kb, float* __restrict__ km, float* __restrict__ kc) {
  const double m = double(g.count());
  for (std::int64_t p = grid_stride_start(); p < g.planes(); p += grid_stride_step()) {
    const std::int64_t ch = p % g.c, st = stat_of(g, p / g.c, ch);
    const double r = saved_invstd[st], mu = saved_mean[st];
    const double b = -r * r * stat_sums[2 * st + 1] / m;
    ka[p] = float(r * scale[ch]);
    kb[p] = float(b);
    km[p] = float(mu);
    kc[p] = float(-r * stat_sums[2 * st] / m);
  }
}

// ---- (4) the elementwise pass ---------------------------------------------------------------------

/// out = ka[p]*((u - km[p]) - kl[p]) + kc[p], or with kTwo ka[p]*u + kb[p]*(v - km[p]) + kc[p]; kVec elements
/// a step.
template <typename T, int kVec, bool kNhwc, bool kTwo>
__global__ void plane_apply(PlaneGeometry g, const T* __restrict__ u, const T* __restrict__ v,
                            const float* __restrict__ ka, const float* __restrict__ kb,
                            const float* __restrict__ km, const float* __restrict__ kl,
                            const float* __restrict__ kc, T* __restrict__ out) {
  const std::int64_t vectors = g.planes() * g.hw / kVec;
  for (std::int64_t i = grid_stride_start(); i < vectors; i += grid_stride_step()) {
    const std::int64_t e = i * kVec;
    float a[kVec], b[kVec], m[kVec], l[kVec], c[kVec], uu[kVec], vv[kVec];
    if constexpr (kNhwc) {
      const std::int64_t ch = e % g.c, p0 = (e / (g.hw * g.c)) * g.c + ch;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        a[j] = ka[p0 + j], m[j] = km[p0 + j], c[j] = kc[p0 + j];
        l[j] = kTwo ? 0.f : kl[p0 + j];
        b[j] = kTwo ? kb[p0 + j] : 0.f;
      }
    } else {
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

// ---- host side ----------------------------------------------------------------------------------

bool vectorised(const PlaneGeometry& g) { return g.nhwc ? g.c % 8 == 0 : g.hw % 8 == 0; }
/// The elementwise pass reads 8-vectors of the flat tensor: in nchw they may cross one plane
/// boundary (hw >= 8), so only the total must be a multiple of 8.
bool apply_vectorised(const PlaneGeometry& g) {
  return g.nhwc ? g.c % 8 == 0 : g.hw % 8 == 0 || (g.hw >= 8 && (g.planes() * g.hw) % 8 == 0);
}

/// NHWC block shape: threadIdx.x over channel vectors (a power of two up to 32), the rest pixels.
dim3 nhwc_block(const PlaneGeometry& g) {
  const std::int64_t vectors = vectorised(g) ? g.c / 8 : g.c;
  int tx = 1;
  while (tx < 32 && tx < vectors) tx *= 2;
  return dim3(unsigned(tx), unsigned(kNormThreads / tx));
}

struct Workspace {
  float* partial;
  float* stat_sums;
  float* ka;
  float* kb;
  float* km;
  float* kl;
  float* kc;
};

Workspace carve(const PlaneGeometry& g, void* base) {
  auto* f = static_cast<float*>(base);
  Workspace w{};
  w.partial = f;
  f += g.splits * g.planes() * 4;
  w.stat_sums = f;
  f += 2 * g.stats();
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
    const dim3 block = nhwc_block(g);
    const std::int64_t vectors = vectorised(g) ? g.c / 8 : g.c;
    const dim3 grid(unsigned((vectors + block.x - 1) / block.x), unsigned(g.n), unsigned(g.splits));
    if (vectorised(g)) {
      plane_partial_nhwc<T, 8, kBackward><<<grid, block, 0, s>>>(g, x, dy, saved_mean, partial);
    } else {
      plane_partial_nhwc<T, 1, kBackward><<<grid, block, 0, s>>>(g, x, dy, saved_mean, partial);
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

template <typename T, bool kTwo>
void launch_apply(const PlaneGeometry& g, const T* u, const T* v, const Workspace& w, T* out, GpuStream s) {
  const bool vec = apply_vectorised(g);
  const std::int64_t vectors = g.planes() * g.hw / (vec ? 8 : 1);
  const unsigned grid = grid_for(vectors, kNormThreads);
  if (vec) {
    auto kernel = g.nhwc ? plane_apply<T, 8, true, kTwo> : plane_apply<T, 8, false, kTwo>;
    kernel<<<grid, kNormThreads, 0, s>>>(g, u, v, w.ka, w.kb, w.km, w.kl, w.kc, out);
  } else {
    auto kernel = g.nhwc ? plane_apply<T, 1, true, kTwo> : plane_apply<T, 1, false, kTwo>;
    kernel<<<grid, kNormThreads, 0, s>>>(g, u, v, w.ka, w.kb, w.km, w.kl, w.kc, out);
  }
}

}  // namespace

PlaneGeometry plane_geometry(std::int64_t n, std::int64_t c, std::int64_t hw, std::int64_t groups, bool nhwc,
                             DType dtype) {
  PlaneGeometry g{n, c, hw, groups, nhwc, dtype, 1, hw};
  // Blocks without splitting: a plane each (nchw), or a tile of 256 channels (at most) per image (nhwc).
  const std::int64_t base = nhwc ? n * ((c + 255) / 256) : n * c;
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
  if (g.nhwc && g.n > 65535) return "batch n > 65535 (the grid's y dimension) in nhwc";
  if (g.planes() > 0x7fffffffLL || g.c + g.stats() > 0x7fffffffLL) return "more than 2^31 - 1 planes";
  return nullptr;
}

std::size_t plane_workspace_bytes(const PlaneGeometry& g) {
  return std::size_t(g.splits * g.planes() * 4 + 2 * g.stats() + 5 * g.planes()) * sizeof(float);
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
    stat_finalize<<<unsigned(g.stats()), kNormThreads, 0, s>>>(
        g, w.partial, float(epsilon), saved_mean, saved_invstd,
        update_running ? static_cast<float*>(a.running_mean) : nullptr,
        update_running ? static_cast<float*>(a.running_var) : nullptr, float(momentum), w.stat_sums);
    coef_forward<<<grid_for(g.planes(), kNormThreads), kNormThreads, 0, s>>>(
        g, saved_mean, saved_invstd, nullptr, 0.f, static_cast<const float*>(a.scale),
        static_cast<const float*>(a.shift), w.stat_sums, w.ka, w.km, w.kl, w.kc);
    launch_apply<T, false>(g, x, nullptr, w, static_cast<T*>(a.y), s);
  });
  check_launch(what);
}

void launch_plane_forward_inference(const PlaneGeometry& g, const dnn::NormArgs& a, double epsilon,
                                    void* stream, const char* what) {
  const GpuStream s = as_stream(stream);
  const Workspace w = carve(g, a.workspace);
  dispatch_dtype(g.dtype, what, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    coef_forward<<<grid_for(g.planes(), kNormThreads), kNormThreads, 0, s>>>(
        g, static_cast<const float*>(a.running_mean), nullptr, static_cast<const float*>(a.running_var),
        float(epsilon), static_cast<const float*>(a.scale), static_cast<const float*>(a.shift), nullptr, w.ka,
        w.km, w.kl, w.kc);
    launch_apply<T, false>(g, static_cast<const T*>(a.x), nullptr, w, static_cast<T*>(a.y), s);
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
    grad_finalize<<<unsigned(g.c + g.stats()), kNormThreads, 0, s>>>(
        g, w.partial, scale, saved_invstd, static_cast<float*>(a.dscale), static_cast<float*>(a.dshift),
        w.stat_sums);
    coef_backward<<<grid_for(g.planes(), kNormThreads), kNormThreads, 0, s>>>(
        g, saved_mean, saved_invstd, scale, w.stat_sums, w.ka, w.kb, w.km, w.kc);
    launch_apply<T, true>(g, dy, x, w, static_cast<T*>(a.dx), s);
  });
  check_launch(what);
}

}  // namespace galley::backends::gpu
