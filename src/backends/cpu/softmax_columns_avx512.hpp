// Softmax along a strided axis of f32 with AVX-512 (softmax_columns_avx512.cpp, entered only after
// cpu_has_avx512()): the axis runs down the rows of a [len][ld] slab (NCHW channels: len = C,
// ld = H * W) and every column is one independent softmax. A block of up to a few vectors of
// columns is taken through all len rows at once: the max pass brings the block's rows into L1 and
// the later passes find them there, so each input byte comes from memory once and each output byte
// is written once.
#pragma once

#include <cstdint>

namespace galley::backends::cpu::avx512 {

/// Columns per block for an axis of `len`: the block's input rows and its staged exponentials
/// together fill about half of L1, and at least two vectors. A multiple of 16.
std::int64_t softmax_columns_block(std::int64_t len);

/// Floats of staging that softmax_columns_forward needs for an axis of `len` (0: the exponentials
/// are staged in y itself, for axes too long for the block to stay in L1 anyway).
std::int64_t softmax_columns_staging(std::int64_t len);

/// y = softmax (or log-softmax) along the rows of the columns [0, width) of x; rows of x and y are
/// `ld` floats apart, y may alias x. `staging` holds softmax_columns_staging(len) floats. With
/// `bypass_cache`, y is written with non-temporal stores (then y and ld must make every row start
/// 64-byte aligned); the stores are fenced before returning.
void softmax_columns_forward(const float* x, float* y, std::int64_t ld, std::int64_t len, std::int64_t width,
                             bool log, float* staging, bool bypass_cache);

/// dx from dy and y (the forward's output) for the same slabs; dx may alias dy. `bypass_cache` as
/// above, for dx.
void softmax_columns_backward(const float* dy, const float* y, float* dx, std::int64_t ld, std::int64_t len,
                              std::int64_t width, bool log, bool bypass_cache);

}  // namespace galley::backends::cpu::avx512
