// gpu.pool.strips' kernels: nhwc pooling over a square 2x2 or 3x3 window, 8 channels (16 bytes of
// f16/bf16) per thread. Forward, each thread walks a strip of output rows of one output column and
// keeps the input rows that vertically neighbouring windows share in registers, so every input row
// is read once per strip instead of once per window row, and the strips are sized so that every
// block is resident at once. Max backward from kept indices walks a strip the same way a block at a
// time, reading each gradient and index once; without kept indices, the forward walker writes the
// maxima as tap numbers first and the same block walker gathers with them.
//
// Windows, values, divisors and the max rule are exactly pool_kernels.cu's fixed-window kernels':
// taps outside the input hold -inf (max, which never takes over) or 0 (average), each output
// meets its taps row by row, left to right, and backward adds its covering outputs in increasing
// row then column order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "conv_device.cuh"
#include "pool_device.cuh"
#include "pool_kernels.hpp"

namespace galley::backends::gpu {
namespace {

using namespace pool_device;

constexpr int kStripThreads = 256;

// 8 elements of T as loaded, before conversion: one 16-byte word for f16/bf16, two for f32.
template <typename T>
struct Raw8 {
  uint4 w[sizeof(T) == 4 ? 2 : 1];
};

template <typename T>
__device__ __forceinline__ Raw8<T> load_raw(const T* p) {
  Raw8<T> r;
  r.w[0] = __ldg(reinterpret_cast<const uint4*>(p));
  if constexpr (sizeof(T) == 4) r.w[1] = __ldg(reinterpret_cast<const uint4*>(p) + 1);
  return r;
}

// What a tap outside the input holds, as raw bits: -inf for max, +0 for average.
template <typename T>
__device__ __forceinline__ Raw8<T> fill_raw(bool is_max) {
  unsigned bits = 0u;
  if (is_max) bits = sizeof(T) == 4 ? 0xff800000u : std::is_same_v<T, __half> ? 0xfc00fc00u : 0xff80ff80u;
  Raw8<T> r;
#pragma unroll
  for (int i = 0; i < int(sizeof(r.w) / sizeof(uint4)); ++i) r.w[i] = make_uint4(bits, bits, bits, bits);
  return r;
}

template <typename T>
__device__ __forceinline__ void unpack8(const Raw8<T>& r, float (&out)[8]) {
  if constexpr (sizeof(T) == 4) {
    const unsigned words[8] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w,
                               r.w[1].x, r.w[1].y, r.w[1].z, r.w[1].w};
#pragma unroll
    for (int l = 0; l < 8; ++l) out[l] = __uint_as_float(words[l]);
  } else {
    const unsigned words[4] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = unpack2(words[i], static_cast<T*>(nullptr));
      out[2 * i] = f.x, out[2 * i + 1] = f.y;
    }
  }
}

// Rows a window of K at stride S shares with the next one down, and rows each step reads anew.
template <int K, int S>
inline constexpr int kSharedRows = K > S ? K - S : 0;
template <int K, int S>
inline constexpr int kNewRows = K - kSharedRows<K, S>;

// One row of a window's taps: K column vectors at w0, w0 + 1, ..., fill where outside the input.
template <typename T, int K>
__device__ __forceinline__ void load_row(const T* xn, int ih, int H, int W, int C, int w0,
                                         const bool (&col_in)[K], const Raw8<T>& fill, Raw8<T> (&row)[K]) {
  const bool row_in = ih >= 0 && ih < H;
#pragma unroll
  for (int q = 0; q < K; ++q) row[q] = row_in && col_in[q] ? load_raw(xn + (ih * W + w0 + q) * C) : fill;
}

// Moves a walker's window one output row on: down, the window's last shared rows become its
// first; up, its first become its last. `next` holds the rows read anew, in window order.
template <typename T, int K, int S>
__device__ __forceinline__ void shift_window(bool up, Raw8<T> (&win)[K][K],
                                             const Raw8<T> (&next)[kNewRows<K, S>][K]) {
  constexpr int KC = kSharedRows<K, S>, NR = kNewRows<K, S>;
  if (!up) {
#pragma unroll
    for (int r = 0; r < KC; ++r) {
#pragma unroll
      for (int q = 0; q < K; ++q) win[r][q] = win[r + NR][q];
    }
#pragma unroll
    for (int j = 0; j < NR; ++j) {
#pragma unroll
      for (int q = 0; q < K; ++q) win[KC + j][q] = next[j][q];
    }
  } else {
#pragma unroll
    for (int r = K - 1; r >= NR; --r) {
#pragma unroll
      for (int q = 0; q < K; ++q) win[r][q] = win[r - NR][q];
    }
#pragma unroll
    for (int j = 0; j < NR; ++j) {
#pragma unroll
      for (int q = 0; q < K; ++q) win[j][q] = next[j][q];
    }
  }
}

