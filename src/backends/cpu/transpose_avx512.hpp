// Transposes of 4-byte elements with AVX-512 (transpose_avx512.cpp, entered only after
// cpu_has_avx512()), for the cpu data movement's blocked transpose: 16 x 16 blocks transposed in
// registers, so every load and store is a whole vector of 16 elements rather than one element.
#pragma once

#include <cstdint>

namespace galley::backends::cpu::avx512 {

/// dst[x * dst_stride + y] = src[y * src_stride + x] for y in [0, rows), x in [0, cols).
void transpose_32bit(const std::uint32_t* src, std::int64_t src_stride, std::uint32_t* dst,
                     std::int64_t dst_stride, std::int64_t rows, std::int64_t cols);

}  // namespace galley::backends::cpu::avx512
