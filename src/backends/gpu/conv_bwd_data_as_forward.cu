// The kernels that let a forward convolution solver compute backward-data (conv_bwd_solvers.cu's
// BwdDataAsForward): with unit stride, dx[h] = sum_r dy[h + pad - r * dil] * w[r] is a forward
// convolution of dy with the filter flipped in both spatial axes and its k and c swapped within each
// group, padded by (r - 1) * dil - pad, whose output is H x W again. A 1x1 filter with a stride and no
// padding touches only the dx pixels on the stride's grid: there dx is a forward 1x1 convolution of dy
// (written compact into the workspace), everywhere else zero. Any other stride (dilation 1) splits dx into
// its stride phases, the pixels (a_h + stride_h * i, a_w + stride_w * j), each seeing only the taps congruent
// to it: a phase is a unit-stride forward convolution of dy with those taps (reversed, k and c
// swapped), written compact and scattered onto its pixels (stride_phase_axis() works out the view).
#include <algorithm>
#include <cstdint>

#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(std::int64_t total) {
  return unsigned(std::min<std::int64_t>((total + kThreads - 1) / kThreads, 65535LL * 8));
}

// dx from the compact product on the stride grid (n, p, q, c) or (n, c, p, q); zero off the grid.
template <typename T, bool kNhwc>
__global__ void scatter_stride_grid_kernel(const T* __restrict__ compact, T* __restrict__ dx, int C, int H,
                                           int W, int P, int Q, int stride_h, int stride_w, int total) {
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
    int n, c, y, x, t = idx;
    if (kNhwc) {
      c = t % C, t /= C;
      x = t % W, t /= W;
      y = t % H, n = t / H;
    } else {
      x = t % W, t /= W;
      y = t % H, t /= H;
      c = t % C, n = t / C;
    }
    T v = from_f32<T>(0.f);
    if (y % stride_h == 0 && x % stride_w == 0) {
      const int p = y / stride_h, q = x / stride_w;
      if (p < P && q < Q) v = compact[kNhwc ? ((n * P + p) * Q + q) * C + c : ((n * C + c) * P + p) * Q + q];
    }
    dx[idx] = v;
  }
}

// nhwc with a pixel's channels a whole number of 16-byte chunks: one block per dx row (n, y), its
// W x C elements as 16-byte chunks, one division per chunk; rows off the grid are all zeros. The
// per-element kernel above divides four times per element and moves 2 bytes a thread, several
// times slower than the copy it is.
__global__ void scatter_stride_grid_rows_kernel(const uint4* __restrict__ compact, uint4* __restrict__ dx,
                                                int chunks, int H, int W, int P, int Q, int stride_h,
                                                int stride_w) {
  const int row = blockIdx.x, n = row / H, y = row - n * H;
  const bool on_grid = y % stride_h == 0 && y / stride_h < P;
  const uint4* src = on_grid ? compact + (std::int64_t(n) * P + y / stride_h) * Q * chunks : nullptr;
  uint4* out = dx + std::int64_t(row) * W * chunks;
  const int total = W * chunks;
  for (int t = threadIdx.x; t < total; t += blockDim.x) {
    uint4 v = make_uint4(0, 0, 0, 0);
    if (on_grid) {
      const int x = t / chunks, c = t - x * chunks;
      if (x % stride_w == 0 && x / stride_w < Q) v = src[(x / stride_w) * chunks + c];
    }
    out[t] = v;
  }
}

// The launches over several stride phases: phase i's part of the launch (its blocks, or its
// elements) starts at begin[i]; the phase of a block or element is found by a scan of at most
// kMaxStridePhases entries.
struct FilterTable {
  int count = 0;
  int begin[kMaxStridePhases + 1] = {};
  int taps_h[kMaxStridePhases] = {}, first_h[kMaxStridePhases] = {};
  int taps_w[kMaxStridePhases] = {}, first_w[kMaxStridePhases] = {};
  void* sub[kMaxStridePhases] = {};
};
struct ScatterTable {
  int count = 0;
  int begin[kMaxStridePhases + 1] = {};
  int ah[kMaxStridePhases] = {}, aw[kMaxStridePhases] = {};
  int rows[kMaxStridePhases] = {}, cols[kMaxStridePhases] = {};
  int vh[kMaxStridePhases] = {}, vw[kMaxStridePhases] = {};
  int off_h[kMaxStridePhases] = {}, off_w[kMaxStridePhases] = {};
  const void* out[kMaxStridePhases] = {};
};

__device__ __forceinline__ int phase_at(const int* begin, int count, int at) {
  int ph = 0;
  while (ph + 1 < count && at >= begin[ph + 1]) ++ph;
  return ph;
}

