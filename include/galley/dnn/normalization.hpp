// The public normalisation entry points: batch norm (inference, training, backward), layer norm and
// group norm (forward, backward). Each validates, picks a solver (the tuner, or the one given),
// checks every tensor against the problem and runs on a stream, through the one dispatch path every
// op takes.
#pragma once

#include "galley/dnn/bnorm_problem.hpp"
#include "galley/dnn/gnorm_problem.hpp"
#include "galley/dnn/lnorm_problem.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/runtime/stream.hpp"
#include "galley/tensor.hpp"

namespace galley::dnn {

using BatchNormSolver = Solver<BatchNormProblem>;
using LayerNormSolver = Solver<LayerNormProblem>;
using GroupNormSolver = Solver<GroupNormProblem>;

// Every entry point sets the problem's direction (and batch norm's mode) to its own, so one problem
// value describes the layer for all of its calls. Tensors live on stream.device(): data tensors
// (x, y, dy, dx) of problem.dtype with the problem's packed strides, every other tensor f32 of the
// shape the problem's tensors() names. A mismatch (dims, dtype, strides, device, a storage too
// small) throws Error(invalid_argument) naming the tensor. With `solver` null the tuner chooses; a
// given solver must belong to the device's backend and accept the problem, else Error(unsupported)
// with its reason. Like every stream op they return before the work is done; with GALLEY_LOG_CMD=1
// each prints the `galley bench` line that reproduces it. Each returns the solver that ran.

/// y = (x - running_mean) / sqrt(running_var + epsilon) * scale + shift (PyTorch's eval mode).
const BatchNormSolver& batch_norm_inference(runtime::Stream& stream, const BatchNormProblem& problem,
                                            const Tensor& x, const Tensor& scale, const Tensor& shift,
                                            const Tensor& running_mean, const Tensor& running_var, Tensor& y,
                                            const BatchNormSolver* solver = nullptr,
                                            CallReport* report = nullptr);

/// y normalised with the batch's statistics; writes saved_mean and saved_invstd for backward and
/// updates running_mean and running_var in place with problem.momentum (unbiased variance).
const BatchNormSolver& batch_norm_training(runtime::Stream& stream, const BatchNormProblem& problem,
                                           const Tensor& x, const Tensor& scale, const Tensor& shift,
                                           Tensor& running_mean, Tensor& running_var, Tensor& y,
                                           Tensor& saved_mean, Tensor& saved_invstd,
                                           const BatchNormSolver* solver = nullptr,
                                           CallReport* report = nullptr);

/// dx, dscale, dshift of training batch norm from dy and what batch_norm_training saved.
const BatchNormSolver& batch_norm_backward(runtime::Stream& stream, const BatchNormProblem& problem,
                                           const Tensor& dy, const Tensor& x, const Tensor& scale,
                                           const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                                           Tensor& dscale, Tensor& dshift,
                                           const BatchNormSolver* solver = nullptr,
                                           CallReport* report = nullptr);

/// Layer norm over the trailing dims from problem.axis; writes y, saved_mean and saved_invstd.
const LayerNormSolver& layer_norm_forward(runtime::Stream& stream, const LayerNormProblem& problem,
                                          const Tensor& x, const Tensor& scale, const Tensor& shift,
                                          Tensor& y, Tensor& saved_mean, Tensor& saved_invstd,
                                          const LayerNormSolver* solver = nullptr,
                                          CallReport* report = nullptr);
const LayerNormSolver& layer_norm_backward(runtime::Stream& stream, const LayerNormProblem& problem,
                                           const Tensor& dy, const Tensor& x, const Tensor& scale,
                                           const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                                           Tensor& dscale, Tensor& dshift,
                                           const LayerNormSolver* solver = nullptr,
                                           CallReport* report = nullptr);

/// Group norm; writes y, saved_mean and saved_invstd (n x groups).
const GroupNormSolver& group_norm_forward(runtime::Stream& stream, const GroupNormProblem& problem,
                                          const Tensor& x, const Tensor& scale, const Tensor& shift,
                                          Tensor& y, Tensor& saved_mean, Tensor& saved_invstd,
                                          const GroupNormSolver* solver = nullptr,
                                          CallReport* report = nullptr);
const GroupNormSolver& group_norm_backward(runtime::Stream& stream, const GroupNormProblem& problem,
                                           const Tensor& dy, const Tensor& x, const Tensor& scale,
                                           const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                                           Tensor& dscale, Tensor& dshift,
                                           const GroupNormSolver* solver = nullptr,
                                           CallReport* report = nullptr);

}  // namespace galley::dnn
