// Inner loops of the cpu softmax and reduce solvers on f32 rows, written as plain loops the
// compiler vectorises: compiled three times from softmax_reduce_kernels.inc, for the baseline ISA
// (namespace scalar, softmax_reduce_kernels.cpp), for AVX2 + FMA (namespace avx2,
// softmax_reduce_kernels_avx2.cpp, entered only after cpu_has_avx2_fma()) and for AVX-512
// (namespace avx512, softmax_reduce_kernels_avx512.cpp, only after cpu_has_avx512()).
#pragma once

#include <cstdint>

#include "galley/core/dtype.hpp"

namespace galley::backends::cpu::softmax_kernels {

/// One ISA's set of loops.
struct Kernels {
  /// y = softmax(x) (or log-softmax) of `rows` contiguous rows of n elements each, back to back;
  /// y may alias x.
  void (*rows_forward)(const float* x, float* y, std::int64_t n, std::int64_t rows, bool log);
  /// dx from dy and y of one contiguous row; dx may alias dy.
  void (*row_backward)(const float* dy, const float* y, float* dx, std::int64_t n, bool log);
  /// Softmax along k of the columns [0, width) of a [len][width] slab whose rows start `ldx`
  /// (x) and `ldy` (y) floats apart; `m` and `s` hold `width` floats of scratch.
  void (*cols_forward)(const float* x, std::int64_t ldx, float* y, std::int64_t ldy, std::int64_t len,
                       std::int64_t width, bool log, float* m, float* s);
  /// The backward of cols_forward: rows of dy, y and dx `ld` floats apart; `s` is scratch.
  void (*cols_backward)(const float* dy, const float* y, float* dx, std::int64_t ld, std::int64_t len,
                        std::int64_t width, bool log, float* s);
  /// Sum of n contiguous floats, in f32 blocks added in double.
  double (*row_sum)(const float* x, std::int64_t n);
  /// acc[i] += x[i] for i < n.
  void (*row_add)(float* acc, const float* x, std::int64_t n);
  /// n elements of f32/f16/bf16 storage to float, and back rounded to nearest even: the same bits
  /// as dnn::to_float / from_float, vectorised (F16C in the AVX2 build).
  void (*load)(DType dtype, const void* src, float* dst, std::int64_t n);
  void (*store)(DType dtype, const float* src, void* dst, std::int64_t n);
};

namespace scalar {
const Kernels& kernels();
}
namespace avx2 {
const Kernels& kernels();
}
namespace avx512 {
const Kernels& kernels();
}

/// The best set this CPU may run (cpu_isa()).
const Kernels& best();

}  // namespace galley::backends::cpu::softmax_kernels
