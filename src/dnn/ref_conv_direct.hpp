// The reference convolution (`ref.conv.direct`): the ground truth that every other solver, the
// conformance tests and `galley bench conv -V 1` are checked against. Internal to libgalley, tests
// and the CLI.
#pragma once

#include <memory>

#include "galley/dnn/conv_solver.hpp"

namespace galley::dnn {

/// The name of the reference solver, registered last on backend "cpu".
inline constexpr const char* kRefConvDirectName = "ref.conv.direct";

/// Synchronous forward convolution on host memory: x, w and y are packed in problem.layout and
/// problem.dtype. Products and sums are in double, rounded at the end (to f32, then to the storage
/// type), so the result is as close to exact as the output type allows. Parallel over host threads
/// (GALLEY_NUM_THREADS, else all hardware threads). Validates the problem first. A fused epilogue is
/// applied to the double sum (bias and residual added, then the activation in double) before the
/// one rounding; `bias` ([K]) and `residual` (shaped as y) must then be given, and not overlap y.
void reference_conv_forward(const ConvProblem& problem, const void* x, const void* w, void* y,
                            const void* bias = nullptr, const void* residual = nullptr);

/// The reference as a solver, the last entry of the cpu conv list.
std::unique_ptr<ConvSolver> make_ref_conv_direct();

}  // namespace galley::dnn
