#include "galley/dnn/convolution.hpp"

#include <cstddef>
#include <string>
#include <utility>

#include "dnn/dispatch.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

// The problem with the entry point's direction; a problem naming another direction is a mistake.
ConvProblem with_direction(const ConvProblem& problem, ConvDirection direction, const char* op) {
  if (problem.direction != ConvDirection::forward && problem.direction != direction) {
    throw Error(Status::invalid_argument, std::string(op) + ": problem direction is " +
                                              to_string(problem.direction) + ", not " + to_string(direction));
  }
  ConvProblem p = problem;
  p.direction = direction;
  return p;
}

const ConvSolver& run(const char* op, runtime::Stream& stream, const ConvProblem& problem, const OpArgs& args,
                      const ConvSolver* solver, CallReport* report) {
  return static_cast<const ConvSolver&>(execute(op, stream, ProblemRef::of(problem), args, solver, report));
}

}  // namespace

const ConvSolver& select_conv_solver(const ConvProblem& problem, const runtime::Device& device) {
  return static_cast<const ConvSolver&>(select_solver(ProblemRef::of(problem), device));
}

const ConvSolver& convolution_forward(runtime::Stream& stream, const ConvProblem& problem,
                                      const TensorDesc& x_desc, const void* x, const TensorDesc& w_desc,
                                      const void* w, const TensorDesc& y_desc, void* y,
                                      const ConvSolver* solver, CallReport* report) {
  const char* op = "convolution_forward";
  const ConvProblem p = with_direction(problem, ConvDirection::forward, op);
  p.check_tensors(x_desc, w_desc, y_desc);
  OpArgs args;
  args.set(ArgId::src, x);
  args.set(ArgId::wei, w);
  args.set(ArgId::dst, y);
  return run(op, stream, p, args, solver, report);
}

const ConvSolver& convolution_forward(runtime::Stream& stream, const ConvProblem& problem, const void* x,
                                      const void* w, void* y, const ConvSolver* solver, CallReport* report) {
  const char* op = "convolution_forward";
  const ConvProblem p = with_direction(problem, ConvDirection::forward, op);
  OpArgs args;
  args.set(ArgId::src, x);
  args.set(ArgId::wei, w);
  args.set(ArgId::dst, y);
  return run(op, stream, p, args, solver, report);
}

const ConvSolver& convolution_backward_data(runtime::Stream& stream, const ConvProblem& problem, const void* dy,
                                            const void* w, void* dx, const ConvSolver* solver, CallReport* report) {
  const char* op = "convolution_backward_data";
  const ConvProblem p = with_direction(problem, ConvDirection::backward_data, op);
  OpArgs args;
  args.set(ArgId::diff_dst, dy);
  args.set(ArgId::wei, w);
  args.set(ArgId::diff_src, dx);
  return run(op, stream, p, args, solver, report);
}

const ConvSolver& convolution_backward_weights(runtime::Stream& stream, const ConvProblem& problem,
                                               const void* x, const void* dy, void* dw,
                                               const ConvSolver* solver, CallReport* report) {
  const char* op = "convolution_backward_weights";
  const ConvProblem p = with_direction(problem, ConvDirection::backward_weights, op);
  OpArgs args;
  args.set(ArgId::src, x);
  args.set(ArgId::diff_dst, dy);
  args.set(ArgId::diff_wei, dw);
  return run(op, stream, p, args, solver, report);
}

const ConvSolver& convolution_forward(runtime::Stream& stream, const ConvProblem& problem, const Tensor& x,
                                      const Tensor& w, Tensor& y, const ConvSolver* solver, CallReport* report,
                                      std::shared_ptr<PreparedWeights> prepared) {
  const char* op = "convolution_forward";
  const ConvProblem p = with_direction(problem, ConvDirection::forward, op);
  return static_cast<const ConvSolver&>(execute(op, stream, ProblemRef::of(p),
                                                {{ArgId::src, &x}, {ArgId::wei, &w}, {ArgId::dst, &y}}, solver,
                                                report, std::move(prepared)));
}

const ConvSolver& convolution_forward(runtime::Stream& stream, const ConvProblem& problem, const Tensor& x,
                                      const Tensor& w, const Tensor* bias, const Tensor* residual, Tensor& y,
                                      const ConvSolver* solver, CallReport* report,
                                      std::shared_ptr<PreparedWeights> prepared) {
  const char* op = "convolution_forward";
  const ConvProblem p = with_direction(problem, ConvDirection::forward, op);
  const auto bad = [&](const std::string& why) { throw Error(Status::invalid_argument, std::string(op) + ": " + why); };
  if (bias != nullptr && !p.epilogue.bias) bad("a bias tensor is given, but the problem's epilogue adds no bias");
  if (bias == nullptr && p.epilogue.bias) bad("bias is missing: the problem's epilogue adds a bias");
  if (residual != nullptr && !p.epilogue.residual) {
    bad("a residual tensor is given, but the problem's epilogue adds no residual");
  }
  if (residual == nullptr && p.epilogue.residual) bad("residual is missing: the problem's epilogue adds a residual");
  if (residual != nullptr && residual->defined() && y.defined()) {
    // Solvers write y while the residual is still being read; an overlap would read written values.
    const auto* r0 = static_cast<const std::byte*>(residual->data());
    const auto* y0 = static_cast<const std::byte*>(y.data());
    const std::size_t bytes = p.y_desc().bytes();
    if (r0 < y0 + bytes && y0 < r0 + bytes) bad("residual overlaps y (output); give the residual its own memory");
  }
  return static_cast<const ConvSolver&>(execute(
      op, stream, ProblemRef::of(p),
      {{ArgId::src, &x}, {ArgId::wei, &w}, {ArgId::bias, bias}, {ArgId::src1, residual}, {ArgId::dst, &y}}, solver,
      report, std::move(prepared)));
}

const ConvSolver& convolution_backward_data(runtime::Stream& stream, const ConvProblem& problem, const Tensor& dy,
                                            const Tensor& w, Tensor& dx, const ConvSolver* solver, CallReport* report) {
  const char* op = "convolution_backward_data";
  const ConvProblem p = with_direction(problem, ConvDirection::backward_data, op);
  return static_cast<const ConvSolver&>(execute(
      op, stream, ProblemRef::of(p), {{ArgId::diff_dst, &dy}, {ArgId::wei, &w}, {ArgId::diff_src, &dx}}, solver, report));
}

const ConvSolver& convolution_backward_weights(runtime::Stream& stream, const ConvProblem& problem, const Tensor& x,
                                               const Tensor& dy, Tensor& dw, const ConvSolver* solver, CallReport* report) {
  const char* op = "convolution_backward_weights";
  const ConvProblem p = with_direction(problem, ConvDirection::backward_weights, op);
  return static_cast<const ConvSolver&>(execute(
      op, stream, ProblemRef::of(p), {{ArgId::src, &x}, {ArgId::diff_dst, &dy}, {ArgId::diff_wei, &dw}}, solver, report));
}

}  // namespace galley::dnn
