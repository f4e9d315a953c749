// gpu.conv.depthwise's kernels (groups == c, any channel multiplier k / c). Depthwise work is a
// handful of FMAs per byte, so the kernels aim at the memory roofline: each input and output byte
// should cross DRAM once, with the 3x3 (or r x s) neighbourhood re-read from L1.
//
// NHWC, multiplier 1, c % 8 == 0: a thread owns 8 channels (one 16-byte vector of f16/bf16, two of
// f32) at kStrip output pixels along a row; the block stages all weights in shared memory as
// [tap][channel] fp32 so a warp reads them conflict-free. Consecutive threads take consecutive
// channel vectors, so every warp-wide load is contiguous.
// NHWC 3x3, stride 1, dilation 1, multiplier 1, c % 4 == 0 (MobileNet's depthwise layers) has its
// own kernel, `depthwise_nhwc_3x3_tile_kernel`: the vec8 kernel above re-reads every weight from
// shared memory for every output (two 16-byte shared loads per tap per pixel: more shared-memory
// traffic than the tensors' own), so there a thread keeps its channels' weights in registers and
// walks down a band of output rows with a tile of 8 channels (one 16-byte vector of f16/bf16; 4 for
// f32 or c % 8 != 0) x 4 columns, reading each input row once: input row i feeds output rows i,
// i-1, i-2 (filter rows 0, 1, 2), held in a ring of three accumulator rows. It keeps one row in
// flight in registers during the FMAs of the last and asks L2 for the rows after that.
// On compute capability 9.0+, where c * sizeof(T) % 16 == 0 and a row's threads fit one block,
// `depthwise_nhwc_3x3_rows_kernel` does the same arithmetic on whole image rows staged through shared
// memory by bulk copies (see there); the tile kernel stays for the rest (sm_80, HIP, odd channels).
// Anything else (NCHW, multipliers, odd channel counts): a thread owns kStrip outputs along a row of
// one channel plane; loads are scalar but coalesced along the row.
#include <atomic>

#include "conv_device.cuh"
#include "conv_kernel_detail.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kStrip = 4;
constexpr int kMaxSmemWeights = 12 * 1024;  // floats: 48 KiB

// The tile kernel: 128-thread blocks, kTileCols output columns per thread, tile_band() output rows,
// kTileAhead input rows prefetched into L2. A thread loads two halo columns beside its own, so four
// own columns spend fewer loads per output than two; eight would not fit the registers. The
// prefetch distance and the per-thread prefetch (rather than one cp.async.bulk.prefetch per strip)
// are the fastest of the settings tried; no prefetch at all leaves the loads' latency exposed.
constexpr int kTileThreads = 128;
constexpr int kTileCols = 4;
constexpr int kTileAhead = 2;

