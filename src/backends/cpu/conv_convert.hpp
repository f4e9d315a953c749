// f16/bf16 <-> f32 conversion for the cpu conv solvers, which store low precision and compute in
// f32. Vectorised with F16C/AVX2 where the CPU has it, threaded over the pool for large tensors.
#pragma once

#include <cstddef>
#include <cstdint>

#include "galley/core/dtype.hpp"

namespace galley::backends::cpu {

/// dst[i] = float(src[i]) for `count` elements of `dtype` (f32, f16 or bf16).
void convert_to_f32(DType dtype, const void* src, float* dst, std::size_t count);
/// dst[i] = dtype(src[i]), round to nearest even (NaN stays NaN).
void convert_from_f32(DType dtype, const float* src, void* dst, std::size_t count);

namespace avx2 {
// Single-threaded AVX2/F16C loops (conv_convert_avx2.cpp); callers check cpu_has_f16c() first.
void half_to_float(const std::uint16_t* src, float* dst, std::size_t count);
void float_to_half(const float* src, std::uint16_t* dst, std::size_t count);
void bf16_to_float(const std::uint16_t* src, float* dst, std::size_t count);
void float_to_bf16(const float* src, std::uint16_t* dst, std::size_t count);
}  // namespace avx2

}  // namespace galley::backends::cpu
