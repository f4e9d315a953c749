// The single-source pooling kernels. Window bounds follow dnn/pool_geometry.hpp exactly (PyTorch's
// formulas), and the max rule is the problem's: scanning a window row by row, an element takes
// over when it is greater or NaN. Backward is a gather (each input sums what the outputs whose
// windows hold it send it), so there are no atomics and the result is deterministic.
#include <cstdint>
#include <type_traits>

#include "conv_device.cuh"
#include "galley/dnn/pool.hpp"
#include "pool_device.cuh"
#include "pool_kernels.hpp"

namespace galley::backends::gpu {
namespace {

using namespace pool_device;

// The thread's output coordinates and offsets, shared by the forward kernels.
template <int V, bool kNhwc, typename I>
struct OutputAt {
  I n, c, oh, ow, out, base, hs, ws;
  __device__ __forceinline__ OutputAt(I t, I C, I H, I W, I OH, I OW) {
    if (kNhwc) {
      const I cvecs = C / V;
      c = (t % cvecs) * V;
      I r = t / cvecs;
      ow = r % OW;
      r /= OW;
      oh = r % OH;
      n = r / OH;
      out = ((n * OH + oh) * OW + ow) * C + c;
      base = n * H * W * C + c;
      hs = W * C;
      ws = C;
    } else {
      ow = t % OW;
      I r = t / OW;
      oh = r % OH;
      r /= OH;
      c = r % C;
      n = r / C;
      out = t;
      base = (n * C + c) * H * W;
      hs = W;
      ws = 1;
    }
  }
};

template <typename T, int V, bool kNhwc, typename I>
__global__ void pool_forward_kernel(PoolParams p, const T* __restrict__ x, T* __restrict__ y,
                                    std::int32_t* __restrict__ idx, I total) {
  const Axis<I> ah = axis_h<I>(p), aw = axis_w<I>(p);
  const I C = I(p.c), H = I(p.h), W = I(p.w), OH = I(p.oh), OW = I(p.ow);
  for (I t = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); t < total; t += I(gridDim.x) * I(blockDim.x)) {
    const OutputAt<V, kNhwc, I> o(t, C, H, W, OH, OW);
    const I base = o.base, hs = o.hs, ws = o.ws, out = o.out;
    const Span<I> sh = ah.window(o.oh), sw = aw.window(o.ow);
    float acc[V];
    if (p.mode == 0) {
      int at[V];
      const int first = int(sh.begin * W + sw.begin);
#pragma unroll
      for (int l = 0; l < V; ++l) acc[l] = -INFINITY, at[l] = first;
      for (I ih = sh.begin; ih < sh.end; ++ih) {
        for (I iw = sw.begin; iw < sw.end; ++iw) {
          float v[V];
          load_v<T, V>(x + base + ih * hs + iw * ws, v);
          const int pos = int(ih * W + iw);
#pragma unroll
          for (int l = 0; l < V; ++l) {
            if (v[l] > acc[l] || v[l] != v[l]) acc[l] = v[l], at[l] = pos;
          }
        }
      }
      if (y != nullptr) store_v<T, V>(y + out, acc);
      if (idx != nullptr) store_idx<V>(idx + out, at);
    } else {
#pragma unroll
      for (int l = 0; l < V; ++l) acc[l] = 0.f;
      for (I ih = sh.begin; ih < sh.end; ++ih) {
        for (I iw = sw.begin; iw < sw.end; ++iw) {
          float v[V];
          load_v<T, V>(x + base + ih * hs + iw * ws, v);
#pragma unroll
          for (int l = 0; l < V; ++l) acc[l] += v[l];
        }
      }
      const float d = divisor(p.mode, sh, sw);
#pragma unroll
      for (int l = 0; l < V; ++l) acc[l] /= d;
      store_v<T, V>(y + out, acc);
    }
  }
}

// Forward over a K x K window (stride and padding at run time, not adaptive): the window is
// unrolled, so all K * K loads issue before any is used, where the generic kernel's loop waits on
// each in turn. A tap outside the input loads nothing and holds -inf (max: it never takes over,
// as only a greater value or a NaN does) or 0 (average: adding +0 to a sum that started at +0
// changes nothing), and taps are visited row by row as the generic kernel does, so values, max
// indices and divisors are exactly its own. With Idx a byte, idx receives the maximum's tap number
// in the window (r * K + q) rather than its position in the plane: the same choice, a quarter of
// the bytes, for a backward pass that finds the maxima itself.
template <typename T, int V, bool kNhwc, int K, typename I, typename Idx>
__global__ void pool_forward_fixed_kernel(PoolParams p, const T* __restrict__ x, T* __restrict__ y,
                                          Idx* __restrict__ idx, I total) {
  constexpr bool kTaps = std::is_same_v<Idx, std::uint8_t>;
  const Axis<I> ah = axis_h<I>(p), aw = axis_w<I>(p);
  const I C = I(p.c), H = I(p.h), W = I(p.w), OH = I(p.oh), OW = I(p.ow);
  const bool is_max = p.mode == 0;
  for (I t = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); t < total; t += I(gridDim.x) * I(blockDim.x)) {
    const OutputAt<V, kNhwc, I> o(t, C, H, W, OH, OW);
    const Span<I> sh = ah.window(o.oh), sw = aw.window(o.ow);
    const I h0 = o.oh * ah.s - ah.pad, w0 = o.ow * aw.s - aw.pad;
    float v[K][K][V];
#pragma unroll
    for (int r = 0; r < K; ++r) {
#pragma unroll
      for (int q = 0; q < K; ++q) {
        const I ih = h0 + r, iw = w0 + q;
        if (ih >= sh.begin && ih < sh.end && iw >= sw.begin && iw < sw.end) {
          load_v<T, V>(x + o.base + ih * o.hs + iw * o.ws, v[r][q]);
        } else {
#pragma unroll
          for (int l = 0; l < V; ++l) v[r][q][l] = is_max ? -INFINITY : 0.f;
        }
      }
    }
    float acc[V];
    if (is_max) {
      int at[V];
      const int first = kTaps ? int((sh.begin - h0) * K + (sw.begin - w0)) : int(sh.begin * W + sw.begin);
#pragma unroll
      for (int l = 0; l < V; ++l) acc[l] = -INFINITY, at[l] = first;
#pragma unroll
      for (int r = 0; r < K; ++r) {
#pragma unroll
        for (int q = 0; q < K; ++q) {
          const int pos = kTaps ? r * K + q : int((h0 + r) * W + w0 + q);
#pragma unroll
          for (int l = 0; l < V; ++l) {
            if (v[r][q][l] > acc[l] || v[r][q][l] != v[r][q][l]) acc[l] = v[r][q][l], at[l] = pos;
          }
        }
      }
      if (y != nullptr) store_v<T, V>(y + o.out, acc);
      if (idx != nullptr) store_idx<V>(idx + o.out, at);
    } else {
#pragma unroll
      for (int l = 0; l < V; ++l) acc[l] = 0.f;
#pragma unroll
      for (int r = 0; r < K; ++r) {
#pragma unroll
        for (int q = 0; q < K; ++q) {
#pragma unroll
          for (int l = 0; l < V; ++l) acc[l] += v[r][q][l];
        }
      }
      const float d = divisor(p.mode, sh, sw);
#pragma unroll
      for (int l = 0; l < V; ++l) acc[l] /= d;
      store_v<T, V>(y + o.out, acc);
    }
  }
}