// R, S > 0: filter size known at compile time, every loop unrolled so all loads of a thread are in
// flight at once (the kernels are latency-bound otherwise); R = S = 0: run-time sizes.
template <typename T, int R, int S>
__global__ void __launch_bounds__(kThreads, 2)
    depthwise_nhwc_vec8_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y) {
  extern __shared__ float ws[];  // [r*s][c]
  const int C = cp.c;
  const int RR = R > 0 ? R : cp.r, SS = S > 0 ? S : cp.s, RS = RR * SS;
  constexpr int kUnrollR = R > 0 ? R : 1, kUnrollS = S > 0 ? S : 1;  // 1: run-time trip count
  for (int i = threadIdx.x; i < C * RS; i += blockDim.x) {
    const int c = i % C, rs = i / C;
    ws[i] = ldg_f32(w + c * RS + rs);  // weights are k x 1 x r x s in both layouts
  }
  __syncthreads();

  const int vecs = C / 8;
  const int strips = (cp.q + kStrip - 1) / kStrip;
  // 32-bit index math (64-bit division is a long software sequence): check() bounds every tensor
  // below 2^31 elements, and total <= the output's element count.
  const unsigned total = unsigned(cp.n) * cp.p * strips * vecs;
  // Unit stride and dilation along w: the strip's outputs share input columns, load each once.
  const bool sliding = cp.stride_w == 1 && cp.dil_w == 1;
  for (unsigned t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
    const int v = int(t % unsigned(vecs));
    unsigned rest = t / unsigned(vecs);
    const int strip = int(rest % unsigned(strips));
    rest /= unsigned(strips);
    const int op = int(rest % unsigned(cp.p));
    const int n = int(rest / unsigned(cp.p));
    const int c0 = v * 8;
    const int q0 = strip * kStrip;
    const T* x_img = x + std::int64_t(n) * cp.h * cp.w * C + c0;
    const float* wc = ws + c0;
    float acc[kStrip][8];
#pragma unroll
    for (int j = 0; j < kStrip; ++j)
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[j][e] = 0.f;
    auto fma8 = [&](float (&a)[8], const float (&xv)[8], int rs) {
      const float4 w0 = *reinterpret_cast<const float4*>(wc + rs * C);
      const float4 w1 = *reinterpret_cast<const float4*>(wc + rs * C + 4);
      a[0] = fmaf(xv[0], w0.x, a[0]);
      a[1] = fmaf(xv[1], w0.y, a[1]);
      a[2] = fmaf(xv[2], w0.z, a[2]);
      a[3] = fmaf(xv[3], w0.w, a[3]);
      a[4] = fmaf(xv[4], w1.x, a[4]);
      a[5] = fmaf(xv[5], w1.y, a[5]);
      a[6] = fmaf(xv[6], w1.z, a[6]);
      a[7] = fmaf(xv[7], w1.w, a[7]);
    };
#pragma unroll kUnrollR
    for (int r = 0; r < RR; ++r) {
      const int ih = op * cp.stride_h - cp.pad_h + r * cp.dil_h;
      const bool row_ok = unsigned(ih) < unsigned(cp.h);
      const T* x_row = x_img + std::int64_t(row_ok ? ih : 0) * cp.w * C;
      if (sliding && S > 0) {
#pragma unroll
        for (int col = 0; col < kStrip + (S > 0 ? S : 1) - 1; ++col) {
          const int iw = q0 - cp.pad_w + col;
          float xv[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
          if (row_ok && unsigned(iw) < unsigned(cp.w)) load8(x_row + iw * C, xv);
#pragma unroll
          for (int s = 0; s < (S > 0 ? S : 1); ++s) {
            const int j = col - s;
            if (j >= 0 && j < kStrip) fma8(acc[j], xv, r * SS + s);
          }
        }
      } else {
#pragma unroll
        for (int j = 0; j < kStrip; ++j)
#pragma unroll kUnrollS
          for (int s = 0; s < SS; ++s) {
            const int iw = (q0 + j) * cp.stride_w - cp.pad_w + s * cp.dil_w;
            float xv[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            if (row_ok && unsigned(iw) < unsigned(cp.w)) load8(x_row + iw * C, xv);
            fma8(acc[j], xv, r * SS + s);
          }
      }
    }
    T* y_row = y + (std::int64_t(n) * cp.p + op) * cp.q * C + c0;
#pragma unroll
    for (int j = 0; j < kStrip; ++j)
      if (q0 + j < cp.q) store8(y_row + std::int64_t(q0 + j) * C, acc[j]);
  }
}

// Asks L2 for the line holding `ptr` without tying up a register until it arrives (a load would).
__device__ __forceinline__ void prefetch_l2(const void* ptr) {
#if !GALLEY_GPU_HIP
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(ptr));
#else
  (void)ptr;
#endif
}

// kVec consecutive channels of T as raw 32-bit words: 8 or 16 bytes, loaded and stored in one or
// two vector accesses, converted to float only once they are used.
template <typename T, int kVec>
struct RawVec {
  static constexpr int kWords = kVec * int(sizeof(T)) / 4;
  std::uint32_t u[kWords];

  __device__ __forceinline__ void load(const T* ptr) {
    if constexpr (kWords % 4 == 0) {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i) {
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(ptr) + i);
        u[4 * i] = v.x, u[4 * i + 1] = v.y, u[4 * i + 2] = v.z, u[4 * i + 3] = v.w;
      }
    } else {
      static_assert(kWords == 2, "8 or 16-byte vectors");
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(ptr));
      u[0] = v.x, u[1] = v.y;
    }
  }
  // From shared memory (16 or 8-byte aligned).
  __device__ __forceinline__ void load_shared(const T* ptr) {
    if constexpr (kWords % 4 == 0) {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i) {
        const uint4 v = reinterpret_cast<const uint4*>(ptr)[i];
        u[4 * i] = v.x, u[4 * i + 1] = v.y, u[4 * i + 2] = v.z, u[4 * i + 3] = v.w;
      }
    } else {
      const uint2 v = *reinterpret_cast<const uint2*>(ptr);
      u[0] = v.x, u[1] = v.y;
    }
  }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < kWords; ++i) u[i] = 0u;
  }
  __device__ __forceinline__ void to_float(float (&f)[kVec]) const {
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (std::is_same_v<T, float>) {
        f[i] = __uint_as_float(u[i]);
      } else {
        const float2 v = unpack2(u[i], static_cast<T*>(nullptr));
        f[2 * i] = v.x, f[2 * i + 1] = v.y;
      }
    }
  }
  __device__ __forceinline__ void from_float(const float (&f)[kVec]) {
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (std::is_same_v<T, float>)
        u[i] = __float_as_uint(f[i]);
      else
        u[i] = pack2<T>(f[2 * i], f[2 * i + 1]);
    }
  }
  __device__ __forceinline__ void store(T* ptr) const {
    if constexpr (kWords % 4 == 0) {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i)
        reinterpret_cast<uint4*>(ptr)[i] = make_uint4(u[4 * i], u[4 * i + 1], u[4 * i + 2], u[4 * i + 3]);
    } else {
      *reinterpret_cast<uint2*>(ptr) = make_uint2(u[0], u[1]);
    }
  }
};

// Two floats rounded to T and packed lo | hi << 16 in one instruction where the target has one
// (sm_80+: cvt.rn.{f16,bf16}x2.f32); the integer rounding of pack2 costs ~6 instructions a value.
template <typename T>
__device__ __forceinline__ std::uint32_t pack2_rn(float lo, float hi) {
#if !GALLEY_GPU_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  std::uint32_t u;
  if constexpr (std::is_same_v<T, __half>)
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(u) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(u) : "f"(hi), "f"(lo));
  return u;
#else
  return pack2<T>(lo, hi);
#endif
}

template <typename T, int kVec>
__device__ __forceinline__ void store_rounded(T* ptr, const float (&f)[kVec]) {
  RawVec<T, kVec> out;
  if constexpr (std::is_same_v<T, float>) {
    out.from_float(f);
  } else {
#pragma unroll
    for (int i = 0; i < kVec / 2; ++i) out.u[i] = pack2_rn<T>(f[2 * i], f[2 * i + 1]);
  }
  out.store(ptr);
}

