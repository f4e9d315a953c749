// Transposes of 4-byte elements with AVX-512 (transpose_avx512.cpp, entered only after
// cpu_has_avx512()), for the cpu data movement's blocked transpose: 16 x 16 blocks transposed in
// registers, so every load and store is a whole vector of 16 elements rather than one element.
#pragma once

#include <cstdint>

namespace galley::backends::cpu::avx512 {

/// dst[x * dst_stride + y] = src[y * src_stride + x] for y in [0, rows), x in [0, cols).
/// next_src, when not null, is the next call's src (next_rows rows of `cols` elements,
/// src_stride apart), whose lines this call asks for as it goes: the rows of a tile lie a plane
/// apart, in runs too short for the hardware prefetchers. With `stream`, the whole 16 x 16 blocks
/// whose dst rows start 64-byte aligned are written with non-temporal stores, for outputs far
/// beyond the caches; the caller fences them (stream_fence()) before the data is used.
void transpose_32bit(const std::uint32_t* src, std::int64_t src_stride, std::uint32_t* dst,
                     std::int64_t dst_stride, std::int64_t rows, std::int64_t cols,
                     const std::uint32_t* next_src = nullptr, std::int64_t next_rows = 0,
                     bool stream = false);

/// Orders the calling thread's non-temporal stores before its later stores (sfence).
void stream_fence();

}  // namespace galley::backends::cpu::avx512