// The nchw phase filters (view layout (c, k, r', s'), k of c's group) from w's (k, c, r, s), c of
// k's group: view tap t is the phase's tap taps - 1 - t. With every tap in one phase (first 0,
// stride 1) it is the unit-stride view's flipped filter. kg and cg are the channels per group out
// and in (K and C with one group).
template <typename T>
__global__ void phase_filter_nchw_kernel(const T* __restrict__ w, FilterTable tab, int kg, int cg, int R,
                                         int S, int stride_h, int stride_w) {
  const int total = tab.begin[tab.count];
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
    const int ph = phase_at(tab.begin, tab.count, idx);
    const int taps_h = tab.taps_h[ph], taps_w = tab.taps_w[ph];
    const int local = idx - tab.begin[ph];
    int t = local;
    const int tw = t % taps_w;
    t /= taps_w;
    const int th = t % taps_h;
    t /= taps_h;
    const int kk = t % kg, c = t / kg;  // the view's c runs over all C channels
    const int g = c / cg, cc = c % cg;
    const int r = tab.first_h[ph] + (taps_h - 1 - th) * stride_h;
    const int s = tab.first_w[ph] + (taps_w - 1 - tw) * stride_w;
    static_cast<T*>(tab.sub[ph])[local] = w[(((g * kg + kk) * cg + cc) * R + r) * S + s];
  }
}

// The nhwc phase filters (view layout (c, r', s', k), k of c's group) as one kg x cg -> cg x kg
// transpose per view tap and group through a shared tile, so both w's reads (c contiguous) and the
// view's writes (k contiguous) are coalesced; a thread per element would read w a whole filter row
// apart per neighbouring thread. blockIdx.z is the phase's begin + group * taps + tap.
constexpr int kFlipTile = 32;
constexpr int kFlipRows = 8;

template <typename T>
__global__ void phase_filter_nhwc_tiled_kernel(const T* __restrict__ w, FilterTable tab, int kg, int cg,
                                               int R, int S, int stride_h, int stride_w) {
  __shared__ T tile[kFlipTile][kFlipTile + 1];
  const int ph = phase_at(tab.begin, tab.count, int(blockIdx.z));
  const int taps_h = tab.taps_h[ph], taps_w = tab.taps_w[ph], taps = taps_h * taps_w;
  const int z = int(blockIdx.z) - tab.begin[ph];
  const int g = z / taps, tap = z % taps, th = tap / taps_w, tw = tap % taps_w;
  const int r = tab.first_h[ph] + (taps_h - 1 - th) * stride_h;
  const int s = tab.first_w[ph] + (taps_w - 1 - tw) * stride_w;
  const int c0 = blockIdx.x * kFlipTile, k0 = blockIdx.y * kFlipTile;
  const std::int64_t src_row = std::int64_t(R) * S * cg, dst_row = std::int64_t(taps) * kg;
  const T* src = w + std::int64_t(g) * kg * src_row + (std::int64_t(r) * S + s) * cg;
  for (int i = threadIdx.y; i < kFlipTile; i += kFlipRows) {
    const int k = k0 + i, c = c0 + threadIdx.x;
    if (k < kg && c < cg) tile[i][threadIdx.x] = src[k * src_row + c];
  }
  __syncthreads();
  T* dst = static_cast<T*>(tab.sub[ph]) + std::int64_t(g) * cg * dst_row + std::int64_t(tap) * kg;
  for (int i = threadIdx.y; i < kFlipTile; i += kFlipRows) {
    const int c = c0 + i, k = k0 + threadIdx.x;
    if (k < kg && c < cg) dst[c * dst_row + k] = tile[threadIdx.x][i];
  }
}

// dx's pixels (n, ah + sh * i, aw + sw * j, c) of each phase from its view's output
// (n, i + off_h, j + off_w, c); zero without one.
template <typename T, bool kNhwc>
__global__ void phase_scatter_kernel(ScatterTable tab, T* __restrict__ dx, int C, int H, int W, int sh,
                                     int sw) {
  const int total = tab.begin[tab.count];
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
    const int ph = phase_at(tab.begin, tab.count, idx);
    const int rows = tab.rows[ph], cols = tab.cols[ph];
    int n, c, i, j, t = idx - tab.begin[ph];
    if (kNhwc) {
      c = t % C, t /= C;
      j = t % cols, t /= cols;
      i = t % rows, n = t / rows;
    } else {
      j = t % cols, t /= cols;
      i = t % rows, t /= rows;
      c = t % C, n = t / C;
    }
    const int y = tab.ah[ph] + sh * i, x = tab.aw[ph] + sw * j;
    T v = from_f32<T>(0.f);
    if (const T* view_out = static_cast<const T*>(tab.out[ph]); view_out != nullptr) {
      const int vh = tab.vh[ph], vw = tab.vw[ph];
      const int vy = i + tab.off_h[ph], vx = j + tab.off_w[ph];
      v = view_out[kNhwc ? ((std::int64_t(n) * vh + vy) * vw + vx) * C + c
                         : ((std::int64_t(n) * C + c) * vh + vy) * vw + vx];
    }
    dx[kNhwc ? ((std::int64_t(n) * H + y) * W + x) * C + c : ((std::int64_t(n) * C + c) * H + y) * W + x] = v;
  }
}

