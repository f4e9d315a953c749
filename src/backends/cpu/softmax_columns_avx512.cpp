// See softmax_columns_avx512.hpp. Compiled with AVX-512 F/BW/VL/DQ; nothing here instantiates a
// standard-library template (see sgemm_avx512.cpp).
#include "backends/cpu/softmax_columns_avx512.hpp"

#include <immintrin.h>
#include <math.h>

#include "backends/cpu/avx512_lanes.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

// Up to this many vectors of columns per block: their maxima and sums stay in registers.
constexpr int kMaxVectors = 8;
// At least this many: a block reads (and writes) runs of two cache lines of every row, one plane
// apart. Rows of one line each, at a long axis (over 128), leave each of the memory's row
// activations and prefetched pairs of lines half used: NCHW softmax over 256 channels of 56 x 56
// from memory ran at about 60% of its speed with two-line rows. Such a block leaves L1 for L2.
constexpr int kMinVectors = 2;
// A block's input rows (or, in backward, dy's and y's) plus its staged exponentials: 32 KB of the
// 48 KB L1, the rest left to y's lines and the stack.
constexpr std::int64_t kBlockFloats = 4096;
// Beyond this, staging would leave L2 too; the exponentials are staged in y instead.
constexpr std::int64_t kMaxStagingFloats = 64 * 1024;

// e^t as 2^u with u = t log2(e): 2^floor(u) applied by vscalefps to 2^f, f = u - floor(u) in
// [0, 1) from vreduceps, by a degree-5 polynomial fitted for relative error (1.6e-7 on [0, 1)).
// Rounding u costs relative error |u| 2^-24 on top, which only matters where e^t is below e^-10 of
// the column's largest term, 1. No clamp: vreduceps gives 0 for -inf and inf, and vscalefps then
// gives exactly 0 and inf, for them and for any u beyond the float range; NaN passes through both.
inline __m512 exp_ps(__m512 t) {
  const __m512 u = _mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f));
  const __m512 f = _mm512_reduce_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 p = _mm512_set1_ps(0.0018775728531181812f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.008989349007606506f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.05582631006836891f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.24015362560749054f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.6931530833244324f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.9999999403953552f));
  return _mm512_scalef_ps(p, u);
}

// How a block's rows are read and written: a partial block (the last of a run) through lane masks,
// a whole one with plain full-width loads and stores, or with non-temporal stores for outputs that
// bypass the caches (then rows start 64-byte aligned).
enum class Access { masked, whole, whole_streamed };

template <Access kAccess>
inline __m512 load_row(__mmask16 mask, const float* p) {
  if constexpr (kAccess == Access::masked) {
    return _mm512_maskz_loadu_ps(mask, p);
  } else {
    return _mm512_loadu_ps(p);
  }
}

template <Access kAccess>
inline void store_row(__mmask16 mask, float* p, __m512 v) {
  if constexpr (kAccess == Access::masked) {
    _mm512_mask_storeu_ps(p, mask, v);
  } else if constexpr (kAccess == Access::whole) {
    _mm512_storeu_ps(p, v);
  } else {
    _mm512_stream_ps(p, v);
  }
}

// Lines of the next block, asked into L2 while this block computes: the block's rows lie ld
// apart, in runs too short for the hardware prefetchers to follow. Callers test for a next block
// themselves: GCC 12 drops the prefetches of a row pointer formed as `next ? next + k * ld : nullptr`
// and tested for null in here.
inline void prefetch_row(const float* next_row, int vectors) {
  for (int v = 0; v < vectors; ++v)
    _mm_prefetch(reinterpret_cast<const char*>(next_row + 16 * v), _MM_HINT_T1);
}

