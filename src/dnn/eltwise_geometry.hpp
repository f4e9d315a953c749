// The broadcast geometry every eltwise solver (cpu and gpu) walks: dst's dims in memory order with
// the element strides of a and b over them (0 along a broadcast axis), size-1 dims dropped and
// neighbours merged wherever both inputs allow, so "32x256x56x56 + 1x256x1x1" becomes the three
// dims [32, 256, 3136] with b strides [0, 1, 0]. dst (and dy) is dense in that order. Internal to
// libgalley and its backends.
#pragma once

#include <cstdint>

#include "galley/dnn/eltwise.hpp"

namespace galley::dnn {

struct EltwiseGeometry {
  int rank = 1;                          ///< 1..kMaxRank
  std::int64_t dims[kMaxRank] = {1};     ///< outermost first; dense strides for dst
  std::int64_t a_stride[kMaxRank] = {};  ///< 0 where a is broadcast
  std::int64_t b_stride[kMaxRank] = {};  ///< 0 where b is broadcast
  std::int64_t elements = 1;             ///< dst elements
  std::int64_t a_elements = 1, b_elements = 1;

  bool a_full() const { return a_elements == elements; }
  bool b_full() const { return b_elements == elements; }
};

/// The geometry of a valid problem.
inline EltwiseGeometry eltwise_geometry(const EltwiseProblem& p) {
  const auto out = p.dst_shape();
  const int rank = static_cast<int>(out.size());
  // Memory order of the logical dims: channels last for nhwc.
  int order[kMaxRank];
  for (int i = 0; i < rank; ++i) order[i] = i;
  if (p.layout == Layout::nhwc && rank == 4) {
    order[1] = 2;
    order[2] = 3;
    order[3] = 1;
  }
  const auto aligned = [&](const std::vector<std::int64_t>& shape, int i) {
    const int j = i - (rank - static_cast<int>(shape.size()));
    return j >= 0 ? shape[static_cast<std::size_t>(j)] : std::int64_t{1};
  };
  std::int64_t dims[kMaxRank], as[kMaxRank], bs[kMaxRank];
  std::int64_t a_run = 1, b_run = 1;
  for (int m = rank - 1; m >= 0; --m) {
    const int i = order[m];
    const std::int64_t da = aligned(p.a, i), db = aligned(p.b, i);
    dims[m] = out[static_cast<std::size_t>(i)];
    as[m] = da == 1 ? 0 : a_run;
    bs[m] = db == 1 ? 0 : b_run;
    a_run *= da;
    b_run *= db;
  }
  EltwiseGeometry g;
  g.rank = 0;
  g.a_elements = a_run;
  g.b_elements = b_run;
  for (int m = 0; m < rank; ++m) {
    if (dims[m] == 1) continue;
    // Merge into the previous dim when, for both inputs, stepping the outer dim equals stepping
    // past the whole inner one (broadcast along both, or dense along both).
    if (g.rank > 0) {
      const int k = g.rank - 1;
      if (g.a_stride[k] == as[m] * dims[m] && g.b_stride[k] == bs[m] * dims[m]) {
        g.dims[k] *= dims[m];
        g.a_stride[k] = as[m];
        g.b_stride[k] = bs[m];
        continue;
      }
    }
    g.dims[g.rank] = dims[m];
    g.a_stride[g.rank] = as[m];
    g.b_stride[g.rank] = bs[m];
    ++g.rank;
  }
  if (g.rank == 0) {
    g.rank = 1;
    g.dims[0] = 1;
    g.a_stride[0] = 0;
    g.b_stride[0] = 0;
  }
  g.elements = 1;
  for (int k = 0; k < g.rank; ++k) g.elements *= g.dims[k];
  return g;
}

}  // namespace galley::dnn
