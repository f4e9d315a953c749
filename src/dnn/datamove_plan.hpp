// The data-movement problems reduced to what their fast solvers execute, in memory order with
// dims merged wherever memory allows: a strided gather into a packed tensor (transpose, reorder,
// the crop of pad's backward), rows cut into parts (concat, split) and a padded copy. The cpu and
// gpu solvers share these plans; the references do not use them, so a planning mistake shows.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "galley/core/dtype.hpp"
#include "galley/dnn/datamove_problem.hpp"

namespace galley::dnn {

/// dst, packed row-major over dims[0..rank), gets at index (i_0, ..., i_{rank-1}) the src element
/// at src_offset + sum i_k * src_strides[k], converted from src_dtype to dst_dtype. After
/// simplification no dim is 1 (unless rank is 1) and no two neighbours could merge, so rank 1 with
/// src stride 1 is a plain copy and src_strides[rank-1] == 1 means contiguous rows.
struct CopyPlan {
  int rank = 1;
  std::array<std::int64_t, kMaxRank> dims{1, 1, 1, 1, 1, 1};
  std::array<std::int64_t, kMaxRank> src_strides{1, 1, 1, 1, 1, 1};
  std::int64_t src_offset = 0;
  DType src_dtype = DType::f32;
  DType dst_dtype = DType::f32;

  std::int64_t elements() const;
  /// The dim (other than the last) whose src stride is 1, or -1: a transpose that moves the
  /// innermost dim, done in tiles.
  int unit_stride_dim() const;
};

CopyPlan copy_plan(const TransposeProblem& p);
CopyPlan copy_plan(const ReorderProblem& p);
/// Pad's backward: the interior of the padded diff_dst, packed into diff_src.
CopyPlan crop_plan(const PadProblem& p);

/// Concat's output (split's input) as `outer` rows of `row` elements; part i fills, in each row,
/// the `inner[i]` elements from `offset[i]`.
struct PartsPlan {
  std::int64_t outer = 1;
  std::int64_t row = 1;
  std::vector<std::int64_t> inner;
  std::vector<std::int64_t> offset;
  DType dtype = DType::f32;
};

PartsPlan parts_plan(const ConcatProblem& p);
PartsPlan parts_plan(const SplitProblem& p);

/// Pad's forward in memory order with unpadded neighbours merged: dst (padded dims, packed) holds
/// src (small dims, packed) at `before` and `value` elsewhere.
struct PadPlan {
  int rank = 1;
  std::array<std::int64_t, kMaxRank> small{1, 1, 1, 1, 1, 1};
  std::array<std::int64_t, kMaxRank> padded{1, 1, 1, 1, 1, 1};
  std::array<std::int64_t, kMaxRank> before{0, 0, 0, 0, 0, 0};
  DType dtype = DType::f32;
  double value = 0;
};

PadPlan pad_plan(const PadProblem& p);

/// The logical axes of a packed tensor of `rank` in `layout`, outermost first in memory.
std::vector<int> memory_order(Layout layout, int rank);

}  // namespace galley::dnn
