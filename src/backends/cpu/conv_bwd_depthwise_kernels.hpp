// The inner loops of cpu.conv.bwd_{data,weights}_depthwise, compiled three times: plainly in
// conv_bwd_depthwise.cpp, and with AVX2 / AVX-512 code generation in conv_bwd_depthwise_avx2.cpp
// and conv_bwd_depthwise_avx512.cpp, so the same plain loops become 4-, 8- or 16-wide vectors.
// The definitions have internal linkage (an unnamed namespace), so each of those files keeps its
// own copy, and they instantiate no standard-library template: an out-of-line copy compiled with
// AVX-512 could otherwise be the one the linker keeps for every caller. The unit-stride row
// operations the loops are built on are declared here and defined by each including file (rows
// are a few dozen floats, so their vector tails decide the speed): plain loops in
// conv_bwd_depthwise_row_ops.hpp, masked AVX-512 steps in conv_bwd_depthwise_avx512.cpp.
#pragma once

#include <cstdint>

#include "backends/cpu/conv_base.hpp"

namespace galley::backends::cpu::bwd {

/// The NCHW plane and NHWC row kernels built for one instruction set.
struct DepthwiseKernels {
  /// dx plane of one channel (zeroed first) from its dy plane and R x S filter, any stride.
  void (*data_plane_nchw)(const ConvShape& s, const float* dyc, const float* wc, float* dxc);
  /// One input row (n, ih) of an NHWC image: dx_row[W][C]; `wt` is the filter tap-major ([R*S][C]).
  void (*data_row_nhwc)(const ConvShape& s, const float* dyn, const float* wt, std::int64_t ih,
                        float* dx_row);
  /// The R*S weight gradients of channel c of an NCHW problem, summed over the batch (+= when accumulating).
  void (*weights_channel_nchw)(const ConvShape& s, const float* x, const float* dy, std::int64_t c,
                               float* dwc, bool accumulate);
  /// acc[R*S][C] += the weight gradients of one output row (n, oh) of an NHWC problem.
  void (*weights_row_nhwc)(const ConvShape& s, const float* x, const float* dy, std::int64_t n,
                           std::int64_t oh, float* acc);
  /// lanes[i % 16] += g[i] * in[i] for i in [0, count).
  void (*dot_lanes)(float* lanes, const float* g, const float* in, std::int64_t count);
  /// For t in [0, taps) (taps <= kMaxDotTaps): lanes[t*16 + i % 16] += g[i] * in[offsets[t] + i], i in
  /// [0, count): several dot products against one pass over g.
  void (*dot_taps)(float* lanes, const float* g, const float* in, const std::int64_t* offsets,
                   std::int64_t taps, std::int64_t count);
};

inline constexpr std::int64_t kMaxDotTaps = 24;

DepthwiseKernels depthwise_kernels_baseline();
DepthwiseKernels depthwise_kernels_avx2();    // only after cpu_has_avx2_fma()
DepthwiseKernels depthwise_kernels_avx512();  // only after cpu_has_avx512()

inline constexpr std::int64_t kLanes = 16;

namespace {

/// out[i] += a * in[i] for i in [0, count).
void row_axpy(float* out, const float* in, float a, std::int64_t count);
/// lanes[i % kLanes] += g[i] * in[i] for i in [0, count) (kLanes independent partial sums).
void row_dot_lanes(float* lanes, const float* g, const float* in, std::int64_t count);
/// DepthwiseKernels::dot_taps.
void row_dot_taps(float* lanes, const float* g, const float* in, const std::int64_t* offsets,
                  std::int64_t taps, std::int64_t count);

// Output columns [lo, hi) of tap q whose input column ow*sw + shift lies in [0, W).
inline std::int64_t clamp64(std::int64_t v, std::int64_t lo, std::int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

void columns_inside(const ConvShape& s, std::int64_t q, std::int64_t* shift, std::int64_t* lo,
                    std::int64_t* hi) {
  *shift = q * s.dw - s.pw;
  *lo = clamp64((-*shift + s.sw - 1) / s.sw, 0, s.wo);
  const std::int64_t last = s.w - 1 - *shift;
  *hi = last < 0 ? *lo : clamp64(last / s.sw + 1, *lo, s.wo);
}

// The output index o along one axis whose tap t read input i, or -1 (see the reference).
std::int64_t output_of(std::int64_t i, std::int64_t t, std::int64_t pad, std::int64_t stride,
                       std::int64_t dil, std::int64_t out) {
  const std::int64_t num = i + pad - t * dil;
  if (num < 0 || num % stride != 0) return -1;
  const std::int64_t o = num / stride;
  return o < out ? o : -1;
}

void data_plane_nchw(const ConvShape& s, const float* dyc, const float* wc, float* dxc) {
  for (std::int64_t i = 0; i < s.h * s.w; ++i) dxc[i] = 0.0f;
  // Tap-major, so the column range of a tap is worked out once; both planes stay in L1/L2.
  for (std::int64_t q = 0; q < s.s; ++q) {
    std::int64_t shift, lo, hi;
    columns_inside(s, q, &shift, &lo, &hi);
    if (lo >= hi) continue;
    const std::int64_t count = hi - lo;
    for (std::int64_t r = 0; r < s.r; ++r) {
      const float wv = wc[r * s.s + q];
      for (std::int64_t oh = 0; oh < s.ho; ++oh) {
        const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
        if (ih < 0 || ih >= s.h) continue;
        // out[i] is input column (lo + i) * sw + shift, read by output column lo + i.
        float* out = dxc + ih * s.w + lo * s.sw + shift;
        const float* in = dyc + oh * s.wo + lo;
        if (s.sw == 1) {
          row_axpy(out, in, wv, count);
        } else {
          for (std::int64_t i = 0; i < count; ++i) out[i * s.sw] += wv * in[i];
        }
      }
    }
  }
}

// One input row (n, ih) of an NHWC image: dx_row[W][C]; `wt` is the filter tap-major ([R*S][C]).
void data_row_nhwc(const ConvShape& s, const float* dyn, const float* wt, std::int64_t ih, float* dx_row) {
  for (std::int64_t iw = 0; iw < s.w; ++iw) {
    float* o = dx_row + iw * s.c;
    for (std::int64_t c = 0; c < s.c; ++c) o[c] = 0.0f;
    for (std::int64_t r = 0; r < s.r; ++r) {
      const std::int64_t oh = output_of(ih, r, s.ph, s.sh, s.dh, s.ho);
      if (oh < 0) continue;
      for (std::int64_t q = 0; q < s.s; ++q) {
        const std::int64_t ow = output_of(iw, q, s.pw, s.sw, s.dw, s.wo);
        if (ow < 0) continue;
        const float* g = dyn + (oh * s.wo + ow) * s.c;
        const float* wv = wt + (r * s.s + q) * s.c;
        for (std::int64_t c = 0; c < s.c; ++c) o[c] += wv[c] * g[c];
      }
    }
  }
}

// The R*S weight gradients of channel c of an NCHW problem, summed over the batch: per tap, 16
// independent f32 lanes (one vector register) run over an image's rows and are folded into
// double once per image.
void weights_channel_nchw(const ConvShape& s, const float* x, const float* dy, std::int64_t c, float* dwc,
                          bool accumulate) {
  for (std::int64_t q = 0; q < s.s; ++q) {
    std::int64_t shift, lo, hi;
    columns_inside(s, q, &shift, &lo, &hi);
    const std::int64_t count = hi - lo, whole = count / kLanes * kLanes;
    for (std::int64_t r = 0; r < s.r; ++r) {
      double sum = 0;
      for (std::int64_t n = 0; n < s.n && count > 0; ++n) {
        const float* xc = x + (n * s.c + c) * s.h * s.w;
        const float* dyc = dy + (n * s.c + c) * s.ho * s.wo;
        float lanes[kLanes] = {};
        for (std::int64_t oh = 0; oh < s.ho; ++oh) {
          const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
          if (ih < 0 || ih >= s.h) continue;
          const float* g = dyc + oh * s.wo + lo;
          const float* in = xc + ih * s.w + lo * s.sw + shift;
          if (s.sw == 1) {
            row_dot_lanes(lanes, g, in, count);
          } else {
            for (std::int64_t i = 0; i < whole; i += kLanes) {
              for (std::int64_t j = 0; j < kLanes; ++j) lanes[j] += g[i + j] * in[(i + j) * s.sw];
            }
            for (std::int64_t i = whole; i < count; ++i) lanes[i - whole] += g[i] * in[i * s.sw];
          }
        }
        for (float v : lanes) sum += v;
      }
      float& out = dwc[r * s.s + q];
      out = static_cast<float>(accumulate ? out + sum : sum);
    }
  }
}

// acc[R*S][C] += the weight gradients of one output row (n, oh) of an NHWC problem.
void weights_row_nhwc(const ConvShape& s, const float* x, const float* dy, std::int64_t n, std::int64_t oh,
                      float* acc) {
  const float* dyr = dy + (n * s.ho + oh) * s.wo * s.c;
  for (std::int64_t r = 0; r < s.r; ++r) {
    const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
    if (ih < 0 || ih >= s.h) continue;
    const float* xr = x + (n * s.h + ih) * s.w * s.c;
    for (std::int64_t q = 0; q < s.s; ++q) {
      float* a = acc + (r * s.s + q) * s.c;
      for (std::int64_t ow = 0; ow < s.wo; ++ow) {
        const std::int64_t iw = ow * s.sw - s.pw + q * s.dw;
        if (iw < 0 || iw >= s.w) continue;
        const float* g = dyr + ow * s.c;
        const float* xv = xr + iw * s.c;
        for (std::int64_t c = 0; c < s.c; ++c) a[c] += g[c] * xv[c];
      }
    }
  }
}

[[maybe_unused]] DepthwiseKernels this_isa_kernels() {
  return {data_plane_nchw,  data_row_nhwc, weights_channel_nchw,
          weights_row_nhwc, row_dot_lanes, row_dot_taps};
}

}  // namespace
}  // namespace galley::backends::cpu::bwd
