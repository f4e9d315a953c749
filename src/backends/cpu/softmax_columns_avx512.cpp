// See softmax_columns_avx512.hpp. Compiled with AVX-512 F/BW/VL/DQ; nothing here instantiates a
// standard-library template (see sgemm_avx512.cpp).
#include "backends/cpu/softmax_columns_avx512.hpp"

#include <immintrin.h>

#include <cmath>

#include "backends/cpu/avx512_lanes.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

// Up to this many vectors of columns per block: their maxima and sums stay in registers.
constexpr int kMaxVectors = 8;
// A block's input rows (or, in backward, dy's and y's) plus its staged exponentials: 32 KB of the
// 48 KB L1, the rest left to the next block's prefetched lines on their way in.
constexpr std::int64_t kBlockFloats = 4096;
// Beyond this, staging would leave L2 too; the exponentials are staged in y instead.
constexpr std::int64_t kMaxStagingFloats = 64 * 1024;

// e^t to about 2 ulp, for any t: e^t = 2^n e^r with n = round(t / ln 2), r = t - n ln 2 in two
// parts (|r| <= ln2 / 2), e^r by its degree-6 Taylor polynomial (error below 1.3e-7 relative), and
// 2^n applied by vscalefps, which saturates to 0 and inf by itself. The clamp keeps t * log2(e)
// finite for -inf and inf (giving 0 and inf); NaN passes through the clamps (vmaxps and vminps
// return their second operand when either is NaN) and poisons n, r and the result.
inline __m512 exp_ps(__m512 t) {
  t = _mm512_max_ps(_mm512_set1_ps(-104.0f), t);
  t = _mm512_min_ps(_mm512_set1_ps(104.0f), t);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), t);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// The output store: non-temporal when bypassing the cache (the block is then whole and aligned),
// masked otherwise so that a partial block writes only its columns.
inline void store_out(float* p, __mmask16 mask, __m512 v, bool bypass_cache) {
  if (bypass_cache) {
    _mm512_stream_ps(p, v);
  } else {
    _mm512_mask_storeu_ps(p, mask, v);
  }
}

// Lines of the next block, fetched into L2 while this block computes: the block's rows lie ld
// apart, each a short run the hardware prefetchers do not pick up.
inline void prefetch_row(const float* next_row, int vectors) {
  if (next_row == nullptr) return;
  for (int v = 0; v < vectors; ++v) _mm_prefetch(reinterpret_cast<const char*>(next_row + 16 * v), _MM_HINT_T1);
}

// One block of `width` <= 16 * kVectors columns. `next` is the next block's first row (nullptr:
// none); `e` stages the exponentials, its rows `lde` floats apart.
template <int kVectors>
void forward_block(const float* x, float* y, std::int64_t ld, std::int64_t len, std::int64_t width, bool log,
                   float* e, std::int64_t lde, const float* next, bool bypass_cache) {
  __mmask16 mask[kVectors];
  __m512 m[kVectors], s[kVectors];
  for (int v = 0; v < kVectors; ++v) {
    mask[v] = lanes(width - 16 * v);
    m[v] = _mm512_set1_ps(-INFINITY);
    s[v] = _mm512_setzero_ps();
  }
  // The max skips NaN (vmaxps returns the running max when the new value is NaN); a NaN still
  // poisons its column through exp and the sum.
  for (std::int64_t k = 0; k < len; ++k) {
    const float* row = x + k * ld;
    prefetch_row(next == nullptr ? nullptr : next + k * ld, kVectors);
    for (int v = 0; v < kVectors; ++v) m[v] = _mm512_max_ps(_mm512_maskz_loadu_ps(mask[v], row + 16 * v), m[v]);
  }
  if (log) {
    for (std::int64_t k = 0; k < len; ++k) {
      const float* row = x + k * ld;
      for (int v = 0; v < kVectors; ++v)
        s[v] = _mm512_add_ps(s[v], exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask[v], row + 16 * v), m[v])));
    }
    // (x - max) - log(sum), not x - (max + log(sum)): with logits of 1e4 the latter loses the
    // small result to the rounding of the large shift. One log per column, against len exps.
    __m512 log_sum[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      alignas(64) float lanes_of_sum[16];
      _mm512_store_ps(lanes_of_sum, s[v]);
      for (float& l : lanes_of_sum) l = std::log(l);
      log_sum[v] = _mm512_load_ps(lanes_of_sum);
    }
    for (std::int64_t k = 0; k < len; ++k) {
      const float* row = x + k * ld;
      float* out = y + k * ld;
      for (int v = 0; v < kVectors; ++v) {
        const __m512 shifted = _mm512_sub_ps(_mm512_maskz_loadu_ps(mask[v], row + 16 * v), m[v]);
        store_out(out + 16 * v, mask[v], _mm512_sub_ps(shifted, log_sum[v]), bypass_cache);
      }
    }
    return;
  }
  for (std::int64_t k = 0; k < len; ++k) {
    const float* row = x + k * ld;
    float* staged = e + k * lde;
    for (int v = 0; v < kVectors; ++v) {
      const __m512 ev = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask[v], row + 16 * v), m[v]));
      s[v] = _mm512_add_ps(s[v], ev);
      _mm512_mask_storeu_ps(staged + 16 * v, mask[v], ev);
    }
  }
  __m512 inv[kVectors];
  for (int v = 0; v < kVectors; ++v) inv[v] = _mm512_div_ps(_mm512_set1_ps(1.0f), s[v]);
  for (std::int64_t k = 0; k < len; ++k) {
    const float* staged = e + k * lde;
    float* out = y + k * ld;
    for (int v = 0; v < kVectors; ++v)
      store_out(out + 16 * v, mask[v], _mm512_mul_ps(_mm512_maskz_loadu_ps(mask[v], staged + 16 * v), inv[v]),
                bypass_cache);
  }
}

