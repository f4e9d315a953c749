#include "galley/dnn/gemm.hpp"

#include <string>

#include "dnn/dispatch.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

// The problem with the entry point's direction; a problem naming another direction is a mistake.
GemmProblem with_direction(const GemmProblem& problem, GemmDirection direction, const char* op) {
  if (problem.direction != GemmDirection::forward && problem.direction != direction) {
    bad(std::string(op) + ": problem direction is " + to_string(problem.direction) + ", not " + to_string(direction));
  }
  GemmProblem p = problem;
  p.direction = direction;
  if (direction != GemmDirection::forward) p.beta = 0;  // the gradients do not depend on it
  return p;
}

// An optional tensor must be given exactly when the problem has a bias.
void check_optional(const char* op, const char* name, bool given, bool wanted) {
  if (given && !wanted) bad(std::string(op) + ": " + name + " given but the problem has no bias (set bias)");
  if (!given && wanted) bad(std::string(op) + ": the problem has a bias but no " + name + " tensor was given");
}

const GemmSolver& as_gemm(const SolverBase& s) { return static_cast<const GemmSolver&>(s); }

}  // namespace

const GemmSolver& gemm(runtime::Stream& stream, const GemmProblem& problem, const Tensor& a, const Tensor& b,
                       Tensor& c, const Tensor* bias, const GemmSolver* solver, CallReport* report) {
  const char* op = "gemm";
  const GemmProblem p = with_direction(problem, GemmDirection::forward, op);
  check_optional(op, "bias", bias != nullptr, p.bias);
  if (bias != nullptr) {
    return as_gemm(execute(op, stream, ProblemRef::of(p),
                           {{ArgId::src, &a}, {ArgId::wei, &b}, {ArgId::bias, bias}, {ArgId::dst, &c}}, solver, report));
  }
  return as_gemm(execute(op, stream, ProblemRef::of(p), {{ArgId::src, &a}, {ArgId::wei, &b}, {ArgId::dst, &c}}, solver,
                         report));
}

const GemmSolver& gemm_backward_data(runtime::Stream& stream, const GemmProblem& problem, const Tensor& dc,
                                     const Tensor& b, Tensor& da, const GemmSolver* solver, CallReport* report) {
  const char* op = "gemm_backward_data";
  const GemmProblem p = with_direction(problem, GemmDirection::backward_data, op);
  return as_gemm(execute(op, stream, ProblemRef::of(p),
                         {{ArgId::diff_dst, &dc}, {ArgId::wei, &b}, {ArgId::diff_src, &da}}, solver, report));
}

const GemmSolver& gemm_backward_weights(runtime::Stream& stream, const GemmProblem& problem, const Tensor& a,
                                        const Tensor& dc, Tensor& db, Tensor* dbias, const GemmSolver* solver,
                                        CallReport* report) {
  const char* op = "gemm_backward_weights";
  const GemmProblem p = with_direction(problem, GemmDirection::backward_weights, op);
  check_optional(op, "dbias", dbias != nullptr, p.bias);
  if (dbias != nullptr) {
    return as_gemm(execute(op, stream, ProblemRef::of(p),
                           {{ArgId::src, &a}, {ArgId::diff_dst, &dc}, {ArgId::diff_wei, &db}, {ArgId::diff_bias, dbias}},
                           solver, report));
  }
  return as_gemm(execute(op, stream, ProblemRef::of(p),
                         {{ArgId::src, &a}, {ArgId::diff_dst, &dc}, {ArgId::diff_wei, &db}}, solver, report));
}

GemmProblem linear_problem(const TensorDesc& x, const TensorDesc& w, bool bias) {
  if (x.rank < 2) bad("linear: x (input) " + x.to_string() + " must have rank 2 or more ([..., in])");
  if (w.rank != 2) bad("linear: w (weights) " + w.to_string() + " must be rank 2 [out, in]");
  if (w.dtype != x.dtype) {
    bad(std::string("linear: w (weights) dtype ") + galley::to_string(w.dtype) + " differs from x (input) dtype " +
        galley::to_string(x.dtype));
  }
  const std::int64_t in = x.dims[static_cast<std::size_t>(x.rank - 1)];
  if (w.dims[1] != in) {
    bad("linear: w (weights) " + w.to_string() + " has " + std::to_string(w.dims[1]) +
        " inputs per row, x (input) has " + std::to_string(in));
  }
  // Every leading dim of x is a row of one product: W is shared, so nothing is gained by batching.
  GemmProblem p;
  p.m = x.elements() / in;
  p.k = in;
  p.n = w.dims[0];
  p.trans_b = true;
  p.bias = bias;
  p.dtype = x.dtype;
  p.validate();
  return p;
}

namespace {

// `t` seen as the rows x cols matrix its packed elements form, the shape linear_problem() uses.
Tensor as_matrix(const Tensor& t, std::int64_t rows, std::int64_t cols, const char* name) {
  if (!t.defined()) bad(std::string("linear: ") + name + " is an empty tensor");
  if (!t.desc().is_contiguous() || t.desc().elements() != rows * cols) {
    bad(std::string("linear: ") + name + " " + t.desc().to_string() + " is not a packed tensor of " +
        std::to_string(rows) + " x " + std::to_string(cols) + " elements");
  }
  return Tensor::wrap(t.device(), TensorDesc::contiguous(t.dtype(), {rows, cols}), t.data(), t.storage_bytes());
}

}  // namespace

const GemmSolver& linear_forward(runtime::Stream& stream, const Tensor& x, const Tensor& w, const Tensor* bias,
                                 Tensor& y, const GemmSolver* solver, CallReport* report) {
  const GemmProblem p = linear_problem(x.desc(), w.desc(), bias != nullptr);
  const Tensor xm = as_matrix(x, p.m, p.k, "x (input)");
  Tensor ym = as_matrix(y, p.m, p.n, "y (output)");
  return gemm(stream, p, xm, w, ym, bias, solver, report);
}

const GemmSolver& linear_backward_data(runtime::Stream& stream, const Tensor& dy, const Tensor& w, Tensor& dx,
                                       const GemmSolver* solver, CallReport* report) {
  // dx has x's shape: the problem comes from it and w, and dy is checked against that problem.
  const GemmProblem p = linear_problem(dx.desc(), w.desc(), false);
  const Tensor dym = as_matrix(dy, p.m, p.n, "dy (output gradient)");
  Tensor dxm = as_matrix(dx, p.m, p.k, "dx (input gradient)");
  return gemm_backward_data(stream, p, dym, w, dxm, solver, report);
}

const GemmSolver& linear_backward_weights(runtime::Stream& stream, const Tensor& x, const Tensor& dy, Tensor& dw,
                                          Tensor* dbias, const GemmSolver* solver, CallReport* report) {
  const GemmProblem p = linear_problem(x.desc(), dw.desc(), dbias != nullptr);
  const Tensor xm = as_matrix(x, p.m, p.k, "x (input)");
  const Tensor dym = as_matrix(dy, p.m, p.n, "dy (output gradient)");
  return gemm_backward_weights(stream, p, xm, dym, dw, dbias, solver, report);
}

}  // namespace galley::dnn
