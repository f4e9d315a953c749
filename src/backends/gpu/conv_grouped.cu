// gpu.conv.grouped's kernel: grouped convolution with few channels per group (ResNeXt's 32 groups
// of 4-32 channels), where an implicit GEMM per group wastes most of its tile and a vendor
// library falls far below the memory roofline.
//
// Tensor-core path (CUDA, f16/bf16 NHWC, cg % 8 == 0, kg % 8 == 0): one warp computes 16 output
// pixels x 8 output channels of one group with mma.sync m16n8k8, one instruction per (tap, 8-input-
// channel chunk). Operands come straight from global memory in the mma register layout: a lane
// reads 2 channels (4 bytes) of 2 pixels, so a quad reads one group's 16 contiguous bytes and the
// 8 warps of a block read 8 neighbouring groups. Taps re-read neighbours through L1; weights are
// small and stay in L1/L2. No shared memory, no barriers: the kernel is latency-bound only if
// occupancy is low, so it keeps register use small.
//
// Tiled tensor-core path (CUDA, f16/bf16 NHWC, cg == kg == 8, 3x3: ResNeXt-50's stage-2 layer):
// the path above issues three 4-byte global loads and their index math per m16n8k8, so it is bound
// by load instructions, not by memory or the tensor cores. Here a block stages an input tile (the
// rows a band of tile_rows output rows reads, every column, the 64 channels of 8 groups) in shared
// memory once with 16-byte cp.async, zeros where the padding is; each warp then computes one
// group's 16-pixel x 8-channel tiles over the band with ldmatrix.x4 + m16n8k16, two taps per
// instruction (K = tap a's 8 channels, then tap b's), plus one m16n8k8 for the ninth tap. The
// group's weights sit in 9 registers per lane for the whole band. Outputs go through shared memory
// so each pixel's 128 bytes leave in 16-byte, contiguous stores.
#include "conv_kernel_detail.cuh"
#include "conv_mma.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;

#if GALLEY_GPU_MMA
// kTaps = 9: a 3x3 filter; kChunks = cg / 8 when 1 or 2. Compile-time counts let the compiler issue
// every tap's loads before the first mma (0 = run-time count).
template <typename T, int kTaps, int kChunks>
__global__ void __launch_bounds__(kThreads)
    grouped_mma_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                       std::int64_t tasks) {
  const int lane = threadIdx.x & 31;
  const int gid = lane >> 2, tig = lane & 3;
  const int RS = kTaps > 0 ? kTaps : cp.r * cp.s;
  const int ntiles = cp.kg / 8, kchunks = kChunks > 0 ? kChunks : cp.cg / 8;
  const int PQ = cp.p * cp.q;
  const int pixels = cp.n * PQ;
  // tasks <= pixels / 16 * k / 8 < 2^31: 32-bit index math.
  const unsigned warps = gridDim.x * (blockDim.x >> 5);
  for (unsigned task = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); task < unsigned(tasks); task += warps) {
    // task = (pixel tile, group, n-tile), n-tile fastest, then group: a block's warps share pixels.
    const int nt = int(task % unsigned(ntiles));
    const unsigned rest = task / unsigned(ntiles);
    const int g = int(rest % unsigned(cp.groups));
    const int tile = int(rest / unsigned(cp.groups));
    int ih0[2], iw0[2], xoff[2];
    bool pix_ok[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int pix = tile * 16 + gid + h * 8;
      pix_ok[h] = pix < pixels;
      const int pp = pix_ok[h] ? pix : 0;
      const int nn = pp / PQ, pq = pp - nn * PQ;
      const int op = pq / cp.q, oq = pq - op * cp.q;
      ih0[h] = pix_ok[h] ? op * cp.stride_h - cp.pad_h : -(1 << 28);
      iw0[h] = oq * cp.stride_w - cp.pad_w;
      xoff[h] = nn * cp.h * cp.w * cp.c + g * cp.cg + tig * 2;
    }
    const int kout = g * cp.kg + nt * 8;
    const T* wrow = w + std::int64_t(kout + gid) * RS * cp.cg + tig * 2;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll(kTaps > 0 ? kTaps : 1)
    for (int rs = 0; rs < RS; ++rs) {
      const int r = kTaps == 9 ? rs / 3 : rs / cp.s;
      const int s = rs - r * (kTaps == 9 ? 3 : cp.s);
      const T* xa[2];
      bool ok[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int ih = ih0[h] + r * cp.dil_h, iw = iw0[h] + s * cp.dil_w;
        ok[h] = unsigned(ih) < unsigned(cp.h) && unsigned(iw) < unsigned(cp.w);
        xa[h] = x + xoff[h] + (ih * cp.w + iw) * cp.c;
      }
#pragma unroll(kChunks > 0 ? kChunks : 1)
      for (int kc = 0; kc < kchunks; ++kc) {
        const unsigned a0 = ok[0] ? __ldg(reinterpret_cast<const unsigned*>(xa[0] + kc * 8)) : 0u;
        const unsigned a1 = ok[1] ? __ldg(reinterpret_cast<const unsigned*>(xa[1] + kc * 8)) : 0u;
        const unsigned b = __ldg(reinterpret_cast<const unsigned*>(wrow + rs * cp.cg + kc * 8));
        mma::mma_1688<T>(acc, a0, a1, b);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!pix_ok[h]) continue;
      const int pix = tile * 16 + gid + h * 8;
      *reinterpret_cast<unsigned*>(y + std::int64_t(pix) * cp.k + kout + tig * 2) =
          pack2<T>(acc[2 * h], acc[2 * h + 1]);
    }
  }
}
// Tiled kernel: 8 groups (64 channels) per block, one warp per group. A pixel of the staged input
// tile takes 144 bytes (64 channels + 16 bytes of padding), so the 8 rows of an ldmatrix matrix
// (8 neighbouring pixels) fall in 8 different 16-byte bank groups.
constexpr int kTileGroups = 8;
constexpr int kTileThreads = 32 * kTileGroups;
constexpr int kTilePixelBytes = kTileGroups * 16 + 16;
constexpr int kTileMaxSmem = 48 * 1024;