// The thread's input coordinates and offset, shared by the backward kernels.
template <int V, bool kNhwc, typename I>
struct InputAt {
  I n, c, ih, iw, off;
  __device__ __forceinline__ InputAt(I t, I C, I H, I W) {
    if (kNhwc) {
      const I cvecs = C / V;
      c = (t % cvecs) * V;
      I r = t / cvecs;
      iw = r % W;
      r /= W;
      ih = r % H;
      n = r / H;
      off = ((n * H + ih) * W + iw) * C + c;
    } else {
      iw = t % W;
      I r = t / W;
      ih = r % H;
      r /= H;
      c = r % C;
      n = r / C;
      off = t;
    }
  }
};

template <typename T, int V, bool kNhwc, bool kMax, typename I>
__global__ void pool_backward_kernel(PoolParams p, const T* __restrict__ dy,
                                     const std::int32_t* __restrict__ idx, T* __restrict__ dx, I total) {
  const Axis<I> ah = axis_h<I>(p), aw = axis_w<I>(p);
  const I C = I(p.c), H = I(p.h), W = I(p.w), OH = I(p.oh), OW = I(p.ow);
  for (I t = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); t < total; t += I(gridDim.x) * I(blockDim.x)) {
    const InputAt<V, kNhwc, I> in(t, C, H, W);
    const I n = in.n, c = in.c, ih = in.ih, iw = in.iw, in_off = in.off;
    I oh0, oh1, ow0, ow1;
    ah.covering(ih, oh0, oh1);
    aw.covering(iw, ow0, ow1);
    const int pos = int(ih * W + iw);
    float acc[V];
#pragma unroll
    for (int l = 0; l < V; ++l) acc[l] = 0.f;
    for (I oh = oh0; oh <= oh1; ++oh) {
      const Span<I> sh = ah.window(oh);
      for (I ow = ow0; ow <= ow1; ++ow) {
        const I o = kNhwc ? ((n * OH + oh) * OW + ow) * C + c : ((n * C + c) * OH + oh) * OW + ow;
        float g[V];
        load_v<T, V>(dy + o, g);
        if (kMax) {
          int at[V];
          load_idx<V>(idx + o, at);
#pragma unroll
          for (int l = 0; l < V; ++l) acc[l] += at[l] == pos ? g[l] : 0.f;
        } else {
          const float d = divisor(p.mode, sh, aw.window(ow));
#pragma unroll
          for (int l = 0; l < V; ++l) acc[l] += g[l] / d;
        }
      }
    }
    store_v<T, V>(dx + in_off, acc);
  }
}

// Backward where each input lies in at most two windows per axis (kernel <= 2 x stride, not
// adaptive; 3x3 at stride 2 among them): the 2 x 2 candidate outputs are unrolled, so their
// gradient and index loads issue together. Outputs past the covering range load nothing and add
// nothing; the others add in the generic kernel's order, so the sums are exactly its own. With Idx
// a byte, idx holds each window's tap number of its maximum (pool_forward_fixed_kernel's).
template <typename T, int V, bool kNhwc, bool kMax, typename I, typename Idx>
__global__ void pool_backward_two_kernel(PoolParams p, const T* __restrict__ dy, const Idx* __restrict__ idx,
                                         T* __restrict__ dx, I total) {
  constexpr bool kTaps = std::is_same_v<Idx, std::uint8_t>;
  const Axis<I> ah = axis_h<I>(p), aw = axis_w<I>(p);
  const I C = I(p.c), H = I(p.h), W = I(p.w), OH = I(p.oh), OW = I(p.ow);
  for (I t = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); t < total; t += I(gridDim.x) * I(blockDim.x)) {
    const InputAt<V, kNhwc, I> in(t, C, H, W);
    const I n = in.n, c = in.c, ih = in.ih, iw = in.iw, in_off = in.off;
    I oh0, oh1, ow0, ow1;
    ah.covering(ih, oh0, oh1);
    aw.covering(iw, ow0, ow1);
    const int pos = int(ih * W + iw);
    float g[2][2][V];
    int at[2][2][V];
#pragma unroll
    for (int a = 0; a < 2; ++a) {
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const I oh = oh0 + a, ow = ow0 + b;
        if (oh <= oh1 && ow <= ow1) {
          const I o = kNhwc ? ((n * OH + oh) * OW + ow) * C + c : ((n * C + c) * OH + oh) * OW + ow;
          load_v<T, V>(dy + o, g[a][b]);
          if (kMax) load_idx<V>(idx + o, at[a][b]);
        }
      }
    }
    float acc[V];
#pragma unroll
    for (int l = 0; l < V; ++l) acc[l] = 0.f;
#pragma unroll
    for (int a = 0; a < 2; ++a) {
      const I oh = oh0 + a;
      if (oh > oh1) continue;
      const Span<I> sh = ah.window(oh);
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const I ow = ow0 + b;
        if (ow > ow1) continue;
        if (kMax) {
          const int mine =
              kTaps ? int((ih - (oh * ah.s - ah.pad)) * aw.k + (iw - (ow * aw.s - aw.pad))) : pos;
#pragma unroll
          for (int l = 0; l < V; ++l) acc[l] += at[a][b][l] == mine ? g[a][b][l] : 0.f;
        } else {
          const float d = divisor(p.mode, sh, aw.window(ow));
#pragma unroll
          for (int l = 0; l < V; ++l) acc[l] += g[a][b][l] / d;
        }
      }
    }
    store_v<T, V>(dx + in_off, acc);
  }
}

