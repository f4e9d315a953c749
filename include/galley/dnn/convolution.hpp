// The public convolution entry points: validate, pick a solver, get workspace, run on a stream.
#pragma once

#include <string>
#include <string_view>

#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/dnn/tensor.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::dnn {

/// Enqueues y = conv(x, w) on `stream` and returns the solver that ran.
/// x, w and y are memory of stream.device(), packed in problem.layout (the descriptors need the
/// dims and dtype of problem.x_desc(), w_desc(), y_desc() and packed strides; anything else throws
/// Error(invalid_argument) naming the tensor). With `solver` null the tuner chooses (see
/// set_conv_solver_picker; GALLEY_FIND_MODE=off gives the list's first applicable solver); a given solver must belong to the
/// device's backend and accept the problem, else Error(unsupported) with its reason. Workspace comes from the
/// caching allocator, stream-ordered. Like every stream op it returns before the work is done.
/// With GALLEY_LOG_CMD=1 it prints the `galley bench conv` line that reproduces the call.
const ConvSolver& convolution_forward(runtime::Stream& stream, const ConvProblem& problem,
                                      const TensorDesc& x_desc, const void* x, const TensorDesc& w_desc,
                                      const void* w, const TensorDesc& y_desc, void* y,
                                      const ConvSolver* solver = nullptr);

/// The same with the problem's own packed descriptors.
const ConvSolver& convolution_forward(runtime::Stream& stream, const ConvProblem& problem, const void* x,
                                      const void* w, void* y, const ConvSolver* solver = nullptr);

/// The solver convolution_forward would pick without a tuner: the first in `device`'s backend list
/// whose check() says yes. Throws Error(unsupported) listing every solver's reason when none does.
const ConvSolver& select_conv_solver(const ConvProblem& problem, const runtime::Device& device);

/// How convolution_forward chooses when no solver is given. libgalley's tuning layer installs its
/// tuner here when the library loads (tuning::default_tuner().pick; dnn may not include tuning, a
/// lower layer); with none installed (nullptr), select_conv_solver's list order is used.
using ConvSolverPicker = const ConvSolver& (*)(const ConvProblem& problem, const runtime::Device& device);
void set_conv_solver_picker(ConvSolverPicker picker);

/// "galley bench conv -n 32 ... -g 1 -F 1 --dtype f32 --layout nchw --device cpu [--solver NAME]":
/// the command that reproduces one call (GALLEY_LOG_CMD prints it for every call).
std::string conv_bench_command(const ConvProblem& problem, const runtime::Device& device,
                               std::string_view solver = {});

}  // namespace galley::dnn
