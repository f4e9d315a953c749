// The key of the GPU solvers' per-problem caches (cuDNN plans, Galley's kernel plans): looked up by
// check(), workspace_bytes() and run() on every call, so it is the problem itself, hashed field by
// field; formatting key() text there would cost microseconds per call next to 10-20 us kernels.
#pragma once

#include <cstddef>

#include "galley/dnn/conv_problem.hpp"

namespace galley::backends::gpu {

struct ProblemKey {
  int device_index = 0;
  dnn::ConvProblem problem;
  friend bool operator==(const ProblemKey&, const ProblemKey&) = default;
};

struct ProblemKeyHash {
  std::size_t operator()(const ProblemKey& k) const noexcept {
    return dnn::ConvProblemHash{}(k.problem) * 31 + static_cast<std::size_t>(k.device_index);
  }
};

}  // namespace galley::backends::gpu
