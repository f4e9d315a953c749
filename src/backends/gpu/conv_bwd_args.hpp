// Where the backward convolutions find their tensors in dnn::ConvArgs, the one place that says it.
// ConvArgs names the forward roles (x in, w in, y out); until the op-generic core gives each
// direction its own argument ids, the backward directions reuse the same three slots by tensor
// shape, as MIOpen's driver does:
//   backward_data    reads args.y (dy) and args.w,  writes args.x (dx)
//   backward_weights reads args.x and args.y (dy), writes args.w (dw)
// The written slot is declared const in ConvArgs; the const_cast that makes it writable lives in
// these two helpers and nowhere else. Header-only and vendor-neutral: the cuDNN solvers (.cpp) and
// the single-source solvers (.cu) both use it.
#pragma once

#include "galley/dnn/solver.hpp"

namespace galley::backends::gpu {

/// Backward-data's tensors: dx = conv_transpose(dy, w).
struct BwdDataTensors {
  const void* dy;
  const void* w;
  void* dx;
};

/// Backward-weights' tensors: dw = correlation of x with dy.
struct BwdWeightsTensors {
  const void* x;
  const void* dy;
  void* dw;
};

inline BwdDataTensors backward_data_tensors(const dnn::ConvArgs& a) {
  return {a.y, a.w, const_cast<void*>(a.x)};
}

inline BwdWeightsTensors backward_weights_tensors(const dnn::ConvArgs& a) {
  return {a.x, a.y, const_cast<void*>(a.w)};
}

}  // namespace galley::backends::gpu