// The first input row a step to output row `oh` reads anew (NR rows from there): down, the last NR
// rows of oh's window; up, its first NR.
template <int K, int S>
__device__ __forceinline__ int first_new_row(bool up, int oh, int pad) {
  return oh * S - pad + (up ? 0 : kSharedRows<K, S>);
}

// Forward: one thread per 8 channels of one output column and a strip of `strip_rows` output
// rows. Odd strips walk up and even ones down, so the input rows two neighbouring strips share
// are read by both near the same moment (both at their start or both at their end) and the
// second read finds them in L2. kIdx 1: the maxima's int32 positions in the plane as well; 2: their
// window tap numbers r * K + q, one byte each, for a backward pass that finds the maxima itself.
template <typename T, int K, int S, int kIdx>
__global__ void __launch_bounds__(kStripThreads)
    pool_strip_forward_kernel(PoolParams p, const T* __restrict__ x, T* __restrict__ y,
                              void* __restrict__ idx, int strip_rows, int strips, int total) {
  constexpr int NR = kNewRows<K, S>;
  const int t = int(blockIdx.x) * kStripThreads + int(threadIdx.x);
  if (t >= total) return;
  const Axis<int> ah = axis_h<int>(p), aw = axis_w<int>(p);
  const int C = int(p.c), H = int(p.h), W = int(p.w), OH = int(p.oh), OW = int(p.ow);
  const int cvecs = C / 8;
  const bool is_max = p.mode == 0;
  const int c = (t % cvecs) * 8;
  int rest = t / cvecs;
  const int ow = rest % OW;
  rest /= OW;
  const int strip = rest % strips, n = rest / strips;
  const int first = strip * strip_rows, count = min(OH, first + strip_rows) - first;
  const bool up = (strip & 1) != 0;
  const int step = up ? -1 : 1;
  const int w0 = ow * S - aw.pad;
  bool col_in[K];
#pragma unroll
  for (int q = 0; q < K; ++q) col_in[q] = w0 + q >= 0 && w0 + q < W;
  const Span<int> sw = aw.window(ow);
  const T* xn = x + n * H * W * C + c;
  const Raw8<T> fill = fill_raw<T>(is_max);

  int oh = up ? first + count - 1 : first;
  Raw8<T> win[K][K];
#pragma unroll
  for (int r = 0; r < K; ++r) load_row<T, K>(xn, oh * S - ah.pad + r, H, W, C, w0, col_in, fill, win[r]);
  for (int i = 0; i < count; ++i, oh += step) {
    // The next step's rows are requested before this step's arithmetic waits on its own.
    const bool more = i + 1 < count;
    Raw8<T> next[NR][K];
    if (more) {
      const int h_new = first_new_row<K, S>(up, oh + step, ah.pad);
#pragma unroll
      for (int j = 0; j < NR; ++j) load_row<T, K>(xn, h_new + j, H, W, C, w0, col_in, fill, next[j]);
    }
    const Span<int> sh = ah.window(oh);
    const int h0 = oh * S - ah.pad;
    const int out = ((n * OH + oh) * OW + ow) * C + c;
    float acc[8];
    if (is_max) {
      int at[8];
      const int first_pos = kIdx == 2 ? (sh.begin - h0) * K + (sw.begin - w0) : sh.begin * W + sw.begin;
#pragma unroll
      for (int l = 0; l < 8; ++l) acc[l] = -INFINITY, at[l] = first_pos;
#pragma unroll
      for (int r = 0; r < K; ++r) {
#pragma unroll
        for (int q = 0; q < K; ++q) {
          float v[8];
          unpack8<T>(win[r][q], v);
          const int pos = kIdx == 2 ? r * K + q : (h0 + r) * W + w0 + q;
#pragma unroll
          for (int l = 0; l < 8; ++l) {
            if (v[l] > acc[l] || v[l] != v[l]) acc[l] = v[l], at[l] = pos;
          }
        }
      }
      if (y != nullptr) store8<T>(y + out, acc);
      if constexpr (kIdx == 1) store_idx<8>(static_cast<std::int32_t*>(idx) + out, at);
      if constexpr (kIdx == 2) store_idx<8>(static_cast<std::uint8_t*>(idx) + out, at);
    } else {
#pragma unroll
      for (int l = 0; l < 8; ++l) acc[l] = 0.f;
#pragma unroll
      for (int r = 0; r < K; ++r) {
#pragma unroll
        for (int q = 0; q < K; ++q) {
          float v[8];
          unpack8<T>(win[r][q], v);
#pragma unroll
          for (int l = 0; l < 8; ++l) acc[l] += v[l];
        }
      }
      const float d = divisor(p.mode, sh, sw);
#pragma unroll
      for (int l = 0; l < 8; ++l) acc[l] /= d;
      store8<T>(y + out, acc);
    }
    if (more) shift_window<T, K, S>(up, win, next);
  }
}