struct TileShape {
  int rows = 0;              // output rows per block (0: the tiled kernel does not fit)
  int in_rows = 0, in_cols = 0;
  int smem = 0;
};

TileShape tile_shape(const ConvParams& p, int rows) {
  TileShape t;
  t.rows = rows;
  t.in_rows = (rows - 1) * p.stride_h + (p.r - 1) * p.dil_h + 1;
  t.in_cols = (p.q - 1) * p.stride_w + (p.s - 1) * p.dil_w + 1;
  t.smem = (t.in_rows * t.in_cols + rows * p.q) * kTilePixelBytes;
  return t;
}

// The tiled kernel's shape for `p`: 4 output rows per block, fewer if the tile would pass 48 KiB
// of shared memory; rows 0 when the kernel does not apply or even one row does not fit. Fewer rows
// load the filter's halo rows for fewer outputs (one output row of a 3x3 reads three input rows);
// more rows grow the tile without gaining speed.
TileShape grouped8_tile(const ConvParams& p) {
  if (!(p.nhwc && (p.dtype == DType::f16 || p.dtype == DType::bf16) && p.cg == 8 && p.kg == 8 && p.r == 3 &&
        p.s == 3))
    return {};
  for (int rows : {4, 2, 1})
    if (tile_shape(p, rows).smem <= kTileMaxSmem) return tile_shape(p, std::min(rows, p.p));
  return {};
}