// One block of `width` <= 16 * kVectors columns. `next` is the next block's first row (nullptr:
// none); `e` stages the exponentials, its rows `lde` floats apart (it may be y itself). Softmax and
// log-softmax are separate instantiations: the log's library call would otherwise make GCC keep
// the maxima in memory through every loop.
template <int kVectors, bool kLog, Access kAccess>
void forward_block(const float* x, float* y, std::int64_t ld, std::int64_t len, std::int64_t width, float* e,
                   std::int64_t lde, const float* next) {
  // Staging is plain cached memory: never streamed.
  constexpr Access kStaging = kAccess == Access::masked ? Access::masked : Access::whole;
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
    if (next != nullptr) prefetch_row(next + k * ld, kVectors);
    for (int v = 0; v < kVectors; ++v) m[v] = _mm512_max_ps(load_row<kAccess>(mask[v], row + 16 * v), m[v]);
  }
  if constexpr (kLog) {
    for (std::int64_t k = 0; k < len; ++k) {
      const float* row = x + k * ld;
      for (int v = 0; v < kVectors; ++v)
        s[v] = _mm512_add_ps(s[v], exp_ps(_mm512_sub_ps(load_row<kAccess>(mask[v], row + 16 * v), m[v])));
    }
    // (x - max) - log(sum), not x - (max + log(sum)): with logits of 1e4 the latter loses the
    // small result to the rounding of the large shift. One log per column, against len exps.
    __m512 log_sum[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      alignas(64) float lanes_of_sum[16];
      _mm512_store_ps(lanes_of_sum, s[v]);
      // logf, the C library's: an inline C++ overload compiled here could be the copy the linker
      // keeps for every caller.
      for (float& l : lanes_of_sum) l = logf(l);
      log_sum[v] = _mm512_load_ps(lanes_of_sum);
    }
    for (std::int64_t k = 0; k < len; ++k) {
      const float* row = x + k * ld;
      float* out = y + k * ld;
      for (int v = 0; v < kVectors; ++v) {
        const __m512 shifted = _mm512_sub_ps(load_row<kAccess>(mask[v], row + 16 * v), m[v]);
        store_row<kAccess>(mask[v], out + 16 * v, _mm512_sub_ps(shifted, log_sum[v]));
      }
    }
  } else {
    for (std::int64_t k = 0; k < len; ++k) {
      const float* row = x + k * ld;
      float* staged = e + k * lde;
      for (int v = 0; v < kVectors; ++v) {
        const __m512 ev = exp_ps(_mm512_sub_ps(load_row<kAccess>(mask[v], row + 16 * v), m[v]));
        s[v] = _mm512_add_ps(s[v], ev);
        store_row<kStaging>(mask[v], staged + 16 * v, ev);
      }
    }
    __m512 inv[kVectors];
    for (int v = 0; v < kVectors; ++v) inv[v] = _mm512_div_ps(_mm512_set1_ps(1.0f), s[v]);
    for (std::int64_t k = 0; k < len; ++k) {
      const float* staged = e + k * lde;
      float* out = y + k * ld;
      for (int v = 0; v < kVectors; ++v)
        store_row<kAccess>(mask[v], out + 16 * v,
                           _mm512_mul_ps(load_row<kStaging>(mask[v], staged + 16 * v), inv[v]));
    }
  }
}

// Softmax: dx = y (dy - sum(dy y)); log-softmax: dx = dy - exp(y) sum(dy).
template <int kVectors, bool kLog, Access kAccess>
void backward_block(const float* dy, const float* y, float* dx, std::int64_t ld, std::int64_t len,
                    std::int64_t width, const float* next_dy, const float* next_y) {
  __mmask16 mask[kVectors];
  __m512 s[kVectors];
  for (int v = 0; v < kVectors; ++v) {
    mask[v] = lanes(width - 16 * v);
    s[v] = _mm512_setzero_ps();
  }
  for (std::int64_t k = 0; k < len; ++k) {
    const float* g = dy + k * ld;
    const float* o = y + k * ld;
    if (next_dy != nullptr) prefetch_row(next_dy + k * ld, kVectors);
    if constexpr (kLog) {
      for (int v = 0; v < kVectors; ++v) s[v] = _mm512_add_ps(s[v], load_row<kAccess>(mask[v], g + 16 * v));
    } else {
      if (next_y != nullptr) prefetch_row(next_y + k * ld, kVectors);
      for (int v = 0; v < kVectors; ++v)
        s[v] = _mm512_fmadd_ps(load_row<kAccess>(mask[v], g + 16 * v), load_row<kAccess>(mask[v], o + 16 * v),
                               s[v]);
    }
  }
  for (std::int64_t k = 0; k < len; ++k) {
    const float* g = dy + k * ld;
    const float* o = y + k * ld;
    float* d = dx + k * ld;
    if constexpr (kLog) {
      // y is read here first: its next block is fetched now, one pass ahead.
      if (next_y != nullptr) prefetch_row(next_y + k * ld, kVectors);
      for (int v = 0; v < kVectors; ++v) {
        const __m512 ev = exp_ps(load_row<kAccess>(mask[v], o + 16 * v));
        store_row<kAccess>(mask[v], d + 16 * v,
                           _mm512_fnmadd_ps(ev, s[v], load_row<kAccess>(mask[v], g + 16 * v)));
      }
    } else {
      for (int v = 0; v < kVectors; ++v) {
        const __m512 diff = _mm512_sub_ps(load_row<kAccess>(mask[v], g + 16 * v), s[v]);
        store_row<kAccess>(mask[v], d + 16 * v, _mm512_mul_ps(load_row<kAccess>(mask[v], o + 16 * v), diff));
      }
    }
  }
}

int vectors_per_block(std::int64_t len) {
  return static_cast<int>(min64(kMaxVectors, max64(kMinVectors, kBlockFloats / (16 * max64(1, len)))));
}

