// The GEMM lowerings of the two backward convolutions on f32 tensors, as free functions so that
// any solver frame can call them (conv_bwd_solvers.cpp wraps them as cpu.conv.bwd_data_gemm and
// cpu.conv.bwd_weights_gemm). Per group g, with the column orders of conv_bwd_columns.hpp:
//   data, NCHW:    dcol[CgRS x P] = W_g^T * dY_g,       then col2im adds dcol onto dx
//   data, NHWC:    dcol[P x RSCg] = dY_g * W_g,         then col2im
//   weights, NCHW: dW_g[Kg x CgRS] = sum_n dY_g * col^T  (col = im2col(x))
//   weights, NHWC: dW_g[Kg x RSCg] = sum  dY_g^T * col
// A 1x1 filter with unit stride and no padding needs no column buffer: x, dx are the columns.
#pragma once

#include <cstddef>

#include "backends/cpu/conv_base.hpp"

namespace galley::backends::cpu::bwd {

/// 1x1 filter, unit stride, no padding (dilation is then irrelevant): the columns are the image.
bool plain_1x1(const ConvShape& s);

/// Workspace of data_gemm for `s` (depends on the pool size, which is fixed for the process).
std::size_t data_gemm_workspace(const ConvShape& s);
/// dx = conv_backward_data(dy, w); writes every element of dx.
void data_gemm(const ConvShape& s, const float* dy, const float* w, float* dx, void* ws);

/// Workspace of weights_gemm for `s`.
std::size_t weights_gemm_workspace(const ConvShape& s);
/// dw = conv_backward_weights(x, dy) summed over the batch; dw += that sum when `accumulate`.
void weights_gemm(const ConvShape& s, const float* x, const float* dy, float* dw, bool accumulate, void* ws);

}  // namespace galley::backends::cpu::bwd