template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    grouped8_tile_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                         TileShape ts) {
  extern __shared__ __align__(16) unsigned char tile_smem[];
  unsigned char* const in_s = tile_smem;
  unsigned char* const out_s = tile_smem + ts.in_rows * ts.in_cols * kTilePixelBytes;
  const int slices = (cp.groups + kTileGroups - 1) / kTileGroups;
  const int bands = (cp.p + ts.rows - 1) / ts.rows;
  const int slice = blockIdx.x % slices;
  const int band = (blockIdx.x / slices) % bands;
  const int n = blockIdx.x / slices / bands;
  const int o0 = band * ts.rows;
  const int rows_here = min(ts.rows, cp.p - o0);
  const int tile_pixels = rows_here * cp.q;
  const int g0 = slice * kTileGroups;

  // 1. The input tile, 16 bytes (one group's 8 channels of one pixel) per copy; zeros outside.
  const int ih0 = o0 * cp.stride_h - cp.pad_h;
  const int chunks = ts.in_rows * ts.in_cols * kTileGroups;
  const unsigned in_base = mma::smem_addr(in_s);
  for (int i = threadIdx.x; i < chunks; i += kTileThreads) {
    const int grp = i % kTileGroups, pix = i / kTileGroups;
    const int ry = pix / ts.in_cols, rx = pix - ry * ts.in_cols;
    const int ih = ih0 + ry, iw = rx - cp.pad_w;
    const bool ok = g0 + grp < cp.groups && unsigned(ih) < unsigned(cp.h) && unsigned(iw) < unsigned(cp.w);
    const T* src = ok ? x + ((n * cp.h + ih) * cp.w + iw) * cp.c + (g0 + grp) * 8 : x;
    mma::cp_async16(in_base + pix * kTilePixelBytes + grp * 16, src, ok ? 16 : 0);
  }
  mma::cp_async_commit();

  // 2. Meanwhile, this warp's group's weights (KRSC, 8 x 9 x 8): b[tap] = channels tig*2, tig*2+1
  // of output channel gid at that tap, the B operand's layout for either mma shape.
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int gid = lane >> 2, tig = lane & 3;
  const int g = g0 + warp;
  const bool active = g < cp.groups;
  unsigned b[9];
  const T* wk = w + (g * 8 + gid) * 72 + tig * 2;
#pragma unroll
  for (int tap = 0; tap < 9; ++tap) b[tap] = active ? __ldg(reinterpret_cast<const unsigned*>(wk + tap * 8)) : 0u;
  // Byte offset of this lane's tap in each k-step: lanes 0-15 give the rows of tap 2j (K 0-7),
  // lanes 16-31 those of tap 2j + 1 (K 8-15); step 4 is tap 8 alone (m16n8k8, lanes 16-31 unused).
  int tap_off[5];
#pragma unroll
  for (int j = 0; j < 5; ++j) {
    const int tap = j < 4 ? 2 * j + (lane >> 4) : 8;
    const int r = tap / 3, s = tap - r * 3;
    tap_off[j] = (r * cp.dil_h * ts.in_cols + s * cp.dil_w) * kTilePixelBytes;
  }
  mma::cp_async_wait<0>();
  __syncthreads();

  // 3. 16 output pixels x 8 channels per step; pixel lane & 15 supplies the ldmatrix row address.
  if (active) {
    const unsigned warp_base = in_base + warp * 16;
    for (int m0 = 0; m0 < tile_pixels; m0 += 16) {
      int t = m0 + (lane & 15);
      if (t >= tile_pixels) t = 0;  // a valid address; the row is never stored
      const int ry = t / cp.q, rx = t - ry * cp.q;
      const unsigned base = warp_base + (ry * cp.stride_h * ts.in_cols + rx * cp.stride_w) * kTilePixelBytes;
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
      unsigned a[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        mma::ldmatrix_x4(a, base + tap_off[j]);
        mma::mma_16816<T>(acc, a, b[2 * j], b[2 * j + 1]);
      }
      mma::ldmatrix_x4(a, base + tap_off[4]);
      mma::mma_1688<T>(acc, a[0], a[1], b[8]);
      // acc[0..1]: pixel m0 + gid, channels tig*2, +1; acc[2..3]: pixel m0 + gid + 8.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int pix = m0 + gid + 8 * h;
        if (pix < tile_pixels)
          *reinterpret_cast<unsigned*>(out_s + pix * kTilePixelBytes + warp * 16 + tig * 4) =
              pack2<T>(acc[2 * h], acc[2 * h + 1]);
      }
    }
  }
  __syncthreads();

  // 4. The output tile: one 16-byte store per (pixel, group), a pixel's groups side by side.
  const int out_chunks = tile_pixels * kTileGroups;
  for (int i = threadIdx.x; i < out_chunks; i += kTileThreads) {
    const int grp = i % kTileGroups, t = i / kTileGroups;
    if (g0 + grp >= cp.groups) continue;
    const int ry = t / cp.q, rx = t - ry * cp.q;
    const uint4 v = *reinterpret_cast<const uint4*>(out_s + t * kTilePixelBytes + grp * 16);
    *reinterpret_cast<uint4*>(y + ((n * cp.p + o0 + ry) * cp.q + rx) * cp.k + (g0 + grp) * 8) = v;
  }
}
#endif

// SIMT path, any dtype and layout: a block owns one (image, group); a thread owns kStrip outputs
// along a row for 8 output channels at a time, so each input value feeds 8 FMAs and each weight
// (a block-uniform shared-memory read, i.e. a broadcast) feeds kStrip. Weights of the group are
// staged as fp32 [c][r*s][k].
constexpr int kSimtThreads = 128;
constexpr int kStrip = 4;
constexpr int kKb = 8;
constexpr int kMaxSmemFloats = 12 * 1024;