// Max backward at stride 2 from the maxima already found, in one pass: Pick int32, the kept
// positions in the plane; Pick uint8, window tap numbers (launch_pool_strips_find_taps'). A block
// holds `group` channel vectors of one image, a tile of output columns and a strip of output rows.
// Each step loads one output row's gradients and picks into a ring of three rows in shared memory,
// then gathers the input rows whose last covering output is now in the ring; each gradient and
// pick is read from memory once, where a thread per input pair reads each of them up to four
// times. Slot 0 of a block loads the column left of its tile, which the tile's first input columns
// also need. As in the forward, odd strips walk up (and load the row above the strip last) and even
// ones down (loading it first), so the rows two strips share are read at nearby moments.
constexpr int kBwdMaxSlots = 32;
constexpr int kBwdMaxGroup = 8;
// Input rows (or columns) one output row (column) finalises at most: S inside the plane, and at
// the far edge those of the last window plus the ones no window reaches (fewer than S).
constexpr int kMaxOwned = 4;

// The first output whose window (K at stride S, padding `pad`) holds input i, as
// Axis::covering's, with the stride known.
template <int K, int S>
__device__ __forceinline__ int first_covering(int i, int pad) {
  const int lo = i + pad - K + 1;
  return lo <= 0 ? 0 : (lo + S - 1) / S;
}

// 8 channels' picks as loaded: two 16-byte words of positions, or one 8-byte word of tap bytes.
template <typename Pick>
struct Picks8 {
  std::conditional_t<sizeof(Pick) == 4, int4, uint2> w[sizeof(Pick) == 4 ? 2 : 1];
};

template <typename Pick>
__device__ __forceinline__ Picks8<Pick> load_picks(const Pick* p) {
  Picks8<Pick> r;
  if constexpr (sizeof(Pick) == 4) {
    r.w[0] = __ldg(reinterpret_cast<const int4*>(p));
    r.w[1] = __ldg(reinterpret_cast<const int4*>(p) + 1);
  } else {
    r.w[0] = __ldg(reinterpret_cast<const uint2*>(p));
  }
  return r;
}

template <typename T, typename Pick>
struct PickRing {
  Raw8<T> grad[3][kBwdMaxSlots * kBwdMaxGroup];
  Picks8<Pick> pick[3][kBwdMaxSlots * kBwdMaxGroup];
};