// The 3x3 kernels' shared pieces. Weights are c x 1 x 3 x 3: a thread's kVec channels starting at
// c0 are 9 * kVec consecutive values, kept as fp32 in wt[e * 9 + rs].
template <typename T, int kVec>
__device__ __forceinline__ void load_weights_3x3(const T* __restrict__ w, int c0, float (&wt)[9 * kVec]) {
#pragma unroll
  for (int i = 0; i < 9; ++i) {
    RawVec<T, kVec> raw;
    raw.load(w + c0 * 9 + i * kVec);
    float chunk[kVec];
    raw.to_float(chunk);
#pragma unroll
    for (int e = 0; e < kVec; ++e) wt[i * kVec + e] = chunk[e];
  }
}

// Input row i (i mod 3 == kPh, kCols + 2 columns in fp32) applied as filter rows kRlo..kRhi to the
// ring of three accumulator rows: filter row r feeds output row i - r, held in slot (kPh - r) mod 3.
// Filter row 0 starts an output row with a multiply, so the ring is never zeroed.
template <int kPh, int kRlo, int kRhi, int kCols, int kVec>
__device__ __forceinline__ void apply_input_row(const float (&xv)[kCols + 2][kVec], const float (&wt)[9 * kVec],
                                                float (&acc)[3][kCols][kVec]) {
#pragma unroll
  for (int r = kRlo; r <= kRhi; ++r) {
    const int slot = (kPh - r + 3) % 3;
#pragma unroll
    for (int j = 0; j < kCols; ++j)
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        float a = r == 0 ? xv[j][e] * wt[e * 9] : fmaf(xv[j][e], wt[e * 9 + r * 3], acc[slot][j][e]);
        a = fmaf(xv[j + 1][e], wt[e * 9 + r * 3 + 1], a);
        acc[slot][j][e] = fmaf(xv[j + 2][e], wt[e * 9 + r * 3 + 2], a);
      }
  }
}

// NHWC, 3x3, unit stride and dilation, multiplier 1, c % kVec == 0. Thread = (image, band of
// `band` output rows, kCols output columns, kVec channels), channels fastest so a warp's loads are
// contiguous 16-byte vectors. The thread walks its band's band + 2 input rows once: each row is
// converted to fp32 once and feeds filter rows 0, 1, 2 of output rows i, i-1, i-2, held in a ring of
// three accumulator rows whose slots are compile-time constants (band = 3m + 2, the row loop
// unrolled by 3). Filter row 0 starts an output row with a multiply, so nothing is ever zeroed;
// the first two and last two input rows are peeled so that no FMA feeds a row outside the band.
// Once row i is in fp32, row i + 1's loads go into the same registers, so they are in flight
// during row i's FMAs, and L2 is asked for the rows `ahead` further.
template <typename T, int kVec, int kCols>
__global__ void __launch_bounds__(kTileThreads)
    depthwise_nhwc_3x3_tile_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w,
                                   T* __restrict__ y, int band, int ahead) {
  const int C = cp.c, vecs = C / kVec;
  const int strips = (cp.q + kCols - 1) / kCols;
  const int bands = (cp.p + band - 1) / band;
  // 32-bit index math: total <= the output's element count / kVec < 2^31 (check() bounds tensors).
  const unsigned total = unsigned(cp.n) * bands * strips * vecs;
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= total) return;
  const int v = int(t % unsigned(vecs));
  unsigned rest = t / unsigned(vecs);
  const int strip = int(rest % unsigned(strips));
  rest /= unsigned(strips);
  const int b = int(rest % unsigned(bands));
  const int n = int(rest / unsigned(bands));
  const int c0 = v * kVec, q0 = strip * kCols, o0 = b * band;

  float wt[9 * kVec];
  load_weights_3x3<T, kVec>(w, c0, wt);

  constexpr int kIn = kCols + 2;
  const T* x_img = x + std::int64_t(n) * cp.h * cp.w * C + c0;
  int col_off[kIn];
  bool col_ok[kIn];
