// The fused epilogue of the single-source GPU conv solvers, y = act(y + bias[k] + residual) (see
// dnn::ConvEpilogue), as one pass over y right after the solver's own kernel on the same stream:
// one read and write of y in place of the unfused sequence's three.
#pragma once

#include "galley/dnn/conv_problem.hpp"

namespace galley::backends::gpu {

/// Enqueues the epilogue of `problem` on the native `stream`: y (written by the convolution, in
/// the problem's dtype and layout) is updated in place with f32 arithmetic. No-op without one.
void launch_conv_epilogue(const dnn::ConvProblem& problem, void* y, const void* bias, const void* residual,
                          void* stream);

}  // namespace galley::backends::gpu