template <typename T, int K, typename Pick>
__global__ void __launch_bounds__(kBwdMaxSlots* kBwdMaxGroup)
    pool_strip_gather_kernel(PoolParams p, const Pick* __restrict__ picks, const T* __restrict__ dy,
                             T* __restrict__ dx, int group, int slots, int col_tiles, int cgroups,
                             int strip_rows, int strips) {
  constexpr int S = 2;
  constexpr bool kTaps = sizeof(Pick) == 1;
  __shared__ PickRing<T, Pick> ring;
  const Axis<int> ah = axis_h<int>(p), aw = axis_w<int>(p);
  const int C = int(p.c), H = int(p.h), W = int(p.w), OH = int(p.oh), OW = int(p.ow);
  const int cvecs = C / 8;
  int b = int(blockIdx.x);
  const int cg = b % cgroups;
  b /= cgroups;
  const int tile = b % col_tiles;
  b /= col_tiles;
  const int strip = b % strips, n = b / strips;
  const int g = int(threadIdx.x) % group, slot = int(threadIdx.x) / group;
  const int cv = cg * group + g;
  const int c = min(cv, cvecs - 1) * 8;
  const int o0 = tile * (slots - 1);
  const int ow = o0 - 1 + slot;  // the output column this slot loads
  const bool loads = cv < cvecs && ow >= 0 && ow < OW;
  // The input columns this thread gathers: those whose last covering output column is ow (slot
  // 0's column belongs to the tile on the left).
  const bool gathers = loads && slot >= 1;
  const int col_begin = max(0, ow * S - aw.pad);
  const int col_end = ow == OW - 1 ? W : min(W, (ow + 1) * S - aw.pad);
  const int first = strip * strip_rows, count = min(OH, first + strip_rows) - first;
  const bool up = (strip & 1) != 0;
  const int step = up ? -1 : 1;
  const int slot_at = slot * group + g;

  Raw8<T> grad;
  Picks8<Pick> pick;
  const auto load_outputs = [&](int row, Raw8<T>& gv, Picks8<Pick>& pv) {
    if (loads && row >= 0 && row < OH) {
      const int o = ((n * OH + row) * OW + ow) * C + c;
      gv = load_raw(dy + o);
      pv = load_picks(picks + o);
    }
  };
  // count + 1 steps: down from the row above the strip, or up to it.
  int oh = up ? first + count - 1 : first - 1;
  load_outputs(oh, grad, pick);
  for (int i = 0; i <= count; ++i, oh += step) {
    const bool more = i < count;
    Raw8<T> next_grad;
    Picks8<Pick> next_pick;
    if (more) load_outputs(oh + step, next_grad, next_pick);
    if (loads && oh >= 0 && oh < OH) {
      ring.grad[oh % 3][slot_at] = grad;
      ring.pick[oh % 3][slot_at] = pick;
    }
    // The ring row a later step overwrites was last read two steps back, before this barrier.
    __syncthreads();
    // The output row whose input rows are now complete: this one walking down, the one below
    // walking up (its upper neighbour, this row, is in the ring now).
    const int done = up ? oh + 1 : oh;
    if (gathers && i >= 1 && done >= 0 && done < OH) {
      // Rows (and columns) whose last covering output is `done` (ow): two inside the plane, up
      // to kMaxOwned at the far edge, where those no window covers get 0. Their first covering
      // output is at most one before (a window of at most 3 at stride 2).
      const int row_begin = max(0, done * S - ah.pad);
      const int row_end = done == OH - 1 ? H : min(H, (done + 1) * S - ah.pad);
#pragma unroll
      for (int dr = 0; dr < kMaxOwned; ++dr) {
        const int ih = row_begin + dr;
        if (ih >= row_end) break;
        const int fh = first_covering<K, S>(ih, ah.pad);
#pragma unroll
        for (int dc = 0; dc < kMaxOwned; ++dc) {
          const int iw = col_begin + dc;
          if (iw >= col_end) break;
          const int fw = first_covering<K, S>(iw, aw.pad);
          float acc[8];
#pragma unroll
          for (int l = 0; l < 8; ++l) acc[l] = 0.f;
            // Increasing row, then column, as every gather here adds.
#pragma unroll
          for (int a = 0; a < 2; ++a) {
            const int oh_c = done - 1 + a;
            if (oh_c < fh) continue;
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int ow_c = ow - 1 + e;
              if (ow_c < fw) continue;
              const int at_slot = (slot - 1 + e) * group + g;
              float gv[8];
              unpack8<T>(ring.grad[oh_c % 3][at_slot], gv);
              const Picks8<Pick> pv = ring.pick[oh_c % 3][at_slot];
              if constexpr (kTaps) {
                const unsigned mine = unsigned((ih - (oh_c * S - ah.pad)) * K + (iw - (ow_c * S - aw.pad)));
#pragma unroll
                for (int l = 0; l < 4; ++l) {
                  acc[l] += ((pv.w[0].x >> (8 * l)) & 0xffu) == mine ? gv[l] : 0.f;
                  acc[l + 4] += ((pv.w[0].y >> (8 * l)) & 0xffu) == mine ? gv[l + 4] : 0.f;
                }
              } else {
                const int mine = ih * W + iw;
                const int kept[8] = {pv.w[0].x, pv.w[0].y, pv.w[0].z, pv.w[0].w,
                                     pv.w[1].x, pv.w[1].y, pv.w[1].z, pv.w[1].w};
#pragma unroll
                for (int l = 0; l < 8; ++l) acc[l] += kept[l] == mine ? gv[l] : 0.f;
              }
            }
          }
          store8<T>(dx + ((n * H + ih) * W + iw) * C + c, acc);
        }
      }
    }
    if (more) grad = next_grad, pick = next_pick;
  }
}