// Blocks of `block` columns over [0, width); the last may be partial and then goes through lane
// masks (its rows are not whole vectors, so it never takes the non-temporal stores either).
template <int kVectors, bool kLog>
void forward_blocks(const float* x, float* y, std::int64_t ld, std::int64_t len, std::int64_t width,
                    float* staging, bool bypass_cache) {
  constexpr std::int64_t block = 16 * kVectors;
  for (std::int64_t c = 0; c < width; c += block) {
    const std::int64_t w = min64(block, width - c);
    // Prefetching pays where the tensor comes from memory; from the caches it only adds work.
    const float* next = bypass_cache && c + block < width ? x + c + block : nullptr;
    float* e = staging != nullptr ? staging : y + c;
    const std::int64_t lde = staging != nullptr ? block : ld;
    if (w < block) {
      forward_block<kVectors, kLog, Access::masked>(x + c, y + c, ld, len, w, e, lde, next);
    } else if (bypass_cache) {
      forward_block<kVectors, kLog, Access::whole_streamed>(x + c, y + c, ld, len, w, e, lde, next);
    } else {
      forward_block<kVectors, kLog, Access::whole>(x + c, y + c, ld, len, w, e, lde, next);
    }
  }
}

template <int kVectors, bool kLog>
void backward_blocks(const float* dy, const float* y, float* dx, std::int64_t ld, std::int64_t len,
                     std::int64_t width, bool bypass_cache) {
  constexpr std::int64_t block = 16 * kVectors;
  for (std::int64_t c = 0; c < width; c += block) {
    const std::int64_t w = min64(block, width - c);
    const bool more = bypass_cache && c + block < width;  // as forward_blocks
    const float* next_dy = more ? dy + c + block : nullptr;
    const float* next_y = more ? y + c + block : nullptr;
    if (w < block) {
      backward_block<kVectors, kLog, Access::masked>(dy + c, y + c, dx + c, ld, len, w, next_dy, next_y);
    } else if (bypass_cache) {
      backward_block<kVectors, kLog, Access::whole_streamed>(dy + c, y + c, dx + c, ld, len, w, next_dy,
                                                             next_y);
    } else {
      backward_block<kVectors, kLog, Access::whole>(dy + c, y + c, dx + c, ld, len, w, next_dy, next_y);
    }
  }
}

template <int kVectors>
void forward_any(const float* x, float* y, std::int64_t ld, std::int64_t len, std::int64_t width, bool log,
                 float* staging, bool bypass_cache) {
  if (log) {
    forward_blocks<kVectors, true>(x, y, ld, len, width, staging, bypass_cache);
  } else {
    forward_blocks<kVectors, false>(x, y, ld, len, width, staging, bypass_cache);
  }
}

template <int kVectors>
void backward_any(const float* dy, const float* y, float* dx, std::int64_t ld, std::int64_t len,
                  std::int64_t width, bool log, bool bypass_cache) {
  if (log) {
    backward_blocks<kVectors, true>(dy, y, dx, ld, len, width, bypass_cache);
  } else {
    backward_blocks<kVectors, false>(dy, y, dx, ld, len, width, bypass_cache);
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
    case 1:
      forward_any<1>(x, y, ld, len, width, log, staging, bypass_cache);
      break;
    case 2:
      forward_any<2>(x, y, ld, len, width, log, staging, bypass_cache);
      break;
    case 3:
      forward_any<3>(x, y, ld, len, width, log, staging, bypass_cache);
      break;
    case 4:
      forward_any<4>(x, y, ld, len, width, log, staging, bypass_cache);
      break;
    case 5:
      forward_any<5>(x, y, ld, len, width, log, staging, bypass_cache);
      break;
    case 6:
      forward_any<6>(x, y, ld, len, width, log, staging, bypass_cache);
      break;
    case 7:
      forward_any<7>(x, y, ld, len, width, log, staging, bypass_cache);
      break;
    default:
      forward_any<8>(x, y, ld, len, width, log, staging, bypass_cache);
      break;
  }
  if (bypass_cache) _mm_sfence();
}

void softmax_columns_backward(const float* dy, const float* y, float* dx, std::int64_t ld, std::int64_t len,
                              std::int64_t width, bool log, bool bypass_cache) {
  switch (vectors_per_block(len)) {
    case 1:
      backward_any<1>(dy, y, dx, ld, len, width, log, bypass_cache);
      break;
    case 2:
      backward_any<2>(dy, y, dx, ld, len, width, log, bypass_cache);
      break;
    case 3:
      backward_any<3>(dy, y, dx, ld, len, width, log, bypass_cache);
      break;
    case 4:
      backward_any<4>(dy, y, dx, ld, len, width, log, bypass_cache);
      break;
    case 5:
      backward_any<5>(dy, y, dx, ld, len, width, log, bypass_cache);
      break;
    case 6:
      backward_any<6>(dy, y, dx, ld, len, width, log, bypass_cache);
      break;
    case 7:
      backward_any<7>(dy, y, dx, ld, len, width, log, bypass_cache);
      break;
    default:
      backward_any<8>(dy, y, dx, ld, len, width, log, bypass_cache);
      break;
  }
  if (bypass_cache) _mm_sfence();
}

}  // namespace galley::backends::cpu::avx512