#pragma unroll
  for (int j = 0; j < kIn; ++j) {
    const int iw = q0 - cp.pad_w + j;
    col_ok[j] = unsigned(iw) < unsigned(cp.w);
    col_off[j] = col_ok[j] ? iw * C : 0;
  }
  T* y_img = y + std::int64_t(n) * cp.p * cp.q * C + c0;
  const int rows_in = band + 2;

  RawVec<T, kVec> row[kIn];
  // Input row i of the band (image row o0 - pad_h + i), zeros outside the image.
  auto load_row = [&](int i) {
    const int ih = o0 - cp.pad_h + i;
    const bool row_ok = unsigned(ih) < unsigned(cp.h);
    const T* x_row = x_img + std::int64_t(row_ok ? ih : 0) * cp.w * C;
#pragma unroll
    for (int j = 0; j < kIn; ++j) {
      row[j].zero();
      if (row_ok && col_ok[j]) row[j].load(x_row + col_off[j]);
    }
  };
  // The thread's own columns only: its neighbours ask for the halo.
  auto prefetch_row = [&](int i) {
    const int ih = o0 - cp.pad_h + i;
    if (i >= rows_in || unsigned(ih) >= unsigned(cp.h)) return;
    const T* x_row = x_img + std::int64_t(ih) * cp.w * C;
#pragma unroll
    for (int j = 1; j <= kCols; ++j)
      if (col_ok[j]) prefetch_l2(x_row + col_off[j]);
  };

  float acc[3][kCols][kVec];
  // Input row i (i mod 3 == kPh) applied as filter rows kRlo..kRhi; row i + 1 loaded when kLoad.
  auto step = [&](int i, auto ph_c, auto rlo_c, auto rhi_c, auto load_c) {
    constexpr int kPh = decltype(ph_c)::value, kRlo = decltype(rlo_c)::value;
    constexpr int kRhi = decltype(rhi_c)::value;
    float xv[kIn][kVec];
#pragma unroll
    for (int j = 0; j < kIn; ++j) row[j].to_float(xv[j]);
    if constexpr (decltype(load_c)::value) load_row(i + 1);
    if (ahead > 0) prefetch_row(i + 1 + ahead);
    apply_input_row<kPh, kRlo, kRhi>(xv, wt, acc);
    if constexpr (kRhi == 2) {  // output row i - 2 has seen all three filter rows
      const int op = o0 + i - 2;
      if (op < cp.p) {
        T* y_row = y_img + std::int64_t(op) * cp.q * C;
#pragma unroll
        for (int j = 0; j < kCols; ++j)
          if (q0 + j < cp.q) store_rounded<T, kVec>(y_row + (q0 + j) * C, acc[(kPh + 1) % 3][j]);
      }
    }
  };
  using I0 = std::integral_constant<int, 0>;
  using I1 = std::integral_constant<int, 1>;
  using I2 = std::integral_constant<int, 2>;
  using Yes = std::true_type;

  load_row(0);
  for (int i = 1; i <= ahead; ++i) prefetch_row(i);
  step(0, I0{}, I0{}, I0{}, Yes{});
  step(1, I1{}, I0{}, I1{}, Yes{});
  for (int i = 2; i < band; i += 3) {
    step(i, I2{}, I0{}, I2{}, Yes{});
    step(i + 1, I0{}, I0{}, I2{}, Yes{});
    step(i + 2, I1{}, I0{}, I2{}, Yes{});
  }
  step(band, I2{}, I1{}, I2{}, Yes{});
  step(band + 1, I0{}, I2{}, I2{}, std::false_type{});
}

#if !GALLEY_GPU_HIP
// The staged-rows kernel (sm_90, `depthwise_nhwc_3x3_rows_kernel`): NHWC 3x3, stride 1, dilation 1,
// multiplier 1, c * sizeof(T) % 16 == 0. The tile kernel above is limited by L2 requests, not bytes:
// each warp load touches 5-6 lines, its halo columns are its neighbours' own columns, and its
// per-thread prefetches are requests too. In NHWC an image row (w x c) is one contiguous run of
// bytes, so here a block owns whole rows: one image x a band of output rows x every column and
// channel. Each input row arrives in shared memory with one bulk copy (cp.async.bulk, completion on
// an mbarrier), `ring` rows ahead of the arithmetic, and each output row leaves shared memory with
// one bulk store, so x and y cross L2 in a few large requests per row and each input row is read
// from global memory once per block. The arithmetic is the tile kernel's: a thread owns 16 bytes of
// channels (8 f16/bf16, 4 f32) x kCols output columns, weights in fp32 registers, a ring of three
// accumulator rows fed by each input row as filter rows 0/1/2, read from shared memory (6 or 10
// 16-byte loads per thread and row) instead of L2.
// It makes half the tile kernel's L2 requests. kRowsRing is the fastest ring depth of those tried:
// fewer rows in flight leave the copies' latency exposed. Outputs leave by bulk store, not from
// registers, for the same few large requests, and are not marked evict-first: that would only
// help x stay in L2 between repeated calls on one buffer, while a network's next layer wants y in L2.
constexpr int kRowsMaxThreads = 256;  // ~240 registers a thread: 8 warps per multiprocessor
constexpr int kRowsOutBufs = 3;       // output rows in shared memory: two may still be leaving
constexpr int kRowsRing = 4;          // input rows in shared memory, all in flight at once
constexpr int kRowsAlign = 128;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ std::uint32_t shared_addr(const void* ptr) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(ptr));
}
#endif