template <typename T, bool kNhwc, int R, int S>
__global__ void __launch_bounds__(kSimtThreads)
    grouped_simt_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y) {
  extern __shared__ float wsm[];
  const int RR = R > 0 ? R : cp.r, SS = S > 0 ? S : cp.s, RS = RR * SS;
  constexpr int kUnrollR = R > 0 ? R : 1, kUnrollS = S > 0 ? S : 1;  // 1: run-time trip count
  const int n = blockIdx.y / cp.groups, g = blockIdx.y % cp.groups;
  const int cgrs = cp.cg * RS;
  for (int i = threadIdx.x; i < cp.kg * cgrs; i += blockDim.x) {
    const int k = i / cgrs, rem = i - k * cgrs;
    const int c = rem / RS, rs = rem - c * RS;
    const int src = kNhwc ? rs * cp.cg + c : rem;  // KRSC or KCRS within the output channel
    wsm[rem * cp.kg + k] = ldg_f32(w + std::int64_t(g * cp.kg + k) * cgrs + src);
  }
  __syncthreads();

  const int qs = (cp.q + kStrip - 1) / kStrip;
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= cp.p * qs) return;
  const int op = t / qs, q0 = (t - op * qs) * kStrip;
  const std::int64_t row = kNhwc ? std::int64_t(cp.w) * cp.c : cp.w;
  const std::int64_t col = kNhwc ? cp.c : 1;
  const std::int64_t chan = kNhwc ? 1 : std::int64_t(cp.h) * cp.w;
  const T* x_grp = kNhwc ? x + std::int64_t(n) * cp.h * cp.w * cp.c + g * cp.cg
                         : x + (std::int64_t(n) * cp.c + g * cp.cg) * cp.h * cp.w;
  const bool vec_w = cp.kg % 4 == 0;
  for (int kb = 0; kb < cp.kg; kb += kKb) {
    float acc[kStrip][kKb];
#pragma unroll
    for (int j = 0; j < kStrip; ++j)
#pragma unroll
      for (int e = 0; e < kKb; ++e) acc[j][e] = 0.f;
    for (int c = 0; c < cp.cg; ++c) {
      const T* x_c = x_grp + c * chan;
#pragma unroll kUnrollR
      for (int r = 0; r < RR; ++r) {
        const int ih = op * cp.stride_h - cp.pad_h + r * cp.dil_h;
        const bool row_ok = unsigned(ih) < unsigned(cp.h);
        const T* x_row = x_c + (row_ok ? ih : 0) * row;
#pragma unroll kUnrollS
        for (int s = 0; s < SS; ++s) {
          float xv[kStrip];
#pragma unroll
          for (int j = 0; j < kStrip; ++j) {
            const int iw = (q0 + j) * cp.stride_w - cp.pad_w + s * cp.dil_w;
            xv[j] = (row_ok && unsigned(iw) < unsigned(cp.w)) ? ldg_f32(x_row + iw * col) : 0.f;
          }
          const float* wp = wsm + (c * RS + r * SS + s) * cp.kg + kb;
          float wv[kKb];
          if (vec_w && kb + kKb <= cp.kg) {
            const float4 a = *reinterpret_cast<const float4*>(wp);
            const float4 b = *reinterpret_cast<const float4*>(wp + 4);
            wv[0] = a.x, wv[1] = a.y, wv[2] = a.z, wv[3] = a.w, wv[4] = b.x, wv[5] = b.y, wv[6] = b.z, wv[7] = b.w;
          } else {
#pragma unroll
            for (int e = 0; e < kKb; ++e) wv[e] = kb + e < cp.kg ? wp[e] : 0.f;
          }
#pragma unroll
          for (int j = 0; j < kStrip; ++j)
#pragma unroll
            for (int e = 0; e < kKb; ++e) acc[j][e] = fmaf(xv[j], wv[e], acc[j][e]);
        }
      }
    }
#pragma unroll
    for (int e = 0; e < kKb; ++e) {
      const int k = g * cp.kg + kb + e;
      if (kb + e >= cp.kg) break;
#pragma unroll
      for (int j = 0; j < kStrip; ++j) {
        const int oq = q0 + j;
        if (oq >= cp.q) break;
        const std::int64_t yi = kNhwc ? ((std::int64_t(n) * cp.p + op) * cp.q + oq) * cp.k + k
                                      : ((std::int64_t(n) * cp.k + k) * cp.p + op) * cp.q + oq;
        y[yi] = from_f32<T>(acc[j][e]);
      }
    }
  }
}

}  // namespace

bool grouped_uses_mma(const ConvParams& p) {
  return GALLEY_GPU_MMA && p.nhwc && (p.dtype == DType::f16 || p.dtype == DType::bf16) && p.cg % 8 == 0 &&
         p.kg % 8 == 0;
}

