// A GEMM problem of any direction as one strided-batched product, the form every backend's GEMM
// kernel takes: out[b] = alpha * op(X[b]) op(Y[b]) (+ beta * out[b]) (+ bias per column). The
// backward directions are the same product with other operands (dA = alpha dC op(B)^T, dB =
// alpha op(A)^T dC, each transposed back when the operand is stored transposed). Header-only, so
// the GPU plugins use it without reaching into libgalley's internals.
#pragma once

#include <cstdint>

#include "galley/dnn/gemm_problem.hpp"

namespace galley::dnn {

/// Row-major operands by element offset; a batch stride of 0 reuses one matrix for every batch.
struct GemmCall {
  bool trans_x = false, trans_y = false;  ///< X stored k x m (else m x k); Y stored n x k (else k x n)
  std::int64_t m = 1, n = 1, k = 1, batch = 1;
  std::int64_t ldx = 1, ldy = 1, ldo = 1;                  ///< row pitches as stored
  std::int64_t stride_x = 0, stride_y = 0, stride_o = 0;  ///< batch strides
  /// The output is one matrix for every batch: out = alpha * sum_b op(X[b]) op(Y[b]), a reduction
  /// over the batch as well as over k (the gradient of a shared operand). stride_o is 0 then.
  bool sum_batches = false;
  float alpha = 1.f, beta = 0.f;
  bool bias = false;  ///< forward only: bias[j] added to every row
  /// Which of the problem's tensors X, Y and out are (by role).
  ArgId x_role = ArgId::src, y_role = ArgId::wei, out_role = ArgId::dst;

  /// When a batch reduces into one output and its batches lie end to end along k in both X and Y
  /// (X stored k x m, Y stored k x n, packed), the batch folds into k: one plain product. When Y
  /// is shared and X's batches lie end to end along m (X stored m x k, out packed), the batch
  /// folds into m (nn.Linear over a batch of sequences).
  void fold() {
    if (batch == 1) return;
    if (sum_batches && trans_x && !trans_y && stride_x == k * ldx && stride_y == k * ldy) {
      k *= batch;
      batch = 1;
      sum_batches = false;
    } else if (!sum_batches && stride_y == 0 && !trans_x && stride_x == m * ldx && stride_o == m * ldo) {
      m *= batch;
      batch = 1;
    }
  }
};

/// The product a problem's direction computes, folded where its batch allows.
inline GemmCall lower_gemm(const GemmProblem& p) {
  GemmCall c;
  const std::int64_t a_stride = p.shared_a ? 0 : p.a_rows() * p.a_cols();
  const std::int64_t b_stride = p.shared_b ? 0 : p.b_rows() * p.b_cols();
  const std::int64_t c_stride = p.m * p.n;
  c.batch = p.batch;
  c.alpha = static_cast<float>(p.alpha);
  switch (p.direction) {
    case GemmDirection::forward:
      c.trans_x = p.trans_a, c.trans_y = p.trans_b;
      c.m = p.m, c.n = p.n, c.k = p.k;
      c.ldx = p.a_cols(), c.ldy = p.b_cols(), c.ldo = p.n;
      c.stride_x = a_stride, c.stride_y = b_stride, c.stride_o = c_stride;
      c.beta = static_cast<float>(p.beta);
      c.bias = p.bias;
      c.x_role = ArgId::src, c.y_role = ArgId::wei, c.out_role = ArgId::dst;
      break;
    case GemmDirection::backward_data:
      c.k = p.n;
      c.ldo = p.a_cols(), c.stride_o = a_stride, c.sum_batches = p.shared_a;
      c.out_role = ArgId::diff_src;
      if (!p.trans_a) {  // dA (m x k) = dC (m x n) * op(B)^T (n x k)
        c.m = p.m, c.n = p.k;
        c.trans_x = false, c.ldx = p.n, c.stride_x = c_stride, c.x_role = ArgId::diff_dst;
        c.trans_y = !p.trans_b, c.ldy = p.b_cols(), c.stride_y = b_stride, c.y_role = ArgId::wei;
      } else {  // dA (k x m) = op(B) (k x n) * dC^T (n x m)
        c.m = p.k, c.n = p.m;
        c.trans_x = p.trans_b, c.ldx = p.b_cols(), c.stride_x = b_stride, c.x_role = ArgId::wei;
        c.trans_y = true, c.ldy = p.n, c.stride_y = c_stride, c.y_role = ArgId::diff_dst;
      }
      break;
    case GemmDirection::backward_weights:
      c.k = p.m;
      c.ldo = p.b_cols(), c.stride_o = b_stride, c.sum_batches = p.shared_b;
      c.out_role = ArgId::diff_wei;
      if (!p.trans_b) {  // dB (k x n) = op(A)^T (k x m) * dC (m x n)
        c.m = p.k, c.n = p.n;
        c.trans_x = !p.trans_a, c.ldx = p.a_cols(), c.stride_x = a_stride, c.x_role = ArgId::src;
        c.trans_y = false, c.ldy = p.n, c.stride_y = c_stride, c.y_role = ArgId::diff_dst;
      } else {  // dB (n x k) = dC^T (n x m) * op(A) (m x k)
        c.m = p.n, c.n = p.k;
        c.trans_x = true, c.ldx = p.n, c.stride_x = c_stride, c.x_role = ArgId::diff_dst;
        c.trans_y = p.trans_a, c.ldy = p.a_cols(), c.stride_y = a_stride, c.y_role = ArgId::src;
      }
      break;
  }
  c.fold();
  return c;
}

/// The pointer of `role` among a call's arguments (nullptr for a role a GEMM does not have).
inline const void* gemm_pointer(const GemmArgs& a, ArgId role) {
  switch (role) {
    case ArgId::src: return a.a;
    case ArgId::wei: return a.b;
    case ArgId::bias: return a.bias;
    case ArgId::dst: return a.c;
    case ArgId::diff_dst: return a.dc;
    case ArgId::diff_src: return a.da;
    case ArgId::diff_wei: return a.db;
    case ArgId::diff_bias: return a.dbias;
    default: return nullptr;
  }
}

/// The bias gradient of a backward_weights problem with bias: dbias[j] = sum over the rows of
/// every batch of dC, i.e. column sums of a (batch * m) x n matrix.
inline bool has_bias_reduction(const GemmProblem& p) {
  return p.direction == GemmDirection::backward_weights && p.bias;
}

}  // namespace galley::dnn