// Forward over nhwc with 8 channels per thread, a square K x K window at stride S on both axes
// (not adaptive): each thread computes a 2 x 2 block of outputs, streaming the block's
// (S + K) x (S + K) input patch row by row, so neighbouring windows share their overlapping loads
// (a 3x3 window at stride 2 loads 25 vectors per 4 outputs instead of 36). Each output still meets
// its taps row by row, left to right, with the fixed kernel's fill values for taps outside the
// input, so values, max indices (kIdx 1: positions in the plane, kIdx 2: tap numbers r * K + q)
// and divisors are exactly pool_forward_fixed_kernel's.
constexpr int kOutBlock = 2;
template <typename T, int K, int S, int kIdx>
__global__ void __launch_bounds__(256, 2)
    pool_forward_block_kernel(PoolParams p, const T* __restrict__ x, T* __restrict__ y,
                              void* __restrict__ idx, int total) {
  constexpr int B = kOutBlock, P = (B - 1) * S + K;
  const Axis<int> ah = axis_h<int>(p), aw = axis_w<int>(p);
  const int C = int(p.c), H = int(p.h), W = int(p.w), OH = int(p.oh), OW = int(p.ow);
  const int cvecs = C / 8, blocks_w = (OW + B - 1) / B, blocks_h = (OH + B - 1) / B;
  const bool is_max = p.mode == 0;
  const float fill = is_max ? -INFINITY : 0.f;
  for (int t = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x); t < total;
       t += int(gridDim.x) * int(blockDim.x)) {
    const int c = (t % cvecs) * 8;
    int rest = t / cvecs;
    const int ow0 = (rest % blocks_w) * B;
    rest /= blocks_w;
    const int oh0 = (rest % blocks_h) * B;
    const int n = rest / blocks_h;
    const int h0 = oh0 * S - ah.pad, w0 = ow0 * S - aw.pad;  // the patch's first row and column
    const T* xn = x + n * H * W * C + c;
    Span<int> sh[B], sw[B];
#pragma unroll
    for (int a = 0; a < B; ++a) sh[a] = ah.window(oh0 + a), sw[a] = aw.window(ow0 + a);
    float acc[B][B][8];
    int at[B][B][8];
#pragma unroll
    for (int a = 0; a < B; ++a) {
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int first = kIdx == 2 ? (sh[a].begin - (h0 + a * S)) * K + (sw[b].begin - (w0 + b * S))
                                    : sh[a].begin * W + sw[b].begin;
#pragma unroll
        for (int l = 0; l < 8; ++l) acc[a][b][l] = is_max ? -INFINITY : 0.f, at[a][b][l] = first;
      }
    }
    bool col_in[P];
#pragma unroll
    for (int q = 0; q < P; ++q) col_in[q] = w0 + q >= 0 && w0 + q < W;
#pragma unroll
    for (int pr = 0; pr < P; ++pr) {
      const int ih = h0 + pr;
      const bool row_in = ih >= 0 && ih < H;
      float v[P][8];
#pragma unroll
      for (int q = 0; q < P; ++q) {
        if (row_in && col_in[q]) {
          load8<T>(xn + (ih * W + w0 + q) * C, v[q]);
        } else {
#pragma unroll
          for (int l = 0; l < 8; ++l) v[q][l] = fill;
        }
      }
#pragma unroll
      for (int a = 0; a < B; ++a) {
        const int r = pr - a * S;  // this row's tap row in output row a's window
        if (r < 0 || r >= K) continue;
#pragma unroll
        for (int b = 0; b < B; ++b) {
#pragma unroll
          for (int qq = 0; qq < K; ++qq) {
            const int q = b * S + qq;
            if (is_max) {
              const int pos = kIdx == 2 ? r * K + qq : ih * W + w0 + q;
#pragma unroll
              for (int l = 0; l < 8; ++l) {
                if (v[q][l] > acc[a][b][l] || v[q][l] != v[q][l]) acc[a][b][l] = v[q][l], at[a][b][l] = pos;
              }
            } else {
#pragma unroll
              for (int l = 0; l < 8; ++l) acc[a][b][l] += v[q][l];
            }
          }
        }
      }
    }
#pragma unroll
    for (int a = 0; a < B; ++a) {
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int oh = oh0 + a, ow = ow0 + b;
        if (oh >= OH || ow >= OW) continue;
        const int out = ((n * OH + oh) * OW + ow) * C + c;
        if (!is_max) {
          const float d = divisor(p.mode, sh[a], sw[b]);
#pragma unroll
          for (int l = 0; l < 8; ++l) acc[a][b][l] /= d;
        }
        if (y != nullptr) store_v<T, 8>(y + out, acc[a][b]);
        if (kIdx == 1 && is_max) store_idx<8>(static_cast<std::int32_t*>(idx) + out, at[a][b]);
        if (kIdx == 2 && is_max) store_idx<8>(static_cast<std::uint8_t*>(idx) + out, at[a][b]);
      }
    }
  }
}

