// Host entry points of the single-source eltwise kernels (eltwise_kernels.cu), called by the
// gpu.eltwise.* solvers with the problem's merged broadcast geometry.
#pragma once

#include <cstddef>

#include "backends/gpu/eltwise_params.hpp"

namespace galley::backends::gpu {

/// One call: the problem, its geometry, the device pointers and the native stream.
struct EltwiseLaunch {
  const dnn::EltwiseProblem& problem;
  const dnn::EltwiseGeometry& geometry;
  const void* a = nullptr;
  const void* b = nullptr;
  void* dst = nullptr;
  const void* dy = nullptr;
  void* da = nullptr;
  void* db = nullptr;
  void* workspace = nullptr;  ///< eltwise_workspace_bytes() of it
  void* stream = nullptr;
  const char* name = "";  ///< the solver, for launch errors
};

/// Float partial sums the backward reductions need (0 forward, or when nothing is broadcast).
std::size_t eltwise_workspace_bytes(const dnn::EltwiseProblem& problem, const dnn::EltwiseGeometry& geometry);
/// dst = (alpha a) op (beta b). `dense`: the geometry is one dim (equal shapes, or an input that is
/// a single value), walked without any index division.
void launch_eltwise_forward(const EltwiseLaunch& launch, bool dense);
/// da and db: maps for inputs of dst's shape, deterministic reductions for broadcast ones.
void launch_eltwise_backward(const EltwiseLaunch& launch);

}  // namespace galley::backends::gpu
