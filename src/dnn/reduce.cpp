#include "galley/dnn/reduce.hpp"

#include <string>

#include "dnn/dispatch.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

// The problem with the entry point's direction; a problem naming the other one is a mistake.
ReduceProblem with_direction(const ReduceProblem& problem, bool backward, const char* op) {
  if (problem.backward && !backward) {
    throw Error(Status::invalid_argument,
                std::string(op) + ": the problem is a backward one (backward = true)");
  }
  ReduceProblem p = problem;
  p.backward = backward;
  return p;
}

}  // namespace

const SolverBase& reduce_forward(runtime::Stream& stream, const ReduceProblem& problem, const Tensor& src,
                                 Tensor& dst, const SolverBase* solver, CallReport* report) {
  const char* op = "reduce_forward";
  const ReduceProblem p = with_direction(problem, false, op);
  return execute(op, stream, ProblemRef::of(p), {{ArgId::src, &src}, {ArgId::dst, &dst}}, solver, report);
}

const SolverBase& reduce_backward(runtime::Stream& stream, const ReduceProblem& problem,
                                  const Tensor& diff_dst, Tensor& diff_src, const SolverBase* solver,
                                  CallReport* report) {
  const char* op = "reduce_backward";
  const ReduceProblem p = with_direction(problem, true, op);
  return execute(op, stream, ProblemRef::of(p), {{ArgId::diff_dst, &diff_dst}, {ArgId::diff_src, &diff_src}},
                 solver, report);
}

}  // namespace galley::dnn
