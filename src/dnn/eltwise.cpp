// The eltwise entry points: the problem with the call's direction, then the one dispatch path.
#include "galley/dnn/eltwise.hpp"

#include <string>
#include <tuple>
#include <vector>

#include "dnn/dispatch.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

EltwiseProblem with_direction(const EltwiseProblem& problem, EltwiseDirection direction, const char* op) {
  if (problem.direction != EltwiseDirection::forward && problem.direction != direction) {
    throw Error(Status::invalid_argument, std::string(op) + ": the problem's direction is backward");
  }
  EltwiseProblem p = problem;
  p.direction = direction;
  return p;
}

}  // namespace

const EltwiseSolver& eltwise_forward(runtime::Stream& stream, const EltwiseProblem& problem, const Tensor& a,
                                     const Tensor& b, Tensor& dst, const EltwiseSolver* solver,
                                     CallReport* report) {
  const char* op = "eltwise_forward";
  const EltwiseProblem p = with_direction(problem, EltwiseDirection::forward, op);
  // dst may share a's (or b's) storage only element for element, i.e. when that input has dst's shape.
  const std::vector<std::int64_t> out = p.dst_shape();
  for (const auto& [input, shape, name] : {std::tuple{&a, &p.a, "a"}, std::tuple{&b, &p.b, "b"}}) {
    if (input->defined() && dst.defined() && input->data() == dst.data() && *shape != out) {
      throw Error(Status::invalid_argument, std::string(op) + ": dst (output) shares the storage of " + name +
                                                " " + shape_text(*shape) + ", which is broadcast to " +
                                                shape_text(out) + "; in place needs equal shapes");
    }
  }
  return static_cast<const EltwiseSolver&>(execute(op, stream, ProblemRef::of(p),
                                                   {{ArgId::src, &a}, {ArgId::src1, &b}, {ArgId::dst, &dst}},
                                                   solver, report));
}

const EltwiseSolver& eltwise_backward(runtime::Stream& stream, const EltwiseProblem& problem,
                                      const Tensor& dy, const Tensor& a, const Tensor& b, Tensor& da,
                                      Tensor& db, const EltwiseSolver* solver, CallReport* report) {
  const char* op = "eltwise_backward";
  const EltwiseProblem p = with_direction(problem, EltwiseDirection::backward, op);
  return static_cast<const EltwiseSolver&>(execute(op, stream, ProblemRef::of(p),
                                                   {{ArgId::diff_dst, &dy},
                                                    {ArgId::src, &a},
                                                    {ArgId::src1, &b},
                                                    {ArgId::diff_src, &da},
                                                    {ArgId::diff_src1, &db}},
                                                   solver, report));
}

}  // namespace galley::dnn
