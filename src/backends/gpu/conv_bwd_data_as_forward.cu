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

// The nchw phase filter (view layout (c, k, r', s'), k of c's group) from w's (k, c, r, s), c of
// k's group: view tap t is the phase's tap taps - 1 - t. With every tap in one phase (first 0,
// stride 1) it is the unit-stride view's flipped filter. kg and cg are the channels per group out
// and in (K and C with one group).
template <typename T>
__global__ void phase_filter_nchw_kernel(const T* __restrict__ w, T* __restrict__ sub, int kg, int cg, int R,
                                         int S, int taps_h, int first_h, int taps_w, int first_w,
                                         int stride_h, int stride_w, int total) {
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
    int t = idx;
    const int tw = t % taps_w;
    t /= taps_w;
    const int th = t % taps_h;
    t /= taps_h;
    const int kk = t % kg, c = t / kg;  // the view's c runs over all C channels
    const int g = c / cg, cc = c % cg;
    const int r = first_h + (taps_h - 1 - th) * stride_h, s = first_w + (taps_w - 1 - tw) * stride_w;
    sub[idx] = w[(((g * kg + kk) * cg + cc) * R + r) * S + s];
  }
}

// The nhwc phase filter (view layout (c, r', s', k), k of c's group) as one kg x cg -> cg x kg transpose per
// view tap and group through a shared tile, so both w's reads (c contiguous) and the view's writes (k
// contiguous) are coalesced; a thread per element would read w a whole filter row apart per neighbouring
// thread. blockIdx.z is group * taps + tap.
constexpr int kFlipTile = 32;
constexpr int kFlipRows = 8;

template <typename T>
__global__ void phase_filter_nhwc_tiled_kernel(const T* __restrict__ w, T* __restrict__ sub, int kg, int cg,
                                               int R, int S, int taps_h, int first_h, int taps_w, int first_w,
                                               int stride_h, int stride_w) {
  __shared__ T tile[kFlipTile][kFlipTile + 1];
  const int taps = taps_h * taps_w;
  const int g = blockIdx.z / taps, tap = blockIdx.z % taps, th = tap / taps_w, tw = tap % taps_w;
  const int r = first_h + (taps_h - 1 - th) * stride_h, s = first_w + (taps_w - 1 - tw) * stride_w;
  const int c0 = blockIdx.x * kFlipTile, k0 = blockIdx.y * kFlipTile;
  const std::int64_t src_row = std::int64_t(R) * S * cg, dst_row = std::int64_t(taps) * kg;
  const T* src = w + std::int64_t(g) * kg * src_row + (std::int64_t(r) * S + s) * cg;
  for (int i = threadIdx.y; i < kFlipTile; i += kFlipRows) {
    const int k = k0 + i, c = c0 + threadIdx.x;
    if (k < kg && c < cg) tile[i][threadIdx.x] = src[k * src_row + c];
  }
  __syncthreads();
  T* dst = sub + std::int64_t(g) * cg * dst_row + std::int64_t(tap) * kg;
  for (int i = threadIdx.y; i < kFlipTile; i += kFlipRows) {
    const int c = c0 + i, k = k0 + threadIdx.x;
    if (k < kg && c < cg) dst[c * dst_row + k] = tile[threadIdx.x][i];
  }
}

// dx's pixels (n, ah + sh * i, aw + sw * j, c) from the view's output (n, i + off_h, j + off_w, c);
// zero without one.
template <typename T, bool kNhwc>
__global__ void phase_scatter_kernel(const T* __restrict__ view_out, T* __restrict__ dx, int C, int H, int W,
                                     int ah, int aw, int sh, int sw, int rows, int cols, int vh, int vw,
                                     int off_h, int off_w, int total) {
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
    int n, c, i, j, t = idx;
    if (kNhwc) {
      c = t % C, t /= C;
      j = t % cols, t /= cols;
      i = t % rows, n = t / rows;
    } else {
      j = t % cols, t /= cols;
      i = t % rows, t /= rows;
      c = t % C, n = t / C;
    }
    const int y = ah + sh * i, x = aw + sw * j;
    T v = from_f32<T>(0.f);
    if (view_out != nullptr) {
      const int vy = i + off_h, vx = j + off_w;
      v = view_out[kNhwc ? ((std::int64_t(n) * vh + vy) * vw + vx) * C + c
                         : ((std::int64_t(n) * C + c) * vh + vy) * vw + vx];
    }
    dx[kNhwc ? ((std::int64_t(n) * H + y) * W + x) * C + c : ((std::int64_t(n) * C + c) * H + y) * W + x] = v;
  }
}