template <int kVectors>
void backward_block(const float* dy, const float* y, float* dx, std::int64_t ld, std::int64_t len,
                    std::int64_t width, bool log, const float* next_dy, const float* next_y, bool bypass_cache) {
  __mmask16 mask[kVectors];
  __m512 s[kVectors];
  for (int v = 0; v < kVectors; ++v) {
    mask[v] = lanes(width - 16 * v);
    s[v] = _mm512_setzero_ps();
  }
  // Softmax: dx = y (dy - sum(dy y)); log-softmax: dx = dy - exp(y) sum(dy).
  for (std::int64_t k = 0; k < len; ++k) {
    const float* g = dy + k * ld;
    const float* o = y + k * ld;
    prefetch_row(next_dy == nullptr ? nullptr : next_dy + k * ld, kVectors);
    if (log) {
      for (int v = 0; v < kVectors; ++v) s[v] = _mm512_add_ps(s[v], _mm512_maskz_loadu_ps(mask[v], g + 16 * v));
    } else {
      prefetch_row(next_y == nullptr ? nullptr : next_y + k * ld, kVectors);
      for (int v = 0; v < kVectors; ++v)
        s[v] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask[v], g + 16 * v), _mm512_maskz_loadu_ps(mask[v], o + 16 * v),
                               s[v]);
    }
  }
  for (std::int64_t k = 0; k < len; ++k) {
    const float* g = dy + k * ld;
    const float* o = y + k * ld;
    float* d = dx + k * ld;
    if (log) {
      // y is read here first: its next block is fetched now, one pass ahead.
      prefetch_row(next_y == nullptr ? nullptr : next_y + k * ld, kVectors);
      for (int v = 0; v < kVectors; ++v) {
        const __m512 ev = exp_ps(_mm512_maskz_loadu_ps(mask[v], o + 16 * v));
        store_out(d + 16 * v, mask[v], _mm512_fnmadd_ps(ev, s[v], _mm512_maskz_loadu_ps(mask[v], g + 16 * v)),
                  bypass_cache);
      }
    } else {
      for (int v = 0; v < kVectors; ++v) {
        const __m512 diff = _mm512_sub_ps(_mm512_maskz_loadu_ps(mask[v], g + 16 * v), s[v]);
        store_out(d + 16 * v, mask[v], _mm512_mul_ps(_mm512_maskz_loadu_ps(mask[v], o + 16 * v), diff),
                  bypass_cache);
      }
    }
  }
}