// Backward over nhwc with 8 channels per thread at stride 2 on both axes with windows of at most
// 3 (not adaptive): each thread gathers a 2 x 2 block of inputs (rows and columns 2j, 2j + 1),
// whose covering outputs span at most two rows and two columns, so the block loads each of those
// gradients (and indices) once where one thread per input loads them up to four times between
// them. Each input adds its own covering outputs in increasing row then column order, as
// pool_backward_two_kernel does, so the sums are exactly its own. Idx as there: int32 positions in
// the plane, or the window tap numbers of pool_forward_block_kernel / pool_forward_fixed_kernel.
template <typename T, bool kMax, typename Idx>
__global__ void __launch_bounds__(256, 2)
    pool_backward_pairs_kernel(PoolParams p, const T* __restrict__ dy, const Idx* __restrict__ idx,
                               T* __restrict__ dx, int total) {
  constexpr bool kTaps = std::is_same_v<Idx, std::uint8_t>;
  const Axis<int> ah = axis_h<int>(p), aw = axis_w<int>(p);
  const int C = int(p.c), H = int(p.h), W = int(p.w), OH = int(p.oh), OW = int(p.ow);
  const int cvecs = C / 8, pairs_w = (W + 1) / 2, pairs_h = (H + 1) / 2;
  for (int t = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x); t < total;
       t += int(gridDim.x) * int(blockDim.x)) {
    const int c = (t % cvecs) * 8;
    int rest = t / cvecs;
    const int iw0 = (rest % pairs_w) * 2;
    rest /= pairs_w;
    const int ih0 = (rest % pairs_h) * 2;
    const int n = rest / pairs_h;
    // Each input's covering outputs; the pair's union starts at the first input's first and ends
    // at the last input's last (both bounds grow with the input).
    int fh[2], lh[2], fw[2], lw[2];
#pragma unroll
    for (int d = 0; d < 2; ++d) {
      ah.covering(min(ih0 + d, H - 1), fh[d], lh[d]);
      aw.covering(min(iw0 + d, W - 1), fw[d], lw[d]);
    }
    float g[2][2][8];
    int at[2][2][8];
#pragma unroll
    for (int a = 0; a < 2; ++a) {
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const int oh = fh[0] + a, ow = fw[0] + b;
        if (oh <= lh[1] && ow <= lw[1]) {
          const int o = ((n * OH + oh) * OW + ow) * C + c;
          load_v<T, 8>(dy + o, g[a][b]);
          if (kMax) load_idx<8>(idx + o, at[a][b]);
        }
      }
    }
#pragma unroll
    for (int da = 0; da < 2; ++da) {
      const int ih = ih0 + da;
      if (ih >= H) continue;
#pragma unroll
      for (int db = 0; db < 2; ++db) {
        const int iw = iw0 + db;
        if (iw >= W) continue;
        const int pos = ih * W + iw;
        float acc[8];
#pragma unroll
        for (int l = 0; l < 8; ++l) acc[l] = 0.f;
#pragma unroll
        for (int a = 0; a < 2; ++a) {
          const int oh = fh[0] + a;
          if (oh < fh[da] || oh > lh[da]) continue;
          const Span<int> sh = ah.window(oh);
#pragma unroll
          for (int b = 0; b < 2; ++b) {
            const int ow = fw[0] + b;
            if (ow < fw[db] || ow > lw[db]) continue;
            if (kMax) {
              const int mine = kTaps ? (ih - (oh * ah.s - ah.pad)) * aw.k + (iw - (ow * aw.s - aw.pad)) : pos;
#pragma unroll
              for (int l = 0; l < 8; ++l) acc[l] += at[a][b][l] == mine ? g[a][b][l] : 0.f;
            } else {
              const float d = divisor(p.mode, sh, aw.window(ow));
#pragma unroll
              for (int l = 0; l < 8; ++l) acc[l] += g[a][b][l] / d;
            }
          }
        }
        store_v<T, 8>(dx + (((n * H + ih) * W + iw) * C + c), acc);
      }
    }
  }
}

// Global backward, a broadcast: every input of plane (n, c) gets 0 + dy[n, c] / d, d the divisor
// the gather computes for the whole-plane window (average), or dy[n, c] where idx[n, c] names it
// and 0 elsewhere (max). Each thread writes V consecutive elements of dx with one store: nhwc, V
// channels of one pixel; nchw, V pixels of one plane (V == 8 when the plane is a multiple of 8).
template <typename T, int V, bool kNhwc, bool kMax, typename I>
__global__ void pool_global_backward_kernel(PoolParams p, const T* __restrict__ dy,
                                            const std::int32_t* __restrict__ idx, T* __restrict__ dx,
                                            I total) {
  const I C = I(p.c), HW = I(p.h) * I(p.w);
  const float d = float(p.h) * float(p.w);
  for (I t = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); t < total; t += I(gridDim.x) * I(blockDim.x)) {
    float g[V];
    int at[V];
    int pix[V];
    if (kNhwc) {
      const I cvecs = C / V;
      const I c = (t % cvecs) * V;
      const I r = t / cvecs;
      const I n = r / HW;
      const I plane_off = n * C + c;
      load_v<T, V>(dy + plane_off, g);
      if (kMax) load_idx<V>(idx + plane_off, at);
#pragma unroll
      for (int l = 0; l < V; ++l) pix[l] = int(r - n * HW);
    } else {
      const I per_plane = HW / V;
      const I plane = t / per_plane;
      const I first = (t - plane * per_plane) * V;
      const float gv = ldg_f32(dy + plane);
      const int av = kMax ? idx[plane] : 0;
#pragma unroll
      for (int l = 0; l < V; ++l) g[l] = gv, at[l] = av, pix[l] = int(first) + l;
    }
    float out[V];
#pragma unroll
    for (int l = 0; l < V; ++l) out[l] = kMax ? 0.f + (at[l] == pix[l] ? g[l] : 0.f) : 0.f + g[l] / d;
    store_v<T, V>(dx + t * V, out);
  }
}

// Global backward over nhwc at 8 channels per thread: each thread loads its plane's gradient (and
// index) once and writes a run of kGlobalRun pixels with it, so the loads and the index
// arithmetic of one store are shared by kGlobalRun stores; a warp's store of one pixel stays
// contiguous. The values are pool_global_backward_kernel's.
constexpr int kGlobalRun = 8;
template <typename T, bool kMax, typename I>
__global__ void __launch_bounds__(256)
    pool_global_backward_runs_kernel(PoolParams p, const T* __restrict__ dy,
                                     const std::int32_t* __restrict__ idx, T* __restrict__ dx, I total) {
  const I C = I(p.c), HW = I(p.h) * I(p.w);
  const I cvecs = C / 8, runs = (HW + kGlobalRun - 1) / kGlobalRun;
  const float d = float(p.h) * float(p.w);
  for (I t = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); t < total; t += I(gridDim.x) * I(blockDim.x)) {
    const I c = (t % cvecs) * 8;
    const I rest = t / cvecs;
    const I first = (rest % runs) * kGlobalRun;
    const I n = rest / runs;
    const I plane_off = n * C + c;
    float g[8], out[8];
    int at[8];
    load_v<T, 8>(dy + plane_off, g);
    if (kMax) load_idx<8>(idx + plane_off, at);
#pragma unroll
    for (int l = 0; l < 8; ++l) out[l] = 0.f + g[l] / d;
    T* dst = dx + (n * HW + first) * C + c;
#pragma unroll
    for (int j = 0; j < kGlobalRun; ++j) {
      if (first + j >= HW) break;
      if (kMax) {
        const int pix = int(first) + j;
#pragma unroll
        for (int l = 0; l < 8; ++l) out[l] = 0.f + (at[l] == pix ? g[l] : 0.f);
      }
      store_v<T, 8>(dst + I(j) * C, out);
    }
  }
}

