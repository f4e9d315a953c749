// The data-movement entry points on galley::Tensor: concat, split, transpose, pad, reorder and
// their backward forms. Each builds its problem from the tensors (layout: row-major for any rank,
// or packed NHWC for rank 4; all of one call's tensors alike), checks them, and runs through the
// one dispatch path (tuner or list order, GALLEY_LOG_CMD repro lines). A tensor that does not fit
// is Error(invalid_argument) naming it. Like every stream op they return before the work is done;
// each returns the solver that ran. Reshape and flatten are views: Tensor::reshaped().
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "galley/dnn/datamove_problem.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/runtime/stream.hpp"
#include "galley/tensor.hpp"

namespace galley::dnn {

/// y = the inputs end to end along `axis` (1 to kMaxMultiArgs inputs, equal in every other dim).
const SolverBase& concat(runtime::Stream& stream, std::span<const Tensor> inputs, Tensor& y, int axis,
                         const SolverBase* solver = nullptr, CallReport* report = nullptr);
/// The outputs = x cut along `axis`, each as long as its own dim there (they must sum to x's).
const SolverBase& split(runtime::Stream& stream, const Tensor& x, std::span<Tensor> outputs, int axis,
                        const SolverBase* solver = nullptr, CallReport* report = nullptr);
/// concat's gradient: dy split into the inputs' gradients.
const SolverBase& concat_backward(runtime::Stream& stream, const Tensor& dy, std::span<Tensor> dxs, int axis,
                                  const SolverBase* solver = nullptr, CallReport* report = nullptr);
/// split's gradient: the outputs' gradients concatenated.
const SolverBase& split_backward(runtime::Stream& stream, std::span<const Tensor> dys, Tensor& dx, int axis,
                                 const SolverBase* solver = nullptr, CallReport* report = nullptr);

/// y = x with its axes permuted: y's dim i is x's dim perm[i]. Both row-major.
const SolverBase& transpose(runtime::Stream& stream, const Tensor& x, Tensor& y, const std::vector<int>& perm,
                            const SolverBase* solver = nullptr, CallReport* report = nullptr);
/// The gradient of transpose(x, y, perm): dx = dy permuted back.
const SolverBase& transpose_backward(runtime::Stream& stream, const Tensor& dy, Tensor& dx,
                                     const std::vector<int>& perm, const SolverBase* solver = nullptr,
                                     CallReport* report = nullptr);

/// y = x with before[i] / after[i] elements of `value` around dim i; y's dims must be x's padded.
const SolverBase& pad(runtime::Stream& stream, const Tensor& x, Tensor& y,
                      const std::vector<std::int64_t>& before, const std::vector<std::int64_t>& after,
                      double value = 0, const SolverBase* solver = nullptr, CallReport* report = nullptr);
/// The gradient of pad: dx = the interior of dy.
const SolverBase& pad_backward(runtime::Stream& stream, const Tensor& dy, Tensor& dx,
                               const std::vector<std::int64_t>& before,
                               const std::vector<std::int64_t>& after, const SolverBase* solver = nullptr,
                               CallReport* report = nullptr);

/// y = x in y's dtype (f32/f16/bf16, round to nearest even) and y's layout (row-major or, rank 4,
/// NHWC); same dims. Its gradient is reorder(dy, dx).
const SolverBase& reorder(runtime::Stream& stream, const Tensor& x, Tensor& y,
                          const SolverBase* solver = nullptr, CallReport* report = nullptr);

/// The layout a data-movement op reads `desc` in: nchw for row-major, nhwc for a packed NHWC
/// rank-4 tensor that is not also row-major; Error(invalid_argument) naming `what` otherwise.
Layout datamove_layout(const TensorDesc& desc, std::string_view what);

}  // namespace galley::dnn
