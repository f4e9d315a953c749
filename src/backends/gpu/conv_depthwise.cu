// gpu.conv.depthwise's kernels (groups == c, any channel multiplier k / c). Depthwise work is a
// handful of FMAs per byte, so the kernels aim at the memory roofline: each input and output byte
// should cross DRAM once, with the 3x3 (or r x s) neighbourhood re-read from L1.
//
// NHWC, multiplier 1, c % 8 == 0: a thread owns 8 channels (one 16-byte vector of f16/bf16, two of
// f32) at kStrip output pixels along a row; the block stages all weights in shared memory as
// [tap][channel] fp32 so a warp reads them conflict-free. Consecutive threads take consecutive
// channel vectors, so every warp-wide load is contiguous.
// Anything else (NCHW, multipliers, odd channel counts): a thread owns kStrip outputs along a row of
// one channel plane; loads are scalar but coalesced along the row.
#include "conv_device.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kStrip = 4;
constexpr int kMaxSmemWeights = 12 * 1024;  // floats: 48 KiB

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

bool use_vec8(const ConvParams& p) {
  return p.nhwc && p.k == p.c && p.c % 8 == 0 && std::int64_t(p.c) * p.r * p.s <= kMaxSmemWeights;
}

}  // namespace

void launch_conv_depthwise(const ConvParams& p, const void* x, const void* w, void* y, void* stream) {
  const GpuStream s = as_stream(stream);
  const int strips = (p.q + kStrip - 1) / kStrip;
  dispatch_dtype(p.dtype, "gpu.conv.depthwise", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(w);
    T* yt = static_cast<T*>(y);
    if (use_vec8(p)) {
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