// Global nchw: one warp per plane, lanes striding over it (16-byte loads when the plane allows),
// then a shuffle tree. A lane visits its elements in increasing order and `beats` does not depend
// on order, so the tree keeps the sequential rule.
template <typename T, int V>
__global__ void pool_global_nchw_kernel(PoolParams p, const T* __restrict__ x, T* __restrict__ y,
                                        std::int32_t* __restrict__ idx) {
  const int lane = threadIdx.x & 31;
  const i64 plane = i64(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (plane >= p.n * p.c) return;
  const i64 hw = p.h * p.w;
  const T* xp = x + plane * hw;
  float best = p.mode == 0 ? -INFINITY : 0.f;
  int at = 0x7fffffff;
  for (i64 j = lane; j < hw / V; j += 32) {
    float v[V];
    load_v<T, V>(xp + j * V, v);
#pragma unroll
    for (int l = 0; l < V; ++l) {
      if (p.mode != 0) {
        best += v[l];
      } else if (beats(v[l], int(j * V + l), best, at)) {
        best = v[l], at = int(j * V + l);
      }
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
#if GALLEY_GPU_HIP
    // Width 32: a 64-lane AMD wavefront holds two planes' lanes.
    const float ob = __shfl_down(best, off, 32);
    const int oa = __shfl_down(at, off, 32);
#else
    const float ob = __shfl_down_sync(0xffffffffu, best, off);
    const int oa = __shfl_down_sync(0xffffffffu, at, off);
#endif
    if (p.mode != 0) {
      best += ob;
    } else if (beats(ob, oa, best, at)) {
      best = ob, at = oa;
    }
  }
  if (lane == 0) {
    if (p.mode != 0) best /= float(hw);
    if (y != nullptr) y[plane] = from_f32<T>(best);
    if (p.mode == 0 && idx != nullptr) idx[plane] = at;
  }
}

// Global nhwc, pass one: a block holds 32 x V channels of one image (threadIdx.x, coalesced 16-byte
// loads) and kGlobalRows pixel rows (threadIdx.y) striding over its share of the plane
// (blockIdx.z of `splits`); it leaves one partial per channel and share in the workspace.
constexpr int kGlobalRows = 8;
constexpr int kGlobalUnroll = 4;
template <typename T, int V>
__global__ void pool_global_nhwc_partial_kernel(PoolParams p, const T* __restrict__ x,
                                                float* __restrict__ part_v, int* __restrict__ part_i,
                                                int splits) {
  __shared__ float vals[kGlobalRows][32][V];
  __shared__ int ats[kGlobalRows][32][V];
  const i64 n = blockIdx.y;
  const i64 c = (i64(blockIdx.x) * 32 + threadIdx.x) * V;
  const i64 hw = p.h * p.w;
  const i64 share = (hw + splits - 1) / splits;
  const i64 begin = blockIdx.z * share, end = min(hw, begin + share);
  const bool live = c < p.c;
  float acc[V];
  int at[V];
#pragma unroll
  for (int l = 0; l < V; ++l) acc[l] = p.mode == 0 ? -INFINITY : 0.f, at[l] = 0x7fffffff;
  const auto take = [&](const float(&v)[V], i64 i) {
#pragma unroll
    for (int l = 0; l < V; ++l) {
      if (p.mode != 0) {
        acc[l] += v[l];
      } else if (beats(v[l], int(i), acc[l], at[l])) {
        acc[l] = v[l], at[l] = int(i);
      }
    }
  };
  if (live) {
    // kGlobalUnroll rows' loads issue before any is used; the rows are then taken in the same
    // order as one at a time, so the sums are unchanged.
    const T* xc = x + n * hw * p.c + c;
    i64 i = begin + threadIdx.y;
    for (; i + (kGlobalUnroll - 1) * kGlobalRows < end; i += kGlobalUnroll * kGlobalRows) {
      float v[kGlobalUnroll][V];
#pragma unroll
      for (int u = 0; u < kGlobalUnroll; ++u) load_v<T, V>(xc + (i + u * kGlobalRows) * p.c, v[u]);
#pragma unroll
      for (int u = 0; u < kGlobalUnroll; ++u) take(v[u], i + u * kGlobalRows);
    }
    for (; i < end; i += kGlobalRows) {
      float v[V];
      load_v<T, V>(xc + i * p.c, v);
      take(v, i);
    }
  }
#pragma unroll
  for (int l = 0; l < V; ++l)
    vals[threadIdx.y][threadIdx.x][l] = acc[l], ats[threadIdx.y][threadIdx.x][l] = at[l];
  __syncthreads();
  if (threadIdx.y != 0 || !live) return;
  for (int r = 1; r < kGlobalRows; ++r) {
#pragma unroll
    for (int l = 0; l < V; ++l) {
      const float v = vals[r][threadIdx.x][l];
      const int a = ats[r][threadIdx.x][l];
      if (p.mode != 0) {
        acc[l] += v;
      } else if (beats(v, a, acc[l], at[l])) {
        acc[l] = v, at[l] = a;
      }
    }
  }
  const i64 o = (n * splits + blockIdx.z) * p.c + c;
#pragma unroll
  for (int l = 0; l < V; ++l) part_v[o + l] = acc[l], part_i[o + l] = at[l];
}

// Global nhwc, pass two: one thread per (image, channel) merges the shares.
template <typename T>
__global__ void pool_global_nhwc_finish_kernel(PoolParams p, const float* __restrict__ part_v,
                                               const int* __restrict__ part_i, int splits, T* __restrict__ y,
                                               std::int32_t* __restrict__ idx) {
  const i64 t = i64(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.n * p.c) return;
  const i64 n = t / p.c, c = t % p.c;
  float best = p.mode == 0 ? -INFINITY : 0.f;
  int at = 0x7fffffff;
  for (int s = 0; s < splits; ++s) {
    const i64 o = (n * splits + s) * p.c + c;
    if (p.mode != 0) {
      best += part_v[o];
    } else if (beats(part_v[o], part_i[o], best, at)) {
      best = part_v[o], at = part_i[o];
    }
  }
  if (p.mode != 0) best /= float(p.h * p.w);
  if (y != nullptr) y[t] = from_f32<T>(best);
  if (p.mode == 0 && idx != nullptr) idx[t] = at;
}

int global_vec(const PoolParams& p, const void* x) {
  const bool aligned = reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
  if (p.nhwc) return aligned && p.c % 8 == 0 ? 8 : 1;
  return aligned && (p.h * p.w) % 8 == 0 ? 8 : 1;
}

// Shares of an nhwc plane: enough blocks to fill a large GPU (about 1024), each share at least
// a few rows per thread; at most gridDim.z's 65535.
int global_splits(const PoolParams& p) {
  const i64 groups = (p.c + 255) / 256 * p.n;
  const i64 want = (1024 + groups - 1) / groups;
  const i64 most = std::max<i64>(1, p.h * p.w / (4 * kGlobalRows));
  return int(std::clamp<i64>(std::min(want, most), 1, 65535));
}

unsigned grid_for(i64 total, int threads) {
  // Grid-stride loops: cap the grid so huge tensors still launch on both vendors.
  return unsigned(std::min<i64>((total + threads - 1) / threads, 65535LL * 32));
}

}  // namespace

PoolParams make_pool_params(const dnn::PoolProblem& problem) {
  problem.validate();
  PoolParams p;
  p.n = problem.n, p.c = problem.c, p.h = problem.h, p.w = problem.w;
  p.oh = problem.out_h(), p.ow = problem.out_w();
  p.adaptive = problem.window != dnn::PoolWindow::kernel;
  if (!p.adaptive) {
    p.kh = problem.kernel_h, p.kw = problem.kernel_w;
    p.sh = problem.stride_h, p.sw = problem.stride_w;
    p.ph = problem.pad_h, p.pw = problem.pad_w;
  }
  p.mode = problem.mode == dnn::PoolMode::max ? 0 : problem.mode == dnn::PoolMode::avg_include_pad ? 1 : 2;
  p.nhwc = problem.layout == dnn::Layout::nhwc;
  p.dtype = problem.dtype;
  return p;
}

int pool_vector_width(const PoolParams& p, const void* const* pointers, int count) {
  if (!p.nhwc || p.c % 8 != 0) return 1;
  for (int i = 0; i < count; ++i) {
    if (pointers[i] != nullptr && reinterpret_cast<std::uintptr_t>(pointers[i]) % 16 != 0) return 1;
  }
  return 8;
}

namespace {

// Whether every index and window bound of the kernels fits in int, with room for one grid stride
// past the end (a grid-stride loop's last step): the tensors, the products o * in of adaptive
// bounds, and the padded extents. In double, so absurd sizes cannot wrap the test itself.
bool fits_int32(const PoolParams& p) {
  const double stride = 65535.0 * 32 * 256;
  const double limit = 2147483647.0 - stride;
  const double sizes[] = {double(p.in_elems()),
                          double(p.out_elems()),
                          (double(p.oh) + 1) * (double(p.h) + 1),
                          (double(p.ow) + 1) * (double(p.w) + 1),
                          double(p.oh) * double(p.sh) + double(p.kh) + double(p.ph) + double(p.h),
                          double(p.ow) * double(p.sw) + double(p.kw) + double(p.pw) + double(p.w)};
  for (double v : sizes) {
    if (v >= limit) return false;
  }
  return true;
}

template <typename Launch>
void with_index_type(const PoolParams& p, Launch&& launch) {
  if (fits_int32(p)) {
    launch(int(0));
  } else {
    launch(i64(0));
  }
}

// The unrolled forward's window size: 2 or 3 for a square kernel window of that size whose
// indices fit in int, else 0 (the generic kernel).
int fixed_window(const PoolParams& p) {
  if (p.adaptive || p.kh != p.kw || (p.kh != 2 && p.kh != 3) || !fits_int32(p)) return 0;
  return int(p.kh);
}

// Whether no input lies in more than two windows along either axis, so the unrolled backward
// applies: a window of k at stride s covers at most ceil(k / s) outputs per input.
bool covered_at_most_twice(const PoolParams& p) {
  return !p.adaptive && p.kh <= 2 * p.sh && p.kw <= 2 * p.sw && fits_int32(p);
}

// The stride of pool_forward_block_kernel for an nhwc problem of 8 channels per thread with a
// fixed window: 1 or 2 when both axes have it, else 0 (one thread per output). Larger strides
// share no input between neighbouring windows of a 3x3 or 2x2 window.
int block_stride(const PoolParams& p, int vec) {
  if (!p.nhwc || vec != 8 || fixed_window(p) == 0 || p.sh != p.sw || (p.sh != 1 && p.sh != 2)) return 0;
  return int(p.sh);
}

// Threads of pool_forward_block_kernel: one per 2 x 2 block of outputs and 8 channels.
i64 block_threads(const PoolParams& p) {
  return p.n * ((p.oh + kOutBlock - 1) / kOutBlock) * ((p.ow + kOutBlock - 1) / kOutBlock) * (p.c / 8);
}

template <typename T, int kIdx>
void launch_forward_block(const PoolParams& p, int stride, const T* x, T* y, void* idx, GpuStream stream) {
  constexpr int kThreads = 256;
  const i64 total = block_threads(p);
  const int k = fixed_window(p);
  auto kernel = k == 3 ? (stride == 2 ? pool_forward_block_kernel<T, 3, 2, kIdx>
                                      : pool_forward_block_kernel<T, 3, 1, kIdx>)
                       : (stride == 2 ? pool_forward_block_kernel<T, 2, 2, kIdx>
                                      : pool_forward_block_kernel<T, 2, 1, kIdx>);
  kernel<<<grid_for(total, kThreads), kThreads, 0, stream>>>(p, x, y, idx, int(total));
}

// Whether pool_backward_pairs_kernel applies: nhwc at 8 channels per thread, stride 2 on both axes
// and windows of at most 3, so a pair of inputs has at most two covering outputs per axis.
bool pairs_apply(const PoolParams& p, int vec) {
  return p.nhwc && vec == 8 && !p.adaptive && p.sh == 2 && p.sw == 2 && p.kh <= 3 && p.kw <= 3 &&
         fits_int32(p);
}

template <typename T, bool kMax, typename Idx>
void launch_backward_pairs(const PoolParams& p, const T* dy, const Idx* idx, T* dx, GpuStream stream) {
  constexpr int kThreads = 256;
  const i64 total = p.n * ((p.h + 1) / 2) * ((p.w + 1) / 2) * (p.c / 8);
  pool_backward_pairs_kernel<T, kMax, Idx>
      <<<grid_for(total, kThreads), kThreads, 0, stream>>>(p, dy, idx, dx, int(total));
}

}  // namespace

void launch_pool_forward(const PoolParams& p, const void* x, void* y, std::int32_t* idx, int vec,
                         void* stream) {
  constexpr int kThreads = 256;
  const i64 total = p.out_elems() / vec;
  dispatch_dtype(p.dtype, "gpu.pool.direct", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (const int stride = block_stride(p, vec); stride != 0) {
      if (idx != nullptr) {
        launch_forward_block<T, 1>(p, stride, static_cast<const T*>(x), static_cast<T*>(y), idx,
                                   as_stream(stream));
      } else {
        launch_forward_block<T, 0>(p, stride, static_cast<const T*>(x), static_cast<T*>(y), nullptr,
                                   as_stream(stream));
      }
      return;
    }
    if (const int k = fixed_window(p); k != 0) {
      auto kernel = k == 3 ? (!p.nhwc    ? pool_forward_fixed_kernel<T, 1, false, 3, int, std::int32_t>
                              : vec == 8 ? pool_forward_fixed_kernel<T, 8, true, 3, int, std::int32_t>
                                         : pool_forward_fixed_kernel<T, 1, true, 3, int, std::int32_t>)
                           : (!p.nhwc    ? pool_forward_fixed_kernel<T, 1, false, 2, int, std::int32_t>
                              : vec == 8 ? pool_forward_fixed_kernel<T, 8, true, 2, int, std::int32_t>
                                         : pool_forward_fixed_kernel<T, 1, true, 2, int, std::int32_t>);
      kernel<<<grid_for(total, kThreads), kThreads, 0, as_stream(stream)>>>(
          p, static_cast<const T*>(x), static_cast<T*>(y), idx, int(total));
      return;
    }
    with_index_type(p, [&](auto index) {
      using I = decltype(index);
      auto kernel = !p.nhwc    ? pool_forward_kernel<T, 1, false, I>
                    : vec == 8 ? pool_forward_kernel<T, 8, true, I>
                               : pool_forward_kernel<T, 1, true, I>;
      kernel<<<grid_for(total, kThreads), kThreads, 0, as_stream(stream)>>>(
          p, static_cast<const T*>(x), static_cast<T*>(y), idx, I(total));
    });
  });
  check_launch("gpu.pool.direct (forward)");
}