// phase_scatter_kernel for nhwc with whole 16-byte chunks of channels: one block per phase row
// (n, i), which is dx row ah + sh * i; its pixels aw + sw * j take the view's row i + off_h,
// column j + off_w (zeros without a view).
__global__ void phase_scatter_rows_kernel(const uint4* __restrict__ view_out, uint4* __restrict__ dx,
                                          int chunks, int H, int W, int ah, int aw, int sh, int sw, int rows,
                                          int cols, int vh, int vw, int off_h, int off_w) {
  const int b = blockIdx.x, n = b / rows, i = b - n * rows;
  uint4* out = dx + ((std::int64_t(n) * H + ah + sh * i) * W + aw) * chunks;
  const uint4* src =
      view_out != nullptr ? view_out + ((std::int64_t(n) * vh + i + off_h) * vw + off_w) * chunks : nullptr;
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

void launch_phase_filter(const ConvParams& p, const StridePhaseAxis& h, const StridePhaseAxis& w,
                         const void* filter, void* sub, void* stream) {
  dispatch_dtype(p.dtype, "backward-data phase filter", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (p.nhwc) {
      const dim3 grid((p.cg + kFlipTile - 1) / kFlipTile, (p.kg + kFlipTile - 1) / kFlipTile,
                      h.taps * w.taps * p.groups);
      phase_filter_nhwc_tiled_kernel<T><<<grid, dim3(kFlipTile, kFlipRows), 0, as_stream(stream)>>>(
          static_cast<const T*>(filter), static_cast<T*>(sub), p.kg, p.cg, p.r, p.s, h.taps, h.first_tap,
          w.taps, w.first_tap, p.stride_h, p.stride_w);
      return;
    }
    const int total = p.kg * p.c * h.taps * w.taps;
    phase_filter_nchw_kernel<T><<<grid_for(total), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(filter), static_cast<T*>(sub), p.kg, p.cg, p.r, p.s, h.taps, h.first_tap,
        w.taps, w.first_tap, p.stride_h, p.stride_w, total);
  });
  check_launch("backward-data phase filter");
}

void launch_phase_scatter(const ConvParams& p, int ah, int aw, const StridePhaseAxis& h,
                          const StridePhaseAxis& w, const void* view_out, void* dx, void* stream) {
  const std::int64_t total = std::int64_t(p.n) * p.c * h.rows * w.rows;
  if (total == 0) return;
  dispatch_dtype(p.dtype, "backward-data phase scatter", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (rows_of_chunks(p, sizeof(T), view_out == nullptr ? dx : view_out, dx)) {
      const int chunks = int(std::size_t(p.c) * sizeof(T) / 16);
      phase_scatter_rows_kernel<<<unsigned(p.n) * unsigned(h.rows), kThreads, 0, as_stream(stream)>>>(
          static_cast<const uint4*>(view_out), static_cast<uint4*>(dx), chunks, p.h, p.w, ah, aw, p.stride_h,
          p.stride_w, h.rows, w.rows, h.view, w.view, h.off, w.off);
      return;
    }
    auto kernel = p.nhwc ? phase_scatter_kernel<T, true> : phase_scatter_kernel<T, false>;
    kernel<<<grid_for(total), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(view_out), static_cast<T*>(dx), p.c, p.h, p.w, ah, aw, p.stride_h, p.stride_w,
        h.rows, w.rows, h.view, w.view, h.off, w.off, int(total));
  });
  check_launch("backward-data phase scatter");
}

void launch_flip_filter(const ConvParams& p, const void* w, void* flipped, void* stream) {
  // Every tap reversed: the phase filter of one phase holding all of them.
  StridePhaseAxis h, x;
  h.taps = p.r, x.taps = p.s;
  ConvParams unit = p;
  unit.stride_h = unit.stride_w = 1;
  launch_phase_filter(unit, h, x, w, flipped, stream);
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
