// Element types. f16/bf16 are storage types: Galley computes on them in f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace galley {

/// Element type of a tensor.
enum class DType { f32, f16, bf16, i32, i8 };

/// Bytes per element.
std::size_t size_of(DType dtype) noexcept;
/// Lower-case name: "f32", "f16", "bf16", "i32", "i8".
const char* to_string(DType dtype) noexcept;
/// Parses a name produced by to_string; throws Error(invalid_argument) listing valid names.
DType parse_dtype(std::string_view name);

/// IEEE half and bfloat16 conversions (round to nearest even), usable from any backend's host code.
std::uint16_t float_to_half(float value) noexcept;
float half_to_float(std::uint16_t bits) noexcept;
std::uint16_t float_to_bfloat16(float value) noexcept;
float bfloat16_to_float(std::uint16_t bits) noexcept;

}  // namespace galley