void launch_pool_backward(const PoolParams& p, const void* dy, const std::int32_t* idx, void* dx, int vec,
                          void* stream) {
  constexpr int kThreads = 256;
  const i64 total = p.in_elems() / vec;
  const bool is_max = p.mode == 0;
  dispatch_dtype(p.dtype, "gpu.pool.direct", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (pairs_apply(p, vec)) {
      if (is_max) {
        launch_backward_pairs<T, true>(p, static_cast<const T*>(dy), idx, static_cast<T*>(dx),
                                       as_stream(stream));
      } else {
        launch_backward_pairs<T, false>(p, static_cast<const T*>(dy), idx, static_cast<T*>(dx),
                                        as_stream(stream));
      }
      return;
    }
    if (covered_at_most_twice(p)) {
      auto kernel = is_max ? (!p.nhwc    ? pool_backward_two_kernel<T, 1, false, true, int, std::int32_t>
                              : vec == 8 ? pool_backward_two_kernel<T, 8, true, true, int, std::int32_t>
                                         : pool_backward_two_kernel<T, 1, true, true, int, std::int32_t>)
                           : (!p.nhwc    ? pool_backward_two_kernel<T, 1, false, false, int, std::int32_t>
                              : vec == 8 ? pool_backward_two_kernel<T, 8, true, false, int, std::int32_t>
                                         : pool_backward_two_kernel<T, 1, true, false, int, std::int32_t>);
      kernel<<<grid_for(total, kThreads), kThreads, 0, as_stream(stream)>>>(p, static_cast<const T*>(dy), idx,
                                                                            static_cast<T*>(dx), int(total));
      return;
    }
    with_index_type(p, [&](auto index) {
      using I = decltype(index);
      auto kernel = is_max ? (!p.nhwc    ? pool_backward_kernel<T, 1, false, true, I>
                              : vec == 8 ? pool_backward_kernel<T, 8, true, true, I>
                                         : pool_backward_kernel<T, 1, true, true, I>)
                           : (!p.nhwc    ? pool_backward_kernel<T, 1, false, false, I>
                              : vec == 8 ? pool_backward_kernel<T, 8, true, false, I>
                                         : pool_backward_kernel<T, 1, true, false, I>);
      kernel<<<grid_for(total, kThreads), kThreads, 0, as_stream(stream)>>>(p, static_cast<const T*>(dy), idx,
                                                                            static_cast<T*>(dx), I(total));
    });
  });
  check_launch("gpu.pool.direct (backward)");
}

