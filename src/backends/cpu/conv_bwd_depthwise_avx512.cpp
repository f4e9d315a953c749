// The depthwise backward loops of conv_bwd_depthwise_kernels.hpp with AVX-512 code generation
// (this file's name gives it the flags); entered only after cpu_has_avx512(). The row operations
// take masked 16-float steps, so a row of a few dozen floats has no scalar tail.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/avx512_lanes.hpp"
#include "backends/cpu/conv_bwd_depthwise_kernels.hpp"

namespace galley::backends::cpu::bwd {
namespace {

void row_axpy(float* out, const float* in, float a, std::int64_t count) {
  const __m512 av = _mm512_set1_ps(a);
  for (std::int64_t i = 0; i < count; i += 16) {
    const __mmask16 m = avx512::lanes(count - i);
    const __m512 o = _mm512_maskz_loadu_ps(m, out + i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, in + i), o));
  }
}

void row_dot_lanes(float* lanes, const float* g, const float* in, std::int64_t count) {
  // Four chains hide the FMA latency on long rows.
  __m512 acc = _mm512_loadu_ps(lanes), acc1 = _mm512_setzero_ps(), acc2 = acc1, acc3 = acc1;
  std::int64_t i = 0;
  for (; i + 64 <= count; i += 64) {
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(g + i), _mm512_loadu_ps(in + i), acc);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(g + i + 16), _mm512_loadu_ps(in + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(g + i + 32), _mm512_loadu_ps(in + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(g + i + 48), _mm512_loadu_ps(in + i + 48), acc3);
  }
  acc = _mm512_add_ps(_mm512_add_ps(acc, acc1), _mm512_add_ps(acc2, acc3));
  for (; i < count; i += 16) {
    const __mmask16 m = avx512::lanes(count - i);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, g + i), _mm512_maskz_loadu_ps(m, in + i), acc);
  }
  _mm512_storeu_ps(lanes, acc);
}

// One pass over g feeds every tap: one load of g per 16 floats for `taps` FMAs, each tap's sum
// in its own register.
template <int kTaps>
void dot_taps_fixed(float* lanes, const float* g, const float* in, const std::int64_t* offsets,
                    std::int64_t count) {
  __m512 acc[kTaps];
  const float* src[kTaps];
  for (int t = 0; t < kTaps; ++t) acc[t] = _mm512_loadu_ps(lanes + t * 16), src[t] = in + offsets[t];
  for (std::int64_t i = 0; i < count; i += 16) {
    const __mmask16 m = avx512::lanes(count - i);
    const __m512 gv = _mm512_maskz_loadu_ps(m, g + i);
    for (int t = 0; t < kTaps; ++t)
      acc[t] = _mm512_fmadd_ps(gv, _mm512_maskz_loadu_ps(m, src[t] + i), acc[t]);
  }
  for (int t = 0; t < kTaps; ++t) _mm512_storeu_ps(lanes + t * 16, acc[t]);
}

void row_dot_taps(float* lanes, const float* g, const float* in, const std::int64_t* offsets,
                  std::int64_t taps, std::int64_t count) {
  // Groups of at most 8 taps keep 8 accumulators and the loads in registers.
  for (std::int64_t t0 = 0; t0 < taps; t0 += 8) {
    float* l = lanes + t0 * 16;
    const std::int64_t* o = offsets + t0;
    switch (taps - t0 < 8 ? taps - t0 : 8) {
      case 1:
        dot_taps_fixed<1>(l, g, in, o, count);
        break;
      case 2:
        dot_taps_fixed<2>(l, g, in, o, count);
        break;
      case 3:
        dot_taps_fixed<3>(l, g, in, o, count);
        break;
      case 4:
        dot_taps_fixed<4>(l, g, in, o, count);
        break;
      case 5:
        dot_taps_fixed<5>(l, g, in, o, count);
        break;
      case 6:
        dot_taps_fixed<6>(l, g, in, o, count);
        break;
      case 7:
        dot_taps_fixed<7>(l, g, in, o, count);
        break;
      default:
        dot_taps_fixed<8>(l, g, in, o, count);
        break;
    }
  }
}

}  // namespace

DepthwiseKernels depthwise_kernels_avx512() { return this_isa_kernels(); }

}  // namespace galley::backends::cpu::bwd