template <typename T, int kVec, int kCols>
__global__ void __launch_bounds__(kRowsMaxThreads)
    depthwise_nhwc_3x3_rows_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w,
                                   T* __restrict__ y, int band, int ring) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(kRowsAlign) unsigned char smem[];
  const int C = cp.c, vecs = C / kVec;
  const int strips = (cp.q + kCols - 1) / kCols;
  const int bands = (cp.p + band - 1) / band;
  const int n = int(blockIdx.x) / bands, o0 = (int(blockIdx.x) % bands) * band;
  const int tid = int(threadIdx.x);
  const int v = tid % vecs, strip = tid / vecs;
  // Threads past the row's last strip only take part in the barriers.
  const bool active = strip < strips;
  const int c0 = active ? v * kVec : 0, q0 = strip * kCols;
  const unsigned in_bytes = unsigned(cp.w) * C * sizeof(T), out_bytes = unsigned(cp.q) * C * sizeof(T);
  const unsigned in_pitch = (in_bytes + kRowsAlign - 1) / kRowsAlign * kRowsAlign;
  const unsigned out_pitch = (out_bytes + kRowsAlign - 1) / kRowsAlign * kRowsAlign;
  // [ring mbarriers, padded to kRowsAlign][ring input rows][kRowsOutBufs output rows]
  const std::uint32_t bars = shared_addr(smem);
  unsigned char* in_rows = smem + kRowsAlign;
  unsigned char* out_rows = in_rows + ring * in_pitch;
  const int rows_in = band + 2;
  const T* x_img = x + std::int64_t(n) * cp.h * cp.w * C;
  T* y_img = y + std::int64_t(n) * cp.p * cp.q * C;

  // Input row i of the band (image row o0 - pad_h + i) into ring slot `slot`; rows outside the
  // image complete the slot's phase with no bytes (the threads read zeros for them).
  auto issue_row = [&](int i, int slot) {
    const std::uint32_t bar = bars + 8u * slot;
    const int ih = o0 - cp.pad_h + i;
    if (unsigned(ih) < unsigned(cp.h)) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(in_bytes) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                       shared_addr(in_rows + slot * in_pitch)),
                   "l"(x_img + std::int64_t(ih) * cp.w * C), "r"(in_bytes), "r"(bar)
                   : "memory");
    } else {
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
    }
  };
  // Output row op from output buffer `buf` to y, by thread 0 once every thread's writes are fenced.
  auto store_row = [&](int op, int buf) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(y_img + std::int64_t(op) * cp.q * C),
                 "r"(shared_addr(out_rows + buf * out_pitch)), "r"(out_bytes)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
  };

  if (tid == 0) {
    for (int s = 0; s < ring; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bars + 8u * s) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (tid == 0)
    for (int i = 0; i < ring && i < rows_in; ++i) issue_row(i, i);

  float wt[9 * kVec];
  load_weights_3x3<T, kVec>(w, c0, wt);

  constexpr int kIn = kCols + 2;
  // Byte offsets of the thread's input columns in a staged row; columns outside the image read zeros.
  std::uint32_t col_off[kIn];
  bool col_ok[kIn];
#pragma unroll
  for (int j = 0; j < kIn; ++j) {
    const int iw = q0 - cp.pad_w + j;
    col_ok[j] = active && unsigned(iw) < unsigned(cp.w);
    col_off[j] = col_ok[j] ? (unsigned(iw) * C + c0) * sizeof(T) : 0u;
  }

  int slot = 0;
  std::uint32_t parity = 0;
  float acc[3][kCols][kVec];
  // Input row i (i mod 3 == kPh) applied as filter rows kRlo..kRhi; output row i - 2 leaves through
  // output buffer kPh once complete, and is stored by thread 0 in step i + 1 (or after the loop).
  auto step = [&](int i, auto ph_c, auto rlo_c, auto rhi_c) {
    constexpr int kPh = decltype(ph_c)::value, kRlo = decltype(rlo_c)::value;
    constexpr int kRhi = decltype(rhi_c)::value;
    asm volatile(
        "{\n.reg .pred p;\nWAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra WAIT;\n}\n" ::"r"(bars + 8u * slot),
        "r"(parity)
        : "memory");
    const int ih = o0 - cp.pad_h + i;
    const bool row_ok = unsigned(ih) < unsigned(cp.h);
    const unsigned char* row = in_rows + slot * in_pitch;
    float xv[kIn][kVec];
#pragma unroll
    for (int j = 0; j < kIn; ++j) {
      RawVec<T, kVec> raw;
      raw.zero();
      if (row_ok && col_ok[j]) raw.load_shared(reinterpret_cast<const T*>(row + col_off[j]));
      raw.to_float(xv[j]);
    }
    // Output buffer kPh was filled in step i - 3 and its store issued in step i - 2: once at most one
    // bulk store (step i - 1's) is still reading, the buffer may be filled again at the end of this step.
    if (tid == 0) asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kRowsOutBufs - 2) : "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // last step's output writes
    __syncthreads();  // every thread has read this slot and written last step's output row
    if (tid == 0) {
      if (i + ring < rows_in) issue_row(i + ring, slot);
      const int prev = o0 + i - 3;
      if (i >= 3 && prev < cp.p) store_row(prev, (kPh + 2) % 3);
    }
    if (++slot == ring) slot = 0, parity ^= 1u;
    if (active) {
      apply_input_row<kPh, kRlo, kRhi>(xv, wt, acc);
    }
    if constexpr (kRhi == 2) {  // output row i - 2 has seen all three filter rows
      if (active && o0 + i - 2 < cp.p) {
        unsigned char* out = out_rows + kPh * out_pitch + std::size_t(c0) * sizeof(T);
#pragma unroll
        for (int j = 0; j < kCols; ++j)
          if (q0 + j < cp.q)
            store_rounded<T, kVec>(reinterpret_cast<T*>(out + std::size_t(q0 + j) * C * sizeof(T)), acc[(kPh + 1) % 3][j]);
      }
    }
  };
  using I0 = std::integral_constant<int, 0>;
  using I1 = std::integral_constant<int, 1>;
  using I2 = std::integral_constant<int, 2>;

  step(0, I0{}, I0{}, I0{});
  step(1, I1{}, I0{}, I1{});
  for (int i = 2; i < band; i += 3) {
    step(i, I2{}, I0{}, I2{});
    step(i + 1, I0{}, I0{}, I2{});
    step(i + 2, I1{}, I0{}, I2{});
  }
  step(band, I2{}, I1{}, I2{});
  step(band + 1, I0{}, I2{}, I2{});
  // The last output row (band - 1, written in step band + 1 = 0 mod 3 through buffer 0).
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  if (tid == 0) {
    if (o0 + band - 1 < cp.p) store_row(o0 + band - 1, 0);
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");  // shared memory must outlive the reads
  }