bool pool_backward_by_taps_applies(const PoolParams& p) {
  return p.mode == 0 && fixed_window(p) != 0 && covered_at_most_twice(p);
}

void launch_pool_backward_by_taps(const PoolParams& p, const void* x, const void* dy, std::uint8_t* taps,
                                  void* dx, int vec, void* stream) {
  constexpr int kThreads = 256;
  const i64 outputs = p.out_elems() / vec;
  dispatch_dtype(p.dtype, "gpu.pool.direct", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    using Taps = std::uint8_t;
    const GpuStream s = as_stream(stream);
    if (const int stride = block_stride(p, vec); stride != 0) {
      launch_forward_block<T, 2>(p, stride, static_cast<const T*>(x), nullptr, taps, s);
    } else {
      auto find = fixed_window(p) == 3 ? (!p.nhwc    ? pool_forward_fixed_kernel<T, 1, false, 3, int, Taps>
                                          : vec == 8 ? pool_forward_fixed_kernel<T, 8, true, 3, int, Taps>
                                                     : pool_forward_fixed_kernel<T, 1, true, 3, int, Taps>)
                                       : (!p.nhwc    ? pool_forward_fixed_kernel<T, 1, false, 2, int, Taps>
                                          : vec == 8 ? pool_forward_fixed_kernel<T, 8, true, 2, int, Taps>
                                                     : pool_forward_fixed_kernel<T, 1, true, 2, int, Taps>);
      find<<<grid_for(outputs, kThreads), kThreads, 0, s>>>(p, static_cast<const T*>(x), nullptr, taps,
                                                            int(outputs));
    }
  });
  check_launch("gpu.pool.direct (finding the maxima)");
  launch_pool_backward_gather_taps(p, dy, taps, dx, vec, stream);
}

