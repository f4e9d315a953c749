// The plain unit-stride row operations declared in conv_bwd_depthwise_kernels.hpp, for the files that
// build those loops without intrinsics (the baseline and AVX2 builds); the compiler vectorises
// them at the file's instruction set. Internal linkage, as the kernels.
#pragma once

#include <cstdint>

#include "backends/cpu/conv_bwd_depthwise_kernels.hpp"

namespace galley::backends::cpu::bwd {

namespace {

void row_axpy(float* out, const float* in, float a, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] += a * in[i];
}

void row_dot_lanes(float* lanes, const float* g, const float* in, std::int64_t count) {
  const std::int64_t whole = count / kLanes * kLanes;
  for (std::int64_t i = 0; i < whole; i += kLanes) {
    for (std::int64_t j = 0; j < kLanes; ++j) lanes[j] += g[i + j] * in[i + j];
  }
  for (std::int64_t i = whole; i < count; ++i) lanes[i - whole] += g[i] * in[i];
}

void row_dot_taps(float* lanes, const float* g, const float* in, const std::int64_t* offsets,
                  std::int64_t taps, std::int64_t count) {
  for (std::int64_t t = 0; t < taps; ++t) row_dot_lanes(lanes + t * kLanes, g, in + offsets[t], count);
}

}  // namespace

}  // namespace galley::backends::cpu::bwd
