// Which ConvArgs pointer holds which tensor in the two backward convolutions. ConvArgs names the
// forward tensors (x, w, y); until the op-generic core gives every op its own argument ids, the
// backward passes reuse those slots by tensor *shape*, so each pointer keeps the size and layout
// that problem.x_desc(), w_desc() and y_desc() give it:
//
//   backward_data:    reads args.y (dy) and args.w (w),  writes args.x (dx)
//   backward_weights: reads args.x (x)  and args.y (dy), writes args.w (dw)
//
// This header is the one place that knows the mapping; the const_cast that turns the read-only
// x or w slot into an output lives only here.
#pragma once

#include <cstddef>

#include "galley/dnn/solver.hpp"

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

inline BackwardDataArgs backward_data_args(const ConvArgs& args) {
  return {args.y, args.w, const_cast<void*>(args.x)};
}

inline BackwardWeightsArgs backward_weights_args(const ConvArgs& args) {
  return {args.x, args.y, const_cast<void*>(args.w)};
}

inline ConvArgs conv_args(const BackwardDataArgs& a, void* workspace = nullptr,
                          std::size_t workspace_bytes = 0) {
  return ConvArgs{a.dx, a.w, const_cast<void*>(a.dy), workspace, workspace_bytes};
}

inline ConvArgs conv_args(const BackwardWeightsArgs& a, void* workspace = nullptr,
                          std::size_t workspace_bytes = 0) {
  return ConvArgs{a.x, a.dw, const_cast<void*>(a.dy), workspace, workspace_bytes};
}

}  // namespace galley::dnn