#else
  (void)cp, (void)x, (void)w, (void)y, (void)band, (void)ring;  // the launcher needs compute capability 9.0
#endif
}
#endif  // !GALLEY_GPU_HIP

// One channel plane row strip per thread; k = c * multiplier + m reads input channel k / multiplier.
template <typename T, bool kNhwc, int R, int S>
__global__ void __launch_bounds__(kThreads)
    depthwise_scalar_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y) {
  const int strips = (cp.q + kStrip - 1) / kStrip;
  const int RR = R > 0 ? R : cp.r, SS = S > 0 ? S : cp.s, RS = RR * SS;
  constexpr int kUnrollR = R > 0 ? R : 1, kUnrollS = S > 0 ? S : 1;  // 1: run-time trip count
  const bool sliding = cp.stride_w == 1 && cp.dil_w == 1;
  const unsigned total = unsigned(cp.n) * cp.k * cp.p * strips;  // < 2^31, see above
  for (unsigned t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
    int k, strip, op, n;
    unsigned rest = t;
    if (kNhwc) {  // channel fastest: neighbouring threads touch neighbouring addresses
      k = int(rest % unsigned(cp.k));
      rest /= unsigned(cp.k);
      strip = int(rest % unsigned(strips));
      rest /= unsigned(strips);
    } else {
      strip = int(rest % unsigned(strips));
      rest /= unsigned(strips);
      k = int(rest % unsigned(cp.k));
      rest /= unsigned(cp.k);
    }
    op = int(rest % unsigned(cp.p));
    n = int(rest / unsigned(cp.p));
    const int c = k / cp.kg;
    const int q0 = strip * kStrip;
    const T* wk = w + std::int64_t(k) * RS;
    // Element (ih, iw) of input channel c: base + ih * row + iw * col.
    const std::int64_t row = kNhwc ? std::int64_t(cp.w) * cp.c : cp.w;
    const std::int64_t col = kNhwc ? cp.c : 1;
    const T* base = kNhwc ? x + std::int64_t(n) * cp.h * cp.w * cp.c + c : x + (std::int64_t(n) * cp.c + c) * cp.h * cp.w;
    float acc[kStrip] = {};
#pragma unroll kUnrollR
    for (int r = 0; r < RR; ++r) {
      const int ih = op * cp.stride_h - cp.pad_h + r * cp.dil_h;
      const bool row_ok = unsigned(ih) < unsigned(cp.h);
      const T* x_row = base + (row_ok ? ih : 0) * row;
      if (sliding && S > 0) {
#pragma unroll
        for (int cc = 0; cc < kStrip + (S > 0 ? S : 1) - 1; ++cc) {
          const int iw = q0 - cp.pad_w + cc;
          const float xv = (row_ok && unsigned(iw) < unsigned(cp.w)) ? ldg_f32(x_row + iw * col) : 0.f;
#pragma unroll
          for (int s = 0; s < (S > 0 ? S : 1); ++s) {
            const int j = cc - s;
            if (j >= 0 && j < kStrip) acc[j] = fmaf(xv, ldg_f32(wk + r * SS + s), acc[j]);
          }
        }
      } else {
#pragma unroll kUnrollS
        for (int s = 0; s < SS; ++s) {
          const float wv = ldg_f32(wk + r * SS + s);
#pragma unroll
          for (int j = 0; j < kStrip; ++j) {
            const int iw = (q0 + j) * cp.stride_w - cp.pad_w + s * cp.dil_w;
            const float xv = (row_ok && unsigned(iw) < unsigned(cp.w)) ? ldg_f32(x_row + iw * col) : 0.f;
            acc[j] = fmaf(xv, wv, acc[j]);
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kStrip; ++j) {
      const int oq = q0 + j;
      if (oq >= cp.q) break;
      const std::int64_t yi = kNhwc ? ((std::int64_t(n) * cp.p + op) * cp.q + oq) * cp.k + k
                                    : ((std::int64_t(n) * cp.k + k) * cp.p + op) * cp.q + oq;
      y[yi] = from_f32<T>(acc[j]);
    }
  }
}

bool use_tile(const ConvParams& p) {
  return p.nhwc && p.k == p.c && p.c % 4 == 0 && p.r == 3 && p.s == 3 && p.stride_h == 1 && p.stride_w == 1 &&
         p.dil_h == 1 && p.dil_w == 1;
}

// Channels per thread for the tile kernel: one 16-byte vector of f16/bf16 when c allows, else 4.
int tile_vec(const ConvParams& p) { return p.dtype != DType::f32 && p.c % 8 == 0 ? 8 : 4; }

// Warps of `kernel` (kTileThreads per block) the current device holds at once, asked once per
// device and kernel.
template <typename Kernel>
int resident_warps(Kernel kernel) {
  static std::atomic<int> cache[16] = {};
  int dev = 0;
#if GALLEY_GPU_HIP
  if (hipGetDevice(&dev) != hipSuccess) dev = 0;
#else
  if (cudaGetDevice(&dev) != cudaSuccess) dev = 0;
#endif
  const int slot = dev >= 0 && dev < 16 ? dev : 0;
  if (const int known = cache[slot].load(std::memory_order_relaxed); known > 0) return known;
  int sms = 1, blocks = 1;
  // A failed query falls back to 1 and clears its error, so check_launch() reports only the launch.
#if GALLEY_GPU_HIP
  if (hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, dev) != hipSuccess) sms = 1, (void)hipGetLastError();
  if (hipOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kTileThreads, 0) != hipSuccess)
    blocks = 1, (void)hipGetLastError();
#else
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) sms = 1, (void)cudaGetLastError();
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kTileThreads, 0) != cudaSuccess)
    blocks = 1, (void)cudaGetLastError();