// Blocks of `threads` threads of `kernel` resident on the current device at once.
template <typename Kernel>
int resident_blocks(Kernel kernel, int threads, const char* what) {
  int device = 0, sms = 0, per_sm = 0;
#if GALLEY_GPU_HIP
  const bool ok = hipGetDevice(&device) == hipSuccess &&
                  hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, device) == hipSuccess &&
                  hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reinterpret_cast<const void*>(kernel),
                                                               threads, 0) == hipSuccess;
#else
  const bool ok = cudaGetDevice(&device) == cudaSuccess &&
                  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
                  cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                      &per_sm, reinterpret_cast<const void*>(kernel), threads, 0) == cudaSuccess;
#endif
  if (!ok || sms <= 0) {
    throw Error(Status::backend_error, std::string(what) +
                                           ": cannot query the multiprocessors and occupancy of device " +
                                           std::to_string(device));
  }
  return sms * std::max(1, per_sm);
}

// Strip length in output rows, for `blocks_per_strip` blocks per strip: the shortest strip whose blocks all
// fit on the device at once (one wave, so no block waits for another to finish); when even whole-plane strips
// take several waves, the strip of at least `min_rows` rows whose last wave is fullest.
int strip_rows_for(std::int64_t blocks_per_strip, int oh, int resident, int min_rows) {
  for (int rows = 1; rows <= oh; ++rows) {
    const std::int64_t strips = (oh + rows - 1) / rows;
    if (blocks_per_strip * strips <= resident) return rows;
    if (strips == 1) break;
  }
  int best = oh;
  double best_fill = 0;
  for (int rows = std::min(oh, min_rows); rows <= oh; ++rows) {
    const double waves = double(blocks_per_strip) * double((oh + rows - 1) / rows) / double(resident);
    const double fill = waves / std::ceil(waves);
    if (fill > best_fill + 1e-9) best = rows, best_fill = fill;
  }
  return best;
}

template <typename T, int K, int S, int kIdx>
void launch_strip_forward(const PoolParams& p, const T* x, T* y, void* idx, GpuStream stream) {
  auto kernel = pool_strip_forward_kernel<T, K, S, kIdx>;
  const std::int64_t columns = p.n * p.ow * (p.c / 8);
  const int resident = resident_blocks(kernel, kStripThreads, "gpu.pool.strips");
  // Blocks of one-row strips, as a real count where a strip's threads do not fill whole blocks.
  const std::int64_t per_row_blocks = std::max<std::int64_t>(1, columns / kStripThreads);
  const int rows = strip_rows_for(per_row_blocks, int(p.oh), resident, 4);
  const int strips = int((p.oh + rows - 1) / rows);
  const std::int64_t total = columns * strips;
  kernel<<<unsigned((total + kStripThreads - 1) / kStripThreads), kStripThreads, 0, stream>>>(
      p, x, y, idx, rows, strips, int(total));
}

template <int kIdx>
void launch_forward_as(const PoolParams& p, const void* x, void* y, void* idx, void* stream,
                       const char* what) {
  dispatch_dtype(p.dtype, "gpu.pool.strips", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    const GpuStream s = as_stream(stream);
    if (p.kh == 3) {
      p.sh == 2 ? launch_strip_forward<T, 3, 2, kIdx>(p, xs, ys, idx, s)
                : launch_strip_forward<T, 3, 1, kIdx>(p, xs, ys, idx, s);
    } else {
      p.sh == 2 ? launch_strip_forward<T, 2, 2, kIdx>(p, xs, ys, idx, s)
                : launch_strip_forward<T, 2, 1, kIdx>(p, xs, ys, idx, s);
    }
  });
  check_launch(what);
}

template <typename T, int K, typename Pick>
void launch_strip_gather(const PoolParams& p, const Pick* picks, const T* dy, T* dx, GpuStream stream) {
  auto kernel = pool_strip_gather_kernel<T, K, Pick>;
  const int cvecs = int(p.c / 8);
  int group = kBwdMaxGroup;
  while (group > 1 && group / 2 >= cvecs) group /= 2;
  const int cgroups = (cvecs + group - 1) / group;
  const int max_cols = kBwdMaxSlots - 1;
  const int col_tiles = int((p.ow + max_cols - 1) / max_cols);
  const int tile_cols = int((p.ow + col_tiles - 1) / col_tiles);
  const int slots = tile_cols + 1;
  const int threads = slots * group;
  const int resident = resident_blocks(kernel, threads, "gpu.pool.strips");
  const std::int64_t per_strip = p.n * col_tiles * cgroups;
  const int rows = strip_rows_for(per_strip, int(p.oh), resident, 4);
  const int strips = int((p.oh + rows - 1) / rows);
  kernel<<<unsigned(per_strip * strips), threads, 0, stream>>>(p, picks, dy, dx, group, slots, col_tiles,
                                                               cgroups, rows, strips);
}

