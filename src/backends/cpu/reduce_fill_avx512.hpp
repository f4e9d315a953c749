// One value over a run of f32 (the backward broadcast of a reduction or of global average pooling)
// with AVX-512 stores (reduce_fill_avx512.cpp, entered only after cpu_has_avx512()): whole 64-byte
// lines per store, where the baseline build's fill stores 16 bytes at a time and a cache-sized
// output is bound by the store count.
#pragma once

#include <cstdint>

namespace galley::backends::cpu::avx512 {

/// dst[0, n) = v; with bypass_cache the aligned lines are stored non-temporally and the stores are
/// fenced before returning, as fill_f32() (broadcast_fill.hpp) does.
void fill_f32(float* dst, std::int64_t n, float v, bool bypass_cache);

}  // namespace galley::backends::cpu::avx512