#endif
  const int warps = std::max(1, sms) * std::max(1, blocks) * (kTileThreads / 32);
  cache[slot].store(warps, std::memory_order_relaxed);
  return warps;
}

// Output rows per band (3m + 2, up to 20) for both 3x3 kernels: the band that minimises waves x
// input rows per band, the rows each resident unit (a warp of the tile kernel, a block of the
// staged-rows kernel) walks in turn; longer bands also re-read fewer halo rows. `units(bands)` is how
// many units `bands` bands per image make; `resident` how many the device holds at once.
template <typename Units>
int best_band(const ConvParams& p, std::int64_t resident, Units units) {
  int best = 2;
  std::int64_t best_cost = -1;
  for (int band = 2; band <= 20; band += 3) {
    const std::int64_t waves = (units((p.p + band - 1) / band) + resident - 1) / resident;
    const std::int64_t cost = waves * (band + 2);
    if (best_cost < 0 || cost <= best_cost) best = band, best_cost = cost;
    if (band >= p.p) break;
  }
  return best;
}

// The tile kernel's band (best_band above): a thread walks it, and a warp is the resident unit.
int tile_band(const ConvParams& p, int vec, int resident) {
  const std::int64_t columns = std::int64_t(p.n) * ((p.q + kTileCols - 1) / kTileCols) * (p.c / vec);
  return best_band(p, resident, [&](std::int64_t bands) { return (columns * bands + 31) / 32; });
}

template <typename T, int kVec>
void launch_tile(const ConvParams& p, const T* x, const T* w, T* y, GpuStream s) {
  const auto kernel = depthwise_nhwc_3x3_tile_kernel<T, kVec, kTileCols>;
  const int band = tile_band(p, kVec, resident_warps(kernel));
  const std::int64_t threads =
      std::int64_t(p.n) * ((p.p + band - 1) / band) * ((p.q + kTileCols - 1) / kTileCols) * (p.c / kVec);
  kernel<<<ceil_div(threads, kTileThreads), kTileThreads, 0, s>>>(p, x, w, y, band, kTileAhead);
}

bool use_vec8(const ConvParams& p) {
  return p.nhwc && p.k == p.c && p.c % 8 == 0 && std::int64_t(p.c) * p.r * p.s <= kMaxSmemWeights;
}

#if !GALLEY_GPU_HIP
// What the staged-rows launcher needs of a device, asked once per device.
struct RowsDevice {
  int major = 0, sms = 1, smem_optin = 0;
};

RowsDevice rows_device() {
  static std::atomic<int> cache[16][3] = {};  // major + 1, sms, smem_optin; 0 = not asked yet
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) dev = 0, (void)cudaGetLastError();
  const int slot = dev >= 0 && dev < 16 ? dev : 0;
  RowsDevice d;
  if (const int known = cache[slot][0].load(std::memory_order_acquire); known > 0) {
    d.major = known - 1;
    d.sms = cache[slot][1].load(std::memory_order_relaxed);
    d.smem_optin = cache[slot][2].load(std::memory_order_relaxed);
    return d;
  }
  // A failed query leaves the device unfit (major 0) and clears its error.
  if (cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) d.major = 0, (void)cudaGetLastError();
  if (cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) d.sms = 1, (void)cudaGetLastError();
  if (cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
    d.smem_optin = 0, (void)cudaGetLastError();
  cache[slot][1].store(d.sms, std::memory_order_relaxed);
  cache[slot][2].store(d.smem_optin, std::memory_order_relaxed);
  cache[slot][0].store(d.major + 1, std::memory_order_release);
  return d;
}

int rows_vec(const ConvParams& p) { return 16 / int(size_of(p.dtype)); }
int rows_cols(const ConvParams& p) { return 32 / rows_vec(p); }  // 8 f16/bf16 x 4, 4 f32 x 8
int rows_threads(const ConvParams& p) {
  return int(((std::int64_t(p.q) + rows_cols(p) - 1) / rows_cols(p) * (p.c / rows_vec(p)) + 31) / 32 * 32);
}
std::int64_t rows_pitch(std::int64_t bytes) { return (bytes + kRowsAlign - 1) / kRowsAlign * kRowsAlign; }
std::int64_t rows_smem(const ConvParams& p, int ring) {
  const std::int64_t elem = int(size_of(p.dtype));
  return kRowsAlign + ring * rows_pitch(std::int64_t(p.w) * p.c * elem) +
         kRowsOutBufs * rows_pitch(std::int64_t(p.q) * p.c * elem);
}

// Rows in flight for `p`: kRowsRing, fewer where shared memory is short; 0 = does not fit.
int rows_ring_for(const ConvParams& p, const RowsDevice& d) {
  for (int ring = kRowsRing; ring >= 2; --ring)
    if (rows_smem(p, ring) <= d.smem_optin) return ring;
  return 0;
}