void launch_pool_backward_gather_taps(const PoolParams& p, const void* dy, const std::uint8_t* taps, void* dx,
                                      int vec, void* stream) {
  constexpr int kThreads = 256;
  const i64 inputs = p.in_elems() / vec;
  dispatch_dtype(p.dtype, "gpu.pool.direct", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    using Taps = std::uint8_t;
    const GpuStream s = as_stream(stream);
    if (pairs_apply(p, vec)) {
      launch_backward_pairs<T, true, Taps>(p, static_cast<const T*>(dy), taps, static_cast<T*>(dx), s);
      return;
    }
    auto gather = !p.nhwc    ? pool_backward_two_kernel<T, 1, false, true, int, Taps>
                  : vec == 8 ? pool_backward_two_kernel<T, 8, true, true, int, Taps>
                             : pool_backward_two_kernel<T, 1, true, true, int, Taps>;
    gather<<<grid_for(inputs, kThreads), kThreads, 0, s>>>(p, static_cast<const T*>(dy), taps,
                                                           static_cast<T*>(dx), int(inputs));
  });
  check_launch("gpu.pool.direct (backward)");
}

std::size_t pool_global_workspace_bytes(const PoolParams& p) {
  if (!p.nhwc) return 0;
  return std::size_t(p.n) * std::size_t(global_splits(p)) * std::size_t(p.c) * (sizeof(float) + sizeof(int));
}

void launch_pool_global_forward(const PoolParams& p, const void* x, void* y, std::int32_t* idx,
                                void* workspace, void* stream) {
  const int vec = global_vec(p, x);
  dispatch_dtype(p.dtype, "gpu.pool.global", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (p.nhwc) {
      const int splits = global_splits(p);
      auto* part_v = static_cast<float*>(workspace);
      auto* part_i = reinterpret_cast<int*>(part_v + p.n * splits * p.c);
      const dim3 block(32, kGlobalRows);
      const dim3 grid(unsigned((p.c + 32 * vec - 1) / (32 * vec)), unsigned(p.n), unsigned(splits));
      auto partial = vec == 8 ? pool_global_nhwc_partial_kernel<T, 8> : pool_global_nhwc_partial_kernel<T, 1>;
      partial<<<grid, block, 0, as_stream(stream)>>>(p, static_cast<const T*>(x), part_v, part_i, splits);
      check_launch("gpu.pool.global (partial)");
      constexpr int kThreads = 256;
      pool_global_nhwc_finish_kernel<T>
          <<<unsigned((p.n * p.c + kThreads - 1) / kThreads), kThreads, 0, as_stream(stream)>>>(
              p, part_v, part_i, splits, static_cast<T*>(y), idx);
    } else {
      constexpr int kThreads = 256;
      const i64 planes = p.n * p.c;
      const unsigned blocks = unsigned((planes + kThreads / 32 - 1) / (kThreads / 32));
      auto kernel = vec == 8 ? pool_global_nchw_kernel<T, 8> : pool_global_nchw_kernel<T, 1>;
      kernel<<<blocks, kThreads, 0, as_stream(stream)>>>(p, static_cast<const T*>(x), static_cast<T*>(y),
                                                         idx);
    }
  });
  check_launch("gpu.pool.global");
}

void launch_pool_global_backward(const PoolParams& p, const void* dy, const std::int32_t* idx, void* dx,
                                 void* stream) {
  constexpr int kThreads = 256;
  const auto aligned = [](const void* q) { return reinterpret_cast<std::uintptr_t>(q) % 16 == 0; };
  const bool pointers_aligned = aligned(dx) && (!p.nhwc || (aligned(dy) && (idx == nullptr || aligned(idx))));
  const int vec = pointers_aligned && (p.nhwc ? p.c : p.h * p.w) % 8 == 0 ? 8 : 1;
  const i64 total = p.in_elems() / vec;
  const bool is_max = p.mode == 0;
  dispatch_dtype(p.dtype, "gpu.pool.global", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (p.nhwc && vec == 8) {
      const i64 runs_total = p.n * ((p.h * p.w + kGlobalRun - 1) / kGlobalRun) * (p.c / 8);
      with_index_type(p, [&](auto index) {
        using I = decltype(index);
        auto kernel = is_max ? pool_global_backward_runs_kernel<T, true, I>
                             : pool_global_backward_runs_kernel<T, false, I>;
        kernel<<<grid_for(runs_total, kThreads), kThreads, 0, as_stream(stream)>>>(
            p, static_cast<const T*>(dy), idx, static_cast<T*>(dx), I(runs_total));
      });
      return;
    }
    with_index_type(p, [&](auto index) {
      using I = decltype(index);
      auto pick = [&](auto max_tag) {
        constexpr bool kMax = decltype(max_tag)::value;
        // nhwc at 8 channels went to the runs kernel above.
        return p.nhwc ? pool_global_backward_kernel<T, 1, true, kMax, I>
                      : (vec == 8 ? pool_global_backward_kernel<T, 8, false, kMax, I>
                                  : pool_global_backward_kernel<T, 1, false, kMax, I>);
      };
      auto kernel = is_max ? pick(std::true_type{}) : pick(std::false_type{});
      kernel<<<grid_for(total, kThreads), kThreads, 0, as_stream(stream)>>>(p, static_cast<const T*>(dy), idx,
                                                                            static_cast<T*>(dx), I(total));
    });
  });
  check_launch("gpu.pool.global (backward)");
}

}  // namespace galley::backends::gpu
