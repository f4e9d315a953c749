// One batched matrix product (GEMM, linear, matmul) in one direction:
//   forward           dst[b] = alpha * op(A[b]) op(B[b]) + beta * dst[b] + bias
//   backward_data     diff_src = dL/dA given diff_dst = dL/d dst
//   backward_weights  diff_wei = dL/dB and diff_bias = dL/d bias given diff_dst
// op(X) is X or X^T (trans_a, trans_b); A is src, B is wei (nn.Linear: B = W stored N x K, trans_b).
// Fields follow MIOpenDriver's gemm flags (-m -n -k -u/--transA -v/--transB --batch_count).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "galley/core/dtype.hpp"
#include "galley/dnn/op.hpp"
#include "galley/dnn/tensor.hpp"
#include "galley/runtime/device.hpp"

namespace galley::dnn {

/// Backward of a GEMM is two more GEMMs and a bias reduction; each is its own problem, so the
/// tuner and the find-db time and store them like the forward.
enum class GemmDirection { forward, backward_data, backward_weights };
const char* to_string(GemmDirection direction) noexcept;

/// Device pointers of one GEMM call by role: forward reads a (src), b (wei), bias and writes c
/// (dst, also read when beta != 0); backward_data reads dc (diff_dst) and b and writes da
/// (diff_src); backward_weights reads a and dc and writes db (diff_wei) and dbias (diff_bias).
struct GemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;
  void* c = nullptr;
  const void* dc = nullptr;
  void* da = nullptr;
  void* db = nullptr;
  void* dbias = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;

  static GemmArgs from(const OpArgs& args);
};

/// A GEMM problem: `batch` products of op(A) (m x k) by op(B) (k x n) into m x n, row-major.
/// A is stored m x k (k x m when trans_a), B k x n (n x k when trans_b), dst m x n. With
/// shared_a / shared_b (batch > 1 only) one A or B serves every batch (a batch stride of 0: the
/// weight of a linear layer applied to a batch of sequences); its gradient then sums over the batch.
/// bias is a vector of n added to every row (nn.Linear's). f32, f16 or bf16 storage, f32 math.
struct GemmProblem {
  static constexpr OpKind kKind = OpKind::gemm;
  using Args = GemmArgs;

  std::int64_t m = 1, n = 1, k = 1;
  std::int64_t batch = 1;
  bool trans_a = false, trans_b = false;
  bool shared_a = false, shared_b = false;
  bool bias = false;
  /// Scales the product in every direction (the gradients carry it too).
  double alpha = 1.0;
  /// Forward only: how much of the old dst is kept. Backward directions write their gradients
  /// (which do not depend on beta), so their beta is 0.
  double beta = 0.0;
  DType dtype = DType::f32;
  GemmDirection direction = GemmDirection::forward;

  /// Throws Error(invalid_argument) naming the field: non-positive sizes, a shared operand with
  /// batch 1, a non-finite alpha or beta, beta in a backward direction, a dtype other than
  /// f32/f16/bf16, element counts that overflow.
  void validate() const;

  /// Rows and columns of A and B as stored, and the batch count each holds (1 when shared).
  std::int64_t a_rows() const { return trans_a ? k : m; }
  std::int64_t a_cols() const { return trans_a ? m : k; }
  std::int64_t b_rows() const { return trans_b ? n : k; }
  std::int64_t b_cols() const { return trans_b ? k : n; }
  std::int64_t a_batches() const { return shared_a ? 1 : batch; }
  std::int64_t b_batches() const { return shared_b ? 1 : batch; }

  /// Row-major descriptors: rank 3 {batches, rows, cols} for an operand holding more than one
  /// matrix, rank 2 {rows, cols} otherwise; bias is rank 1 {n}.
  TensorDesc a_desc() const;
  TensorDesc b_desc() const;
  TensorDesc c_desc() const;
  TensorDesc bias_desc() const;

  /// The tensors of this direction: forward {src A, wei B, [bias] -> dst C}, backward_data
  /// {diff_dst dC, wei B -> diff_src dA}, backward_weights {src A, diff_dst dC -> diff_wei dB,
  /// [diff_bias]}.
  std::vector<TensorArg> tensors() const;

  /// 2*m*n*k*batch in every direction (the bias and its reduction are not counted).
  double flops() const;
  /// Bytes of the direction's tensors, each once (dst twice when beta != 0: read and written).
  double min_bytes() const;
  /// 1e-2 for f16/bf16; 1e-5 for f32 widened by sqrt(terms / 1024) when each output sums more
  /// than 1024 products (terms: k forward, n backward_data, m (times batch when B is shared)
  /// backward_weights).
  double tolerance() const;

  /// Canonical key, e.g. "gemm-F-f16-nt-b8-m1024-n4096-k1024-sa0-sb1-bias1-alpha1-beta0".
  std::string key() const;
  static GemmProblem parse_key(std::string_view key);
  /// "galley bench gemm -m 1024 -n 4096 -k 1024 ... -F 1 --dtype f16 --device cpu [--solver NAME]".
  std::string bench_command(const runtime::Device& device, std::string_view solver = {}) const;
  std::size_t hash() const noexcept;

  friend bool operator==(const GemmProblem&, const GemmProblem&) = default;
};

}  // namespace galley::dnn