template <typename Pick>
void launch_gather_as(const PoolParams& p, const Pick* picks, const void* dy, void* dx, void* stream) {
  dispatch_dtype(p.dtype, "gpu.pool.strips", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* dys = static_cast<const T*>(dy);
    T* dxs = static_cast<T*>(dx);
    const GpuStream s = as_stream(stream);
    p.kh == 3 ? launch_strip_gather<T, 3, Pick>(p, picks, dys, dxs, s)
              : launch_strip_gather<T, 2, Pick>(p, picks, dys, dxs, s);
  });
  check_launch("gpu.pool.strips (backward)");
}

}  // namespace

bool pool_strips_apply(const PoolParams& p, bool backward, std::string* why) {
  const auto no = [&](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return false;
  };
  if (!p.nhwc) return no("nchw (walks nhwc strips of 8 channels)");
  if (p.c % 8 != 0) return no("channels " + std::to_string(p.c) + " not a multiple of 8");
  if (p.adaptive) return no("adaptive or global window (needs a fixed kernel window)");
  if (p.kh != p.kw || (p.kh != 2 && p.kh != 3)) {
    return no("window " + std::to_string(p.kh) + "x" + std::to_string(p.kw) + " (needs 2x2 or 3x3)");
  }
  if (p.sh != p.sw || (p.sh != 1 && p.sh != 2) || (backward && p.sh != 2)) {
    return no("stride " + std::to_string(p.sh) + "x" + std::to_string(p.sw) +
              (backward ? " (backward needs 2x2)" : " (needs 1x1 or 2x2)"));
  }
  if (backward && p.mode != 0) return no("average backward (max only)");
  if (backward) {
    // The far edge's last output row (column) finalises what its window holds and what no window
    // reaches: at most kMaxOwned for these windows, checked rather than assumed.
    const std::int64_t edge_rows = p.h - std::max<std::int64_t>(0, (p.oh - 1) * p.sh - p.ph);
    const std::int64_t edge_cols = p.w - std::max<std::int64_t>(0, (p.ow - 1) * p.sw - p.pw);
    if (edge_rows > kMaxOwned || edge_cols > kMaxOwned) {
      return no("last window leaves " + std::to_string(std::max(edge_rows, edge_cols)) +
                " edge rows or columns (at most " + std::to_string(kMaxOwned) + ")");
    }
  }
  // Every element offset and window bound in int, with a block's worth of slack.
  const double limit = 2147483647.0 - 65536.0;
  if (double(p.in_elems()) >= limit || double(p.out_elems()) >= limit ||
      double(p.oh) * double(p.sh) + double(p.kh) + double(p.h) >= limit ||
      double(p.ow) * double(p.sw) + double(p.kw) + double(p.w) >= limit) {
    return no("more than 2^31 elements");
  }
  return true;
}

void launch_pool_strips_forward(const PoolParams& p, const void* x, void* y, std::int32_t* idx,
                                void* stream) {
  if (idx != nullptr) {
    launch_forward_as<1>(p, x, y, idx, stream, "gpu.pool.strips (forward)");
  } else {
    launch_forward_as<0>(p, x, y, nullptr, stream, "gpu.pool.strips (forward)");
  }
}

void launch_pool_strips_find_taps(const PoolParams& p, const void* x, std::uint8_t* taps, void* stream) {
  launch_forward_as<2>(p, x, nullptr, taps, stream, "gpu.pool.strips (finding the maxima)");
}

void launch_pool_strips_kept_backward(const PoolParams& p, const std::int32_t* idx, const void* dy, void* dx,
                                      void* stream) {
  launch_gather_as(p, idx, dy, dx, stream);
}

void launch_pool_strips_taps_backward(const PoolParams& p, const std::uint8_t* taps, const void* dy, void* dx,
                                      void* stream) {
  launch_gather_as(p, taps, dy, dx, stream);
}

}  // namespace galley::backends::gpu