// phase_scatter_kernel for nhwc with whole 16-byte chunks of channels: one block per phase row
// (n, i), which is dx row ah + sh * i; its pixels aw + sw * j take the view's row i + off_h,
// column j + off_w (zeros without a view).
__global__ void phase_scatter_rows_kernel(ScatterTable tab, uint4* __restrict__ dx, int chunks, int H, int W,
                                          int sh, int sw) {
  const int ph = phase_at(tab.begin, tab.count, int(blockIdx.x));
  const int rows = tab.rows[ph], cols = tab.cols[ph];
  const int b = int(blockIdx.x) - tab.begin[ph], n = b / rows, i = b - n * rows;
  uint4* out = dx + ((std::int64_t(n) * H + tab.ah[ph] + sh * i) * W + tab.aw[ph]) * chunks;
  const uint4* view_out = static_cast<const uint4*>(tab.out[ph]);
  const uint4* src =
      view_out != nullptr
          ? view_out +
                ((std::int64_t(n) * tab.vh[ph] + i + tab.off_h[ph]) * tab.vw[ph] + tab.off_w[ph]) * chunks
          : nullptr;
  const int total = cols * chunks;
  for (int t = threadIdx.x; t < total; t += blockDim.x) {
    const int j = t / chunks, c = t - j * chunks;
    out[std::int64_t(sw) * j * chunks + c] = src != nullptr ? src[t] : make_uint4(0, 0, 0, 0);
  }
}

// Whether the nhwc row kernels can move p's pixels: channels a whole number of 16-byte chunks and
// both tensors 16-byte aligned.
bool rows_of_chunks(const ConvParams& p, std::size_t element_bytes, const void* a, const void* b) {
  return p.nhwc && (std::size_t(p.c) * element_bytes) % 16 == 0 &&
         ((reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b)) & 15) == 0;
}

}  // namespace

StridePhaseAxis stride_phase_axis(int a, int stride, int pad, int filter, int in, int out) {
  StridePhaseAxis x;
  x.first_tap = (a + pad) % stride;
  x.taps = x.first_tap < filter ? (filter - x.first_tap + stride - 1) / stride : 0;
  x.rows = a < in ? (in - a + stride - 1) / stride : 0;
  if (x.taps == 0) return x;
  // Row i of the phase reads dy rows i + base - j for its taps j.
  const int base = (a + pad - x.first_tap) / stride;
  x.pad = std::max(0, std::max(x.taps - 1 - base, base + x.rows - out));
  x.off = x.pad + base - x.taps + 1;
  x.view = out + 2 * x.pad - x.taps + 1;
  return x;
}

void launch_phase_filters(const ConvParams& p, const void* w, const StridePhaseSet& set, void* stream) {
  if (set.count > kMaxStridePhases)
    throw Error(Status::invalid_argument, "backward-data phase filters: " + std::to_string(set.count) +
                                              " phases, at most " + std::to_string(kMaxStridePhases));
  FilterTable tab;
  int at = 0;
  for (int i = 0; i < set.count; ++i) {
    const StridePhaseSet::Phase& ph = set.phase[i];
    if (ph.filter == nullptr || ph.h.taps == 0 || ph.w.taps == 0) continue;
    const int n = tab.count++;
    tab.begin[n] = at;
    tab.taps_h[n] = ph.h.taps, tab.first_h[n] = ph.h.first_tap;
    tab.taps_w[n] = ph.w.taps, tab.first_w[n] = ph.w.first_tap;
    tab.sub[n] = ph.filter;
    const int taps = ph.h.taps * ph.w.taps;
    at += p.nhwc ? taps * p.groups : p.kg * p.c * taps;  // blocks in grid.z, or elements
  }
  tab.begin[tab.count] = at;
  if (tab.count == 0) return;
  dispatch_dtype(p.dtype, "backward-data phase filter", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (p.nhwc) {
      const dim3 grid((p.cg + kFlipTile - 1) / kFlipTile, (p.kg + kFlipTile - 1) / kFlipTile, unsigned(at));
      phase_filter_nhwc_tiled_kernel<T><<<grid, dim3(kFlipTile, kFlipRows), 0, as_stream(stream)>>>(
          static_cast<const T*>(w), tab, p.kg, p.cg, p.r, p.s, p.stride_h, p.stride_w);
      return;
    }
    phase_filter_nchw_kernel<T><<<grid_for(at), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(w), tab, p.kg, p.cg, p.r, p.s, p.stride_h, p.stride_w);
  });
  check_launch("backward-data phase filter");
}