int vectors_per_block(std::int64_t len) {
  return static_cast<int>(min64(kMaxVectors, max64(1, kBlockFloats / (16 * max64(1, len)))));
}

// Blocks of `block` columns over [0, width); the last may be partial, and then takes the masked
// stores even when bypassing the cache (its rows are not whole vectors).
template <int kVectors>
void forward_blocks(const float* x, float* y, std::int64_t ld, std::int64_t len, std::int64_t width, bool log,
                    float* staging, bool bypass_cache) {
  constexpr std::int64_t block = 16 * kVectors;
  for (std::int64_t c = 0; c < width; c += block) {
    const std::int64_t w = min64(block, width - c);
    const float* next = c + block < width ? x + c + block : nullptr;
    float* e = staging != nullptr ? staging : y + c;
    const std::int64_t lde = staging != nullptr ? block : ld;
    forward_block<kVectors>(x + c, y + c, ld, len, w, log, e, lde, next, bypass_cache && w == block);
  }
}

template <int kVectors>
void backward_blocks(const float* dy, const float* y, float* dx, std::int64_t ld, std::int64_t len,
                     std::int64_t width, bool log, bool bypass_cache) {
  constexpr std::int64_t block = 16 * kVectors;
  for (std::int64_t c = 0; c < width; c += block) {
    const std::int64_t w = min64(block, width - c);
    const bool more = c + block < width;
    backward_block<kVectors>(dy + c, y + c, dx + c, ld, len, w, log, more ? dy + c + block : nullptr,
                             more ? y + c + block : nullptr, bypass_cache && w == block);
  }
}

}  // namespace

std::int64_t softmax_columns_block(std::int64_t len) { return 16 * vectors_per_block(len); }

std::int64_t softmax_columns_staging(std::int64_t len) {
  const std::int64_t floats = len * softmax_columns_block(len);
  return floats <= kMaxStagingFloats ? floats : 0;
}

void softmax_columns_forward(const float* x, float* y, std::int64_t ld, std::int64_t len, std::int64_t width,
                             bool log, float* staging, bool bypass_cache) {
  if (softmax_columns_staging(len) == 0) staging = nullptr;
  switch (vectors_per_block(len)) {
    case 1: forward_blocks<1>(x, y, ld, len, width, log, staging, bypass_cache); break;
    case 2: forward_blocks<2>(x, y, ld, len, width, log, staging, bypass_cache); break;
    case 3: forward_blocks<3>(x, y, ld, len, width, log, staging, bypass_cache); break;
    case 4: forward_blocks<4>(x, y, ld, len, width, log, staging, bypass_cache); break;
    case 5: forward_blocks<5>(x, y, ld, len, width, log, staging, bypass_cache); break;
    case 6: forward_blocks<6>(x, y, ld, len, width, log, staging, bypass_cache); break;
    case 7: forward_blocks<7>(x, y, ld, len, width, log, staging, bypass_cache); break;
    default: forward_blocks<8>(x, y, ld, len, width, log, staging, bypass_cache); break;
  }
  if (bypass_cache) _mm_sfence();
}

void softmax_columns_backward(const float* dy, const float* y, float* dx, std::int64_t ld, std::int64_t len,
                              std::int64_t width, bool log, bool bypass_cache) {
  switch (vectors_per_block(len)) {
    case 1: backward_blocks<1>(dy, y, dx, ld, len, width, log, bypass_cache); break;
    case 2: backward_blocks<2>(dy, y, dx, ld, len, width, log, bypass_cache); break;
    case 3: backward_blocks<3>(dy, y, dx, ld, len, width, log, bypass_cache); break;
    case 4: backward_blocks<4>(dy, y, dx, ld, len, width, log, bypass_cache); break;
    case 5: backward_blocks<5>(dy, y, dx, ld, len, width, log, bypass_cache); break;
    case 6: backward_blocks<6>(dy, y, dx, ld, len, width, log, bypass_cache); break;
    case 7: backward_blocks<7>(dy, y, dx, ld, len, width, log, bypass_cache); break;
    default: backward_blocks<8>(dy, y, dx, ld, len, width, log, bypass_cache); break;
  }
  if (bypass_cache) _mm_sfence();
}

}  // namespace galley::backends::cpu::avx512
