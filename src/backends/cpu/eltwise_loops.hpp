// The inner loops of cpu.eltwise.direct on f32 spans, built once per ISA level from
// eltwise_loops.inc: baseline x86-64 (eltwise_loops.cpp), AVX2 + FMA (eltwise_loops_avx2.cpp) and
// AVX-512 (eltwise_loops_avx512.cpp), so the compiler vectorises the same plain loops at each width.
// An input either advances with dst (steps) or is one value for the whole span (a broadcast bias).
#pragma once

#include <cstdint>

#include "galley/dnn/eltwise.hpp"

namespace galley::backends::cpu {

/// One ISA level's set of loops.
struct EltwiseLoops {
  /// out[j] = (alpha * x[j]) op (beta * y[j]) for j < n; x[0] (y[0]) for every j where it does not step.
  void (*forward)(dnn::EltwiseOp op, const float* x, bool x_steps, const float* y, bool y_steps, float* out,
                  std::int64_t n, float alpha, float beta);
  /// out[j] = the gradient dst element j sends to input `which` (0: a, 1: b), from dy[j] and, for
  /// mul and div, the inputs x and y (which step as in forward).
  void (*gradient)(dnn::EltwiseOp op, int which, float alpha, float beta, const float* dy, const float* x,
                   bool x_steps, const float* y, bool y_steps, float* out, std::int64_t n);
  /// The sum of n floats, in independent f32 lanes added in double.
  double (*lane_sum)(const float* v, std::int64_t n);
};

namespace eltwise_scalar {
const EltwiseLoops& loops();
}
namespace eltwise_avx2 {
const EltwiseLoops& loops();
}
namespace eltwise_avx512 {
const EltwiseLoops& loops();
}

/// The best set this CPU may run (cpu_isa()).
const EltwiseLoops& eltwise_loops();

}  // namespace galley::backends::cpu
