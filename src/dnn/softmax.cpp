#include "galley/dnn/softmax.hpp"

#include <string>

#include "dnn/dispatch.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

// The problem with the entry point's direction; a problem naming the other one is a mistake.
SoftmaxProblem with_direction(const SoftmaxProblem& problem, bool backward, const char* op) {
  if (problem.backward && !backward) {
    throw Error(Status::invalid_argument,
                std::string(op) + ": the problem is a backward one (backward = true)");
  }
  SoftmaxProblem p = problem;
  p.backward = backward;
  return p;
}

}  // namespace

const SolverBase& softmax_forward(runtime::Stream& stream, const SoftmaxProblem& problem, const Tensor& src,
                                  Tensor& dst, const SolverBase* solver, CallReport* report) {
  const char* op = "softmax_forward";
  const SoftmaxProblem p = with_direction(problem, false, op);
  return execute(op, stream, ProblemRef::of(p), {{ArgId::src, &src}, {ArgId::dst, &dst}}, solver, report);
}

const SolverBase& softmax_backward(runtime::Stream& stream, const SoftmaxProblem& problem,
                                   const Tensor& diff_dst, const Tensor& dst, Tensor& diff_src,
                                   const SolverBase* solver, CallReport* report) {
  const char* op = "softmax_backward";
  const SoftmaxProblem p = with_direction(problem, true, op);
  return execute(op, stream, ProblemRef::of(p),
                 {{ArgId::diff_dst, &diff_dst}, {ArgId::dst, &dst}, {ArgId::diff_src, &diff_src}}, solver,
                 report);
}

}  // namespace galley::dnn