// The staged-rows kernel's shapes (pointers aside): the tile kernel's, with 16-byte channel runs
// (whole rows are then 16-byte multiples for the bulk copies), one row's threads in one block, and
// at least two input rows and the output buffers in shared memory; compute capability 9.0+.
bool use_rows_shape(const ConvParams& p) {
  if (!use_tile(p) || p.q < 1 || p.p < 1) return false;
  if ((std::int64_t(p.c) * int(size_of(p.dtype))) % 16 != 0) return false;
  if (rows_threads(p) > kRowsMaxThreads) return false;
  const RowsDevice d = rows_device();
  return d.major >= 9 && rows_ring_for(p, d) > 0;
}

// The staged-rows kernel's band: a block of one image walks it, `resident` blocks at once.
int rows_band(const ConvParams& p, int resident) {
  return best_band(p, resident, [&](std::int64_t bands) { return std::int64_t(p.n) * bands; });
}

template <typename T, int kVec, int kCols>
void launch_rows(const ConvParams& p, const T* x, const T* w, T* y, GpuStream s) {
  const auto kernel = depthwise_nhwc_3x3_rows_kernel<T, kVec, kCols>;
  const RowsDevice d = rows_device();
  const int ring = rows_ring_for(p, d);
  const int smem = int(rows_smem(p, ring)), threads = rows_threads(p);
  // Dynamic shared memory above 48 KiB: the device's whole opt-in, once per device.
  static std::atomic<std::uint64_t> attributes_set{0};
  once_per_device(attributes_set, [&] { allow_dynamic_smem(kernel, d.smem_optin, "gpu.conv.depthwise"); });
  int per_sm = 1;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess)
    per_sm = 1, (void)cudaGetLastError();
  const int band = rows_band(p, std::max(1, per_sm) * d.sms);
  const std::int64_t blocks = std::int64_t(p.n) * ((p.p + band - 1) / band);
  kernel<<<unsigned(blocks), threads, smem, s>>>(p, x, w, y, band, ring);
}
#endif  // !GALLEY_GPU_HIP

}  // namespace

std::string depthwise_detail(const ConvParams& p) {
#if !GALLEY_GPU_HIP
  if (use_rows_shape(p))
    return "nhwc 3x3 staged rows (bulk copies through shared memory), " + std::to_string(rows_vec(p)) +
           " channels x " + std::to_string(rows_cols(p)) + " columns x a band of rows per thread";
#endif
  if (use_tile(p))
    return "nhwc 3x3 register tiles, " + std::to_string(tile_vec(p)) + " channels x " + std::to_string(kTileCols) +
           " columns x a band of rows per thread";
  if (use_vec8(p)) return "nhwc 8-channel vectors, weights in shared memory";
  return "scalar row strips";
}

void launch_conv_depthwise(const ConvParams& p, const void* x, const void* w, void* y, void* stream) {
  const GpuStream s = as_stream(stream);
  const int strips = (p.q + kStrip - 1) / kStrip;
  dispatch_dtype(p.dtype, "gpu.conv.depthwise", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(w);
    T* yt = static_cast<T*>(y);
    if (use_tile(p)) {
#if !GALLEY_GPU_HIP
      if (use_rows_shape(p) && aligned16(x) && aligned16(y)) {
        constexpr int kVec = std::is_same_v<T, float> ? 4 : 8;
        return launch_rows<T, kVec, 32 / kVec>(p, xt, wt, yt, s);
      }
#endif
      if constexpr (!std::is_same_v<T, float>) {
        if (tile_vec(p) == 8) return launch_tile<T, 8>(p, xt, wt, yt, s);
      }
      launch_tile<T, 4>(p, xt, wt, yt, s);
    } else if (use_vec8(p)) {
      const std::int64_t total = std::int64_t(p.n) * p.p * strips * (p.c / 8);
      const int blocks = int(std::min<std::int64_t>((total + kThreads - 1) / kThreads, 1 << 20));
      const int smem = p.c * p.r * p.s * int(sizeof(float));
      if (p.r == 3 && p.s == 3)
        depthwise_nhwc_vec8_kernel<T, 3, 3><<<blocks, kThreads, smem, s>>>(p, xt, wt, yt);
      else if (p.r == 5 && p.s == 5)
        depthwise_nhwc_vec8_kernel<T, 5, 5><<<blocks, kThreads, smem, s>>>(p, xt, wt, yt);
      else
        depthwise_nhwc_vec8_kernel<T, 0, 0><<<blocks, kThreads, smem, s>>>(p, xt, wt, yt);
    } else {
      const std::int64_t total = std::int64_t(p.n) * p.k * p.p * strips;
      const int blocks = int(std::min<std::int64_t>((total + kThreads - 1) / kThreads, 1 << 20));
      const bool k3 = p.r == 3 && p.s == 3;
      if (p.nhwc)
        k3 ? depthwise_scalar_kernel<T, true, 3, 3><<<blocks, kThreads, 0, s>>>(p, xt, wt, yt)
           : depthwise_scalar_kernel<T, true, 0, 0><<<blocks, kThreads, 0, s>>>(p, xt, wt, yt);
      else
        k3 ? depthwise_scalar_kernel<T, false, 3, 3><<<blocks, kThreads, 0, s>>>(p, xt, wt, yt)
           : depthwise_scalar_kernel<T, false, 0, 0><<<blocks, kThreads, 0, s>>>(p, xt, wt, yt);
    }
  });
  check_launch("gpu.conv.depthwise");
}

}  // namespace galley::backends::gpu
