#include "backends/cpu/conv_convert.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::cpu {
namespace {

// Below this many elements a pool round trip costs more than the conversion itself.
constexpr std::size_t kParallelThreshold = 1 << 16;

template <typename Fn>
void for_blocks(std::size_t count, Fn&& fn) {
  if (count < kParallelThreshold) {
    fn(std::size_t{0}, count);
    return;
  }
  // Blocks of 4096 elements keep every chunk boundary aligned for the vector loops.
  const auto blocks = static_cast<std::int64_t>((count + 4095) / 4096);
  parallel_for(0, blocks, [&](std::int64_t lo, std::int64_t hi) {
    const std::size_t begin = static_cast<std::size_t>(lo) * 4096;
    const std::size_t end = std::min(count, static_cast<std::size_t>(hi) * 4096);
    fn(begin, end);
  });
}

void check_dtype(DType dtype, const char* what) {
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) {
    throw Error(Status::invalid_argument,
                std::string(what) + ": dtype " + to_string(dtype) + " is not a float type (valid: f32, f16, bf16)");
  }
}

}  // namespace

void convert_to_f32(DType dtype, const void* src, float* dst, std::size_t count) {
  check_dtype(dtype, "convert_to_f32");
  if (dtype == DType::f32) {
    for_blocks(count, [&](std::size_t b, std::size_t e) {
      std::memcpy(dst + b, static_cast<const float*>(src) + b, (e - b) * sizeof(float));
    });
    return;
  }
  const auto* in = static_cast<const std::uint16_t*>(src);
  const bool simd = cpu_has_f16c();
  for_blocks(count, [&](std::size_t b, std::size_t e) {
    if (dtype == DType::f16) {
      if (simd) {
        avx2::half_to_float(in + b, dst + b, e - b);
      } else {
        for (std::size_t i = b; i < e; ++i) dst[i] = half_to_float(in[i]);
      }
    } else {
      if (simd) {
        avx2::bf16_to_float(in + b, dst + b, e - b);
      } else {
        for (std::size_t i = b; i < e; ++i) dst[i] = bfloat16_to_float(in[i]);
      }
    }
  });
}

void convert_from_f32(DType dtype, const float* src, void* dst, std::size_t count) {
  check_dtype(dtype, "convert_from_f32");
  if (dtype == DType::f32) {
    for_blocks(count, [&](std::size_t b, std::size_t e) {
      std::memcpy(static_cast<float*>(dst) + b, src + b, (e - b) * sizeof(float));
    });
    return;
  }
  auto* out = static_cast<std::uint16_t*>(dst);
  const bool simd = cpu_has_f16c();
  for_blocks(count, [&](std::size_t b, std::size_t e) {
    if (dtype == DType::f16) {
      if (simd) {
        avx2::float_to_half(src + b, out + b, e - b);
      } else {
        for (std::size_t i = b; i < e; ++i) out[i] = float_to_half(src[i]);
      }
    } else {
      if (simd) {
        avx2::float_to_bf16(src + b, out + b, e - b);
      } else {
        for (std::size_t i = b; i < e; ++i) out[i] = float_to_bfloat16(src[i]);
      }
    }
  });
}

}  // namespace galley::backends::cpu
