// Direct kernels of the two backward depthwise convolutions (groups == C == K: one R x S filter
// per channel) on f32 tensors, as free functions; conv_bwd_solvers.cpp wraps them as
// cpu.conv.bwd_data_depthwise and cpu.conv.bwd_weights_depthwise. Each output element costs R*S
// multiply-adds on data read once, so the loops aim at memory bandwidth with plain loops the
// compiler vectorises: over output columns in NCHW, over channels in NHWC.
#pragma once

#include <cstddef>

#include "backends/cpu/conv_base.hpp"

namespace galley::backends::cpu::bwd {

/// Workspace of data_depthwise for `s`.
std::size_t data_depthwise_workspace(const ConvShape& s);
/// dx = conv_backward_data(dy, w) for a depthwise `s`; writes every element of dx.
void data_depthwise(const ConvShape& s, const float* dy, const float* w, float* dx, void* ws);

/// Workspace of weights_depthwise for `s`.
std::size_t weights_depthwise_workspace(const ConvShape& s);
/// dw = conv_backward_weights(x, dy) for a depthwise `s`; dw += that when `accumulate`.
void weights_depthwise(const ConvShape& s, const float* x, const float* dy, float* dw, bool accumulate,
                       void* ws);

}  // namespace galley::backends::cpu::bwd
