// The public convolution entry points, all three directions: validate, pick a solver, get
// workspace, run on a stream (through the one dispatch path every op takes).
#pragma once

#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/dnn/prepared_weights.hpp"
#include "galley/dnn/tensor.hpp"
#include "galley/runtime/stream.hpp"
#include "galley/tensor.hpp"

namespace galley::dnn {

// Every entry point takes the problem that describes the forward convolution (shapes, dtype,
// layout); its `direction` may be left `forward` or name the entry point's own direction, anything
// else throws Error(invalid_argument). Tensors are memory of stream.device(), packed in
// problem.layout. With `solver` null the tuner chooses (tuning::default_tuner(); GALLEY_FIND_MODE=off
// gives the list's first applicable solver); a given solver must belong to the device's backend and
// accept the problem, else Error(unsupported) with its reason. Workspace comes from the caching
// allocator, stream-ordered. Like every stream op they return before the work is done. With
// GALLEY_LOG_CMD=1 each prints the `galley bench conv` line that reproduces the call. Each returns
// the solver that ran; `report`, when given, also receives its config and whether the tuner's
// choice was a stored hit, tuned now or the list order.

/// y = conv(x, w). The descriptors must have the dims and dtype of problem.x_desc(), w_desc(),
/// y_desc() and packed strides; anything else throws Error(invalid_argument) naming the tensor.
const ConvSolver& convolution_forward(runtime::Stream& stream, const ConvProblem& problem,
                                      const TensorDesc& x_desc, const void* x, const TensorDesc& w_desc,
                                      const void* w, const TensorDesc& y_desc, void* y,
                                      const ConvSolver* solver = nullptr, CallReport* report = nullptr);

/// y = conv(x, w) with the problem's own packed descriptors.
const ConvSolver& convolution_forward(runtime::Stream& stream, const ConvProblem& problem, const void* x,
                                      const void* w, void* y, const ConvSolver* solver = nullptr, CallReport* report = nullptr);

/// dx = the gradient of conv(x, w) with respect to x, given dy (shaped as y) and w. dx is written,
/// not accumulated into (MIOpen's -F 2).
const ConvSolver& convolution_backward_data(runtime::Stream& stream, const ConvProblem& problem, const void* dy,
                                            const void* w, void* dx, const ConvSolver* solver = nullptr, CallReport* report = nullptr);

/// dw = the gradient of conv(x, w) with respect to w, given x and dy. dw is written, not
/// accumulated into (MIOpen's -F 4).
const ConvSolver& convolution_backward_weights(runtime::Stream& stream, const ConvProblem& problem,
                                               const void* x, const void* dy, void* dw,
                                               const ConvSolver* solver = nullptr, CallReport* report = nullptr);

// The same with galley::Tensor arguments: each tensor is checked against the problem (device,
// dtype, dims, packed strides, storage size, alignment) and a mismatch is Error(invalid_argument)
// naming it ("y (output) holds 4000 bytes, the problem needs 4096"), so a short buffer is never
// overrun. `prepared` (forward only; null: none) lets the solver keep w in its own form across
// calls with the same slot (prepared_weights.hpp): give one only for weights that do not change.
const ConvSolver& convolution_forward(runtime::Stream& stream, const ConvProblem& problem, const Tensor& x,
                                      const Tensor& w, Tensor& y, const ConvSolver* solver = nullptr,
                                      CallReport* report = nullptr,
                                      std::shared_ptr<PreparedWeights> prepared = nullptr);
const ConvSolver& convolution_backward_data(runtime::Stream& stream, const ConvProblem& problem, const Tensor& dy,
                                            const Tensor& w, Tensor& dx, const ConvSolver* solver = nullptr, CallReport* report = nullptr);
const ConvSolver& convolution_backward_weights(runtime::Stream& stream, const ConvProblem& problem, const Tensor& x,
                                               const Tensor& dy, Tensor& dw, const ConvSolver* solver = nullptr, CallReport* report = nullptr);

/// The fused forward: y = activation(conv(x, w) + bias[k] + residual) as problem.epilogue says
/// (see ConvEpilogue). `bias` (a [K] tensor of the problem's dtype) and `residual` (shaped as y)
/// are given exactly when the epilogue has them and are null otherwise; a tensor given for a part
/// the epilogue lacks, one missing for a part it has, a mismatched one, or a residual overlapping y
/// is Error(invalid_argument) naming it. With `solver` null the tuner chooses among the fused
/// solvers and the unfused sequence (`<backend>.conv.unfused`).
const ConvSolver& convolution_forward(runtime::Stream& stream, const ConvProblem& problem, const Tensor& x,
                                      const Tensor& w, const Tensor* bias, const Tensor* residual, Tensor& y,
                                      const ConvSolver* solver = nullptr, CallReport* report = nullptr,
                                      std::shared_ptr<PreparedWeights> prepared = nullptr);

/// The solver a call would get without a tuner: the first in `device`'s backend list whose check()
/// says yes for `problem` (its direction as given). Throws Error(unsupported) listing every
/// solver's reason when none does.
const ConvSolver& select_conv_solver(const ConvProblem& problem, const runtime::Device& device);

}  // namespace galley::dnn
