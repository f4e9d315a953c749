// The tensors of the two backward convolutions as their own small structs, taken from and put
// into ConvArgs (whose dy, dx and dw fields carry them), so backward kernels name what they read
// and write.
#pragma once

#include <cstddef>

#include "galley/dnn/conv_solver.hpp"

namespace galley::dnn {

/// The tensors of dx = conv_backward_data(dy, w).
struct BackwardDataArgs {
  const void* dy = nullptr;
  const void* w = nullptr;
  void* dx = nullptr;
};

/// The tensors of dw = conv_backward_weights(x, dy).
struct BackwardWeightsArgs {
  const void* x = nullptr;
  const void* dy = nullptr;
  void* dw = nullptr;
};

inline BackwardDataArgs backward_data_args(const ConvArgs& args) { return {args.dy, args.w, args.dx}; }

inline BackwardWeightsArgs backward_weights_args(const ConvArgs& args) { return {args.x, args.dy, args.dw}; }

inline ConvArgs conv_args(const BackwardDataArgs& a, void* workspace = nullptr, std::size_t workspace_bytes = 0) {
  ConvArgs out{nullptr, a.w, nullptr, workspace, workspace_bytes};
  out.dy = a.dy;
  out.dx = a.dx;
  return out;
}

inline ConvArgs conv_args(const BackwardWeightsArgs& a, void* workspace = nullptr, std::size_t workspace_bytes = 0) {
  ConvArgs out{a.x, nullptr, nullptr, workspace, workspace_bytes};
  out.dy = a.dy;
  out.dw = a.dw;
  return out;
}

}  // namespace galley::dnn
