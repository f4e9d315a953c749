#include "dnn/datamove_plan.hpp"

#include <numeric>

namespace galley::dnn {
namespace {

// Drops unit dims and merges neighbours k, k+1 whose src strides chain (src_strides[k] ==
// dims[k+1] * src_strides[k+1]): dst is packed, so such a pair is one dim in both tensors.
CopyPlan simplified(CopyPlan p) {
  CopyPlan out = p;
  int r = 0;
  for (int k = 0; k < p.rank; ++k) {
    if (p.dims[k] == 1) continue;
    if (r > 0 && out.src_strides[r - 1] == p.dims[k] * p.src_strides[k]) {
      out.dims[r - 1] *= p.dims[k];
      out.src_strides[r - 1] = p.src_strides[k];
      continue;
    }
    out.dims[r] = p.dims[k];
    out.src_strides[r] = p.src_strides[k];
    ++r;
  }
  if (r == 0) {
    out.dims[0] = 1;
    out.src_strides[0] = 1;
    r = 1;
  }
  for (int k = r; k < kMaxRank; ++k) {
    out.dims[k] = 1;
    out.src_strides[k] = 1;
  }
  out.rank = r;
  return out;
}

// Row-major strides of `dims` (logical order) for a tensor packed in `layout`.
std::vector<std::int64_t> logical_strides(Layout layout, const std::vector<std::int64_t>& dims) {
  const int rank = static_cast<int>(dims.size());
  const std::vector<int> order = memory_order(layout, rank);
  std::vector<std::int64_t> strides(dims.size());
  std::int64_t s = 1;
  for (int m = rank - 1; m >= 0; --m) {
    strides[static_cast<std::size_t>(order[static_cast<std::size_t>(m)])] = s;
    s *= dims[static_cast<std::size_t>(order[static_cast<std::size_t>(m)])];
  }
  return strides;
}

}  // namespace

std::vector<int> memory_order(Layout layout, int rank) {
  if (layout == Layout::nhwc && rank == 4) return {0, 2, 3, 1};
  std::vector<int> order(static_cast<std::size_t>(rank));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

std::int64_t CopyPlan::elements() const {
  std::int64_t n = 1;
  for (int k = 0; k < rank; ++k) n *= dims[k];
  return n;
}

int CopyPlan::unit_stride_dim() const {
  for (int k = 0; k + 1 < rank; ++k) {
    if (src_strides[k] == 1) return k;
  }
  return -1;
}

CopyPlan copy_plan(const TransposeProblem& p) {
  const std::vector<std::int64_t> src_strides = logical_strides(Layout::nchw, p.dims);
  CopyPlan plan;
  plan.rank = p.rank();
  plan.src_dtype = plan.dst_dtype = p.dtype;
  for (int i = 0; i < p.rank(); ++i) {
    plan.dims[i] = p.dims[static_cast<std::size_t>(p.perm[static_cast<std::size_t>(i)])];
    plan.src_strides[i] = src_strides[static_cast<std::size_t>(p.perm[static_cast<std::size_t>(i)])];
  }
  return simplified(plan);
}

CopyPlan copy_plan(const ReorderProblem& p) {
  // Walk dst in its memory order; each step reads src through src's own strides.
  const std::vector<std::int64_t> src_strides = logical_strides(p.src_layout, p.dims);
  const std::vector<int> order = memory_order(p.dst_layout, p.rank());
  CopyPlan plan;
  plan.rank = p.rank();
  plan.src_dtype = p.src_dtype;
  plan.dst_dtype = p.dst_dtype;
  for (int m = 0; m < p.rank(); ++m) {
    const auto axis = static_cast<std::size_t>(order[static_cast<std::size_t>(m)]);
    plan.dims[m] = p.dims[axis];
    plan.src_strides[m] = src_strides[axis];
  }
  return simplified(plan);
}

CopyPlan crop_plan(const PadProblem& p) {
  const std::vector<std::int64_t> padded = p.padded_dims();
  const std::vector<std::int64_t> strides = logical_strides(p.layout, padded);
  const std::vector<int> order = memory_order(p.layout, p.rank());
  CopyPlan plan;
  plan.rank = p.rank();
  plan.src_dtype = plan.dst_dtype = p.dtype;
  for (int m = 0; m < p.rank(); ++m) {
    const auto axis = static_cast<std::size_t>(order[static_cast<std::size_t>(m)]);
    plan.dims[m] = p.dims[axis];
    plan.src_strides[m] = strides[axis];
    plan.src_offset += p.before[axis] * strides[axis];
  }
  return simplified(plan);
}

namespace {

PartsPlan parts(DType dtype, Layout layout, const std::vector<std::int64_t>& dims, int axis,
                const std::vector<std::int64_t>& sizes) {
  const std::vector<int> order = memory_order(layout, static_cast<int>(dims.size()));
  PartsPlan plan;
  plan.dtype = dtype;
  std::int64_t unit = 1;  // elements per step along the axis
  bool inside = false;
  for (int a : order) {
    if (a == axis) {
      inside = true;
    } else if (inside) {
      unit *= dims[static_cast<std::size_t>(a)];
    } else {
      plan.outer *= dims[static_cast<std::size_t>(a)];
    }
  }
  plan.row = dims[static_cast<std::size_t>(axis)] * unit;
  std::int64_t offset = 0;
  for (std::int64_t s : sizes) {
    plan.inner.push_back(s * unit);
    plan.offset.push_back(offset);
    offset += s * unit;
  }
  return plan;
}

}  // namespace

PartsPlan parts_plan(const ConcatProblem& p) { return parts(p.dtype, p.layout, p.dims, p.axis, p.sizes); }
PartsPlan parts_plan(const SplitProblem& p) { return parts(p.dtype, p.layout, p.dims, p.axis, p.sizes); }

PadPlan pad_plan(const PadProblem& p) {
  const std::vector<int> order = memory_order(p.layout, p.rank());
  PadPlan plan;
  plan.dtype = p.dtype;
  plan.value = p.value;
  int r = 0;
  for (int m = 0; m < p.rank(); ++m) {
    const auto axis = static_cast<std::size_t>(order[static_cast<std::size_t>(m)]);
    const std::int64_t d = p.dims[axis], b = p.before[axis], a = p.after[axis];
    if (d == 1 && b == 0 && a == 0) continue;
    // A dim without padding folds into the one before it: the pair is one dim in both tensors.
    if (r > 0 && b == 0 && a == 0) {
      plan.small[r - 1] *= d;
      plan.padded[r - 1] *= d;
      plan.before[r - 1] *= d;
      continue;
    }
    plan.small[r] = d;
    plan.padded[r] = d + b + a;
    plan.before[r] = b;
    ++r;
  }
  plan.rank = r == 0 ? 1 : r;
  return plan;
}

}  // namespace galley::dnn
