#include "galley/dnn/normalization.hpp"

#include "dnn/dispatch.hpp"

namespace galley::dnn {
namespace {

template <class P>
P with(P problem, NormDirection direction) {
  problem.direction = direction;
  return problem;
}

BatchNormProblem with(BatchNormProblem problem, BatchNormMode mode, NormDirection direction) {
  problem.mode = mode;
  problem.direction = direction;
  return problem;
}

template <class P>
const Solver<P>& run(const char* op, runtime::Stream& stream, const P& p,
                     std::initializer_list<std::pair<ArgId, const Tensor*>> tensors, const Solver<P>* solver,
                     CallReport* report) {
  return static_cast<const Solver<P>&>(execute(op, stream, ProblemRef::of(p), tensors, solver, report));
}

}  // namespace

const BatchNormSolver& batch_norm_inference(runtime::Stream& stream, const BatchNormProblem& problem,
                                            const Tensor& x, const Tensor& scale, const Tensor& shift,
                                            const Tensor& running_mean, const Tensor& running_var, Tensor& y,
                                            const BatchNormSolver* solver, CallReport* report) {
  const BatchNormProblem p = with(problem, BatchNormMode::inference, NormDirection::forward);
  return run("batch_norm_inference", stream, p,
             {{ArgId::src, &x},
              {ArgId::scale, &scale},
              {ArgId::shift, &shift},
              {ArgId::mean, &running_mean},
              {ArgId::variance, &running_var},
              {ArgId::dst, &y}},
             solver, report);
}

const BatchNormSolver& batch_norm_training(runtime::Stream& stream, const BatchNormProblem& problem,
                                           const Tensor& x, const Tensor& scale, const Tensor& shift,
                                           Tensor& running_mean, Tensor& running_var, Tensor& y,
                                           Tensor& saved_mean, Tensor& saved_invstd,
                                           const BatchNormSolver* solver, CallReport* report) {
  const BatchNormProblem p = with(problem, BatchNormMode::training, NormDirection::forward);
  return run("batch_norm_training", stream, p,
             {{ArgId::src, &x},
              {ArgId::scale, &scale},
              {ArgId::shift, &shift},
              {ArgId::mean, &running_mean},
              {ArgId::variance, &running_var},
              {ArgId::dst, &y},
              {ArgId::saved_mean, &saved_mean},
              {ArgId::saved_invstd, &saved_invstd}},
             solver, report);
}

const BatchNormSolver& batch_norm_backward(runtime::Stream& stream, const BatchNormProblem& problem,
                                           const Tensor& dy, const Tensor& x, const Tensor& scale,
                                           const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                                           Tensor& dscale, Tensor& dshift, const BatchNormSolver* solver,
                                           CallReport* report) {
  const BatchNormProblem p = with(problem, BatchNormMode::training, NormDirection::backward);
  return run("batch_norm_backward", stream, p,
             {{ArgId::diff_dst, &dy},
              {ArgId::src, &x},
              {ArgId::scale, &scale},
              {ArgId::saved_mean, &saved_mean},
              {ArgId::saved_invstd, &saved_invstd},
              {ArgId::diff_src, &dx},
              {ArgId::diff_scale, &dscale},
              {ArgId::diff_shift, &dshift}},
             solver, report);
}

const LayerNormSolver& layer_norm_forward(runtime::Stream& stream, const LayerNormProblem& problem,
                                          const Tensor& x, const Tensor& scale, const Tensor& shift,
                                          Tensor& y, Tensor& saved_mean, Tensor& saved_invstd,
                                          const LayerNormSolver* solver, CallReport* report) {
  return run("layer_norm_forward", stream, with(problem, NormDirection::forward),
             {{ArgId::src, &x},
              {ArgId::scale, &scale},
              {ArgId::shift, &shift},
              {ArgId::dst, &y},
              {ArgId::saved_mean, &saved_mean},
              {ArgId::saved_invstd, &saved_invstd}},
             solver, report);
}

const LayerNormSolver& layer_norm_backward(runtime::Stream& stream, const LayerNormProblem& problem,
                                           const Tensor& dy, const Tensor& x, const Tensor& scale,
                                           const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                                           Tensor& dscale, Tensor& dshift, const LayerNormSolver* solver,
                                           CallReport* report) {
  return run("layer_norm_backward", stream, with(problem, NormDirection::backward),
             {{ArgId::diff_dst, &dy},
              {ArgId::src, &x},
              {ArgId::scale, &scale},
              {ArgId::saved_mean, &saved_mean},
              {ArgId::saved_invstd, &saved_invstd},
              {ArgId::diff_src, &dx},
              {ArgId::diff_scale, &dscale},
              {ArgId::diff_shift, &dshift}},
             solver, report);
}

const GroupNormSolver& group_norm_forward(runtime::Stream& stream, const GroupNormProblem& problem,
                                          const Tensor& x, const Tensor& scale, const Tensor& shift,
                                          Tensor& y, Tensor& saved_mean, Tensor& saved_invstd,
                                          const GroupNormSolver* solver, CallReport* report) {
  return run("group_norm_forward", stream, with(problem, NormDirection::forward),
             {{ArgId::src, &x},
              {ArgId::scale, &scale},
              {ArgId::shift, &shift},
              {ArgId::dst, &y},
              {ArgId::saved_mean, &saved_mean},
              {ArgId::saved_invstd, &saved_invstd}},
             solver, report);
}

const GroupNormSolver& group_norm_backward(runtime::Stream& stream, const GroupNormProblem& problem,
                                           const Tensor& dy, const Tensor& x, const Tensor& scale,
                                           const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                                           Tensor& dscale, Tensor& dshift, const GroupNormSolver* solver,
                                           CallReport* report) {
  return run("group_norm_backward", stream, with(problem, NormDirection::backward),
             {{ArgId::diff_dst, &dy},
              {ArgId::src, &x},
              {ArgId::scale, &scale},
              {ArgId::saved_mean, &saved_mean},
              {ArgId::saved_invstd, &saved_invstd},
              {ArgId::diff_src, &dx},
              {ArgId::diff_scale, &dscale},
              {ArgId::diff_shift, &dshift}},
             solver, report);
}

}  // namespace galley::dnn
