// The public activation entry points: the problem with the entry point's direction, then the one
// dispatch path every op takes (which checks each tensor against the problem by role).
#include "galley/dnn/activation.hpp"

#include <string>

#include "dnn/dispatch.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

ActivProblem with_direction(const ActivProblem& problem, ActivDirection direction, const char* op) {
  if (problem.direction != ActivDirection::forward && problem.direction != direction) {
    throw Error(Status::invalid_argument, std::string(op) + ": problem direction is " + to_string(problem.direction) +
                                              ", not " + to_string(direction));
  }
  ActivProblem p = problem;
  p.direction = direction;
  return p;
}

}  // namespace

const ActivSolver& activation_forward(runtime::Stream& stream, const ActivProblem& problem, const Tensor& x,
                                      Tensor& y, const ActivSolver* solver, CallReport* report) {
  const char* op = "activation_forward";
  const ActivProblem p = with_direction(problem, ActivDirection::forward, op);
  return static_cast<const ActivSolver&>(
      execute(op, stream, ProblemRef::of(p), {{ArgId::src, &x}, {ArgId::dst, &y}}, solver, report));
}

const ActivSolver& activation_backward(runtime::Stream& stream, const ActivProblem& problem, const Tensor& dy,
                                       const Tensor& saved, Tensor& dx, const ActivSolver* solver,
                                       CallReport* report) {
  const char* op = "activation_backward";
  const ActivProblem p = with_direction(problem, ActivDirection::backward, op);
  const ArgId saved_id = p.reads_dst() ? ArgId::dst : ArgId::src;
  return static_cast<const ActivSolver&>(execute(
      op, stream, ProblemRef::of(p), {{ArgId::diff_dst, &dy}, {saved_id, &saved}, {ArgId::diff_src, &dx}}, solver,
      report));
}

}  // namespace galley::dnn