bool grouped_simt_fits(const ConvParams& p) {
  return std::int64_t(p.kg) * p.cg * p.r * p.s <= kMaxSmemFloats && std::int64_t(p.n) * p.groups <= 65535;  // grid.y
}

std::string grouped_detail(const ConvParams& p) {
#if GALLEY_GPU_MMA
  if (const TileShape ts = grouped8_tile(p); ts.rows > 0)
    return "8 groups x " + std::to_string(ts.rows) + " output rows per block staged in shared memory, ldmatrix + mma m16n8k16";
#endif
  return grouped_uses_mma(p) ? "mma.sync m16n8k8 per group, operands from global/L1"
                             : "SIMT, 4 outputs x 8 channels per thread, group weights in shared memory";
}

void launch_conv_grouped(const ConvParams& p, const void* x, const void* w, void* y, void* stream) {
  if (!grouped_uses_mma(p)) {
    if (!grouped_simt_fits(p))
      throw Error(Status::unsupported, "gpu.conv.grouped: a group's weights exceed 48 KiB of shared memory");
    const int qs = (p.q + kStrip - 1) / kStrip;
    const dim3 grid(ceil_div(std::int64_t(p.p) * qs, kSimtThreads), p.n * p.groups);
    const int smem = p.kg * p.cg * p.r * p.s * int(sizeof(float));
    const bool k3 = p.r == 3 && p.s == 3;
    dispatch_dtype(p.dtype, "gpu.conv.grouped", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const T* xt = static_cast<const T*>(x);
      const T* wt = static_cast<const T*>(w);
      T* yt = static_cast<T*>(y);
      const GpuStream s = as_stream(stream);
      if (p.nhwc)
        k3 ? grouped_simt_kernel<T, true, 3, 3><<<grid, kSimtThreads, smem, s>>>(p, xt, wt, yt)
           : grouped_simt_kernel<T, true, 0, 0><<<grid, kSimtThreads, smem, s>>>(p, xt, wt, yt);
      else
        k3 ? grouped_simt_kernel<T, false, 3, 3><<<grid, kSimtThreads, smem, s>>>(p, xt, wt, yt)
           : grouped_simt_kernel<T, false, 0, 0><<<grid, kSimtThreads, smem, s>>>(p, xt, wt, yt);
    });
    check_launch("gpu.conv.grouped");
    return;
  }
#if GALLEY_GPU_MMA
  const GpuStream s = as_stream(stream);
  if (const TileShape ts = grouped8_tile(p); ts.rows > 0) {
    const int blocks = p.n * ((p.p + ts.rows - 1) / ts.rows) * ((p.groups + kTileGroups - 1) / kTileGroups);
    if (p.dtype == DType::f16)
      grouped8_tile_kernel<__half><<<blocks, kTileThreads, ts.smem, s>>>(
          p, static_cast<const __half*>(x), static_cast<const __half*>(w), static_cast<__half*>(y), ts);
    else
      grouped8_tile_kernel<bf16_t><<<blocks, kTileThreads, ts.smem, s>>>(
          p, static_cast<const bf16_t*>(x), static_cast<const bf16_t*>(w), static_cast<bf16_t*>(y), ts);
    check_launch("gpu.conv.grouped");
    return;
  }
  const std::int64_t tiles = (p.pixels() + 15) / 16;
  const std::int64_t tasks = tiles * p.groups * (p.kg / 8);
  const int warps_per_block = kThreads / 32;
  const int blocks = int(std::min<std::int64_t>((tasks + warps_per_block - 1) / warps_per_block, 1 << 20));
  auto go = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(w);
    T* yt = static_cast<T*>(y);
    const bool k3 = p.r == 3 && p.s == 3;
    if (k3 && p.cg == 8)
      grouped_mma_kernel<T, 9, 1><<<blocks, kThreads, 0, s>>>(p, xt, wt, yt, tasks);
    else if (k3 && p.cg == 16)
      grouped_mma_kernel<T, 9, 2><<<blocks, kThreads, 0, s>>>(p, xt, wt, yt, tasks);
    else if (k3)
      grouped_mma_kernel<T, 9, 0><<<blocks, kThreads, 0, s>>>(p, xt, wt, yt, tasks);
    else
      grouped_mma_kernel<T, 0, 0><<<blocks, kThreads, 0, s>>>(p, xt, wt, yt, tasks);
  };
  if (p.dtype == DType::f16)
    go(static_cast<__half*>(nullptr));
  else
    go(static_cast<bf16_t*>(nullptr));
  check_launch("gpu.conv.grouped");
#else
  (void)x, (void)w, (void)y, (void)stream;
#endif
}

}  // namespace galley::backends::gpu
