// The public GEMM / linear entry points, forward and both backward directions: validate, pick a
// solver (the tuner), get workspace, run on a stream, through the one dispatch path every op takes.
#pragma once

#include "galley/dnn/gemm_problem.hpp"
#include "galley/dnn/gemm_solver.hpp"
#include "galley/runtime/stream.hpp"
#include "galley/tensor.hpp"

namespace galley::dnn {

// Each entry point takes the problem of the forward product (shapes, transposes, batch, dtype);
// its `direction` may be left `forward` or name the entry point's own direction, anything else
// throws Error(invalid_argument). The backward entry points ignore beta (the gradients do not
// depend on it). Every tensor is checked against the problem (device, dtype, dims, packed
// strides, storage size) and a mismatch is Error(invalid_argument) naming it. `bias` / `dbias` must
// be given exactly when problem.bias is set. With `solver` null the tuner chooses; a given solver
// must belong to the device's backend and accept the problem. Like every stream op they return
// before the work is done; GALLEY_LOG_CMD=1 prints the `galley bench gemm` line of each call.

/// C = alpha * op(A) op(B) + beta * C (+ bias on every row).
const GemmSolver& gemm(runtime::Stream& stream, const GemmProblem& problem, const Tensor& a, const Tensor& b,
                       Tensor& c, const Tensor* bias = nullptr, const GemmSolver* solver = nullptr,
                       CallReport* report = nullptr);
/// dA = the gradient of the forward with respect to A, given dC and B (written, not accumulated).
const GemmSolver& gemm_backward_data(runtime::Stream& stream, const GemmProblem& problem, const Tensor& dc,
                                     const Tensor& b, Tensor& da, const GemmSolver* solver = nullptr,
                                     CallReport* report = nullptr);
/// dB (and dbias, the column sums of dC) given A and dC (written, not accumulated).
const GemmSolver& gemm_backward_weights(runtime::Stream& stream, const GemmProblem& problem, const Tensor& a,
                                        const Tensor& dc, Tensor& db, Tensor* dbias = nullptr,
                                        const GemmSolver* solver = nullptr, CallReport* report = nullptr);

/// nn.Linear's problem, y = x W^T + bias: x is [..., in] (every leading dim a row), w is
/// [out, in], row-major packed, of one float dtype; one product of m = x's rows (W is shared, so
/// a batch of sequences is one taller product). Throws Error(invalid_argument) naming x or w
/// when their ranks, dtypes or inner sizes do not fit.
GemmProblem linear_problem(const TensorDesc& x, const TensorDesc& w, bool bias);

/// y = x W^T + bias, y [..., out] with x's leading dims (any packed shape of as many elements).
const GemmSolver& linear_forward(runtime::Stream& stream, const Tensor& x, const Tensor& w, const Tensor* bias,
                                 Tensor& y, const GemmSolver* solver = nullptr, CallReport* report = nullptr);
/// dx = dy W.
const GemmSolver& linear_backward_data(runtime::Stream& stream, const Tensor& dy, const Tensor& w, Tensor& dx,
                                       const GemmSolver* solver = nullptr, CallReport* report = nullptr);
/// dW = dy^T x summed over the batch, dbias = the column sums of dy (when given).
const GemmSolver& linear_backward_weights(runtime::Stream& stream, const Tensor& x, const Tensor& dy, Tensor& dw,
                                          Tensor* dbias = nullptr, const GemmSolver* solver = nullptr,
                                          CallReport* report = nullptr);

}  // namespace galley::dnn