void launch_phase_scatters(const ConvParams& p, const StridePhaseSet& set, void* dx, void* stream) {
  if (set.count > kMaxStridePhases)
    throw Error(Status::invalid_argument, "backward-data phase scatter: " + std::to_string(set.count) +
                                              " phases, at most " + std::to_string(kMaxStridePhases));
  dispatch_dtype(p.dtype, "backward-data phase scatter", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    bool rows = rows_of_chunks(p, sizeof(T), dx, dx);
    for (int i = 0; i < set.count; ++i)
      if (set.phase[i].out != nullptr) rows = rows && rows_of_chunks(p, sizeof(T), set.phase[i].out, dx);
    ScatterTable tab;
    std::int64_t at = 0;
    for (int i = 0; i < set.count; ++i) {
      const StridePhaseSet::Phase& ph = set.phase[i];
      if (ph.h.rows == 0 || ph.w.rows == 0 || p.n == 0) continue;
      const int n = tab.count++;
      tab.begin[n] = int(at);
      tab.ah[n] = ph.ah, tab.aw[n] = ph.aw;
      tab.rows[n] = ph.h.rows, tab.cols[n] = ph.w.rows;
      tab.vh[n] = ph.h.view, tab.vw[n] = ph.w.view;
      tab.off_h[n] = ph.h.off, tab.off_w[n] = ph.w.off;
      tab.out[n] = ph.out;
      at += rows ? std::int64_t(p.n) * ph.h.rows : std::int64_t(p.n) * p.c * ph.h.rows * ph.w.rows;
    }
    tab.begin[tab.count] = int(at);
    if (tab.count == 0) return;
    if (rows) {
      const int chunks = int(std::size_t(p.c) * sizeof(T) / 16);
      phase_scatter_rows_kernel<<<unsigned(at), kThreads, 0, as_stream(stream)>>>(
          tab, static_cast<uint4*>(dx), chunks, p.h, p.w, p.stride_h, p.stride_w);
      return;
    }
    auto kernel = p.nhwc ? phase_scatter_kernel<T, true> : phase_scatter_kernel<T, false>;
    kernel<<<grid_for(at), kThreads, 0, as_stream(stream)>>>(tab, static_cast<T*>(dx), p.c, p.h, p.w,
                                                             p.stride_h, p.stride_w);
  });
  check_launch("backward-data phase scatter");
}

void launch_flip_filter(const ConvParams& p, const void* w, void* flipped, void* stream) {
  // Every tap reversed: the phase filter of one phase holding all of them.
  StridePhaseSet set;
  set.count = 1;
  set.phase[0].h.taps = p.r, set.phase[0].w.taps = p.s;
  set.phase[0].filter = flipped;
  ConvParams unit = p;
  unit.stride_h = unit.stride_w = 1;
  launch_phase_filters(unit, w, set, stream);
}

void launch_scatter_stride_grid(const ConvParams& p, const void* compact, void* dx, void* stream) {
  dispatch_dtype(p.dtype, "backward-data stride-grid scatter", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (rows_of_chunks(p, sizeof(T), compact, dx)) {
      const int chunks = int(std::size_t(p.c) * sizeof(T) / 16);
      scatter_stride_grid_rows_kernel<<<unsigned(p.n) * unsigned(p.h), kThreads, 0, as_stream(stream)>>>(
          static_cast<const uint4*>(compact), static_cast<uint4*>(dx), chunks, p.h, p.w, p.p, p.q, p.stride_h,
          p.stride_w);
      return;
    }
    const int total = int(p.x_elems());
    auto kernel = p.nhwc ? scatter_stride_grid_kernel<T, true> : scatter_stride_grid_kernel<T, false>;
    kernel<<<grid_for(total), kThreads, 0, as_stream(stream)>>>(static_cast<const T*>(compact),
                                                                static_cast<T*>(dx), p.c, p.h, p.w, p.p, p.q,
                                                                p.stride_h, p.stride_w, total);
  });
  check_launch("backward-data stride-grid scatter");
}

}  // namespace galley::backends::gpu
