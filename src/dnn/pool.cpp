#include "galley/dnn/pool.hpp"

#include <string>

#include "dnn/dispatch.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

PoolProblem with_direction(const PoolProblem& problem, PoolDirection direction) {
  PoolProblem p = problem;
  p.direction = direction;
  return p;
}

// A tensor the problem does not read or write is a caller's mistake, not something to ignore.
void refuse_unused(const char* op, const Tensor* t, const char* what, const std::string& why) {
  if (t != nullptr && t->defined()) {
    throw Error(Status::invalid_argument, std::string(op) + ": " + what + " was given, but " + why);
  }
}

}  // namespace

const PoolSolver& pooling_forward(runtime::Stream& stream, const PoolProblem& problem, const Tensor& x,
                                  Tensor& y, Tensor* indices, const PoolSolver* solver, CallReport* report) {
  const char* op = "pooling_forward";
  const PoolProblem p = with_direction(problem, PoolDirection::forward);
  if (!p.keep_indices) {
    refuse_unused(op, indices, "indices", "the problem does not keep them (keep_indices is false)");
  }
  return static_cast<const PoolSolver&>(
      execute(op, stream, ProblemRef::of(p), {{ArgId::src, &x}, {ArgId::dst, &y}, {ArgId::indices, indices}},
              solver, report));
}

const PoolSolver& pooling_backward(runtime::Stream& stream, const PoolProblem& problem, const Tensor& dy,
                                   Tensor& dx, const Tensor* x, const Tensor* indices,
                                   const PoolSolver* solver, CallReport* report) {
  const char* op = "pooling_backward";
  const PoolProblem p = with_direction(problem, PoolDirection::backward);
  if (p.mode != PoolMode::max) {
    refuse_unused(op, x, "x (input)", "average pooling's backward does not read it");
    refuse_unused(op, indices, "indices", "average pooling keeps no indices");
  } else if (p.keep_indices) {
    refuse_unused(op, x, "x (input)", "the problem keeps indices, which backward reads instead");
  } else {
    refuse_unused(op, indices, "indices", "the problem does not keep them (keep_indices is false)");
  }
  return static_cast<const PoolSolver&>(
      execute(op, stream, ProblemRef::of(p),
              {{ArgId::diff_dst, &dy}, {ArgId::diff_src, &dx}, {ArgId::src, x}, {ArgId::indices, indices}},
              solver, report));
}

}  // namespace galley::dnn
