// ConvProblem -> ConvParams, and the 32-bit size guard shared by the fast solvers' check().
#include <limits>

#include "conv_device.cuh"
#include "galley/dnn/conv_problem.hpp"

namespace galley::backends::gpu {

ConvParams make_params(const dnn::ConvProblem& problem) {
  problem.validate();
  auto narrow = [](std::int64_t v, const char* field) {
    if (v > std::numeric_limits<int>::max())
      throw Error(Status::invalid_argument, std::string("conv problem field ") + field + " = " +
                                                std::to_string(v) + " exceeds the GPU kernels' 32-bit range");
    return int(v);
  };
  ConvParams p;
  p.n = narrow(problem.n, "n");
  p.c = narrow(problem.c, "c");
  p.h = narrow(problem.h, "h");
  p.w = narrow(problem.w, "w");
  p.k = narrow(problem.k, "k");
  p.r = narrow(problem.y, "y");
  p.s = narrow(problem.x, "x");
  p.pad_h = narrow(problem.pad_h, "pad_h");
  p.pad_w = narrow(problem.pad_w, "pad_w");
  p.stride_h = narrow(problem.stride_h, "stride_h");
  p.stride_w = narrow(problem.stride_w, "stride_w");
  p.dil_h = narrow(problem.dilation_h, "dilation_h");
  p.dil_w = narrow(problem.dilation_w, "dilation_w");
  p.groups = narrow(problem.groups, "groups");
  p.p = narrow(problem.out_h(), "out_h");
  p.q = narrow(problem.out_w(), "out_w");
  p.cg = p.c / p.groups;
  p.kg = p.k / p.groups;
  p.nhwc = problem.layout == dnn::Layout::nhwc;
  p.dtype = problem.dtype;
  return p;
}

std::string too_large_for_int32(const ConvParams& p) {
  constexpr std::int64_t kMax = std::numeric_limits<int>::max();
  if (p.x_elems() > kMax) return "input has " + std::to_string(p.x_elems()) + " elements (32-bit indexing)";
  if (p.y_elems() > kMax) return "output has " + std::to_string(p.y_elems()) + " elements (32-bit indexing)";
  if (p.w_elems() > kMax) return "weights have " + std::to_string(p.w_elems()) + " elements (32-bit indexing)";
  return {};
}

std::string IgemmPlan::describe() const {
  std::string s = "tile " + std::to_string(bm) + "x" + std::to_string(bn);
  if (wgmma) s += " (wgmma)";
  if (splits > 1) s += ", split-k " + std::to_string(splits);
  return s;
}

}  // namespace galley::backends::gpu
