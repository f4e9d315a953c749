// The cpu backend's reduce list, both directions: the coalesced-group kernel, the reference last.
#include "backends/cpu/softmax_reduce_solvers.hpp"
#include "dnn/ref_reduce.hpp"

namespace galley::backends::cpu {
namespace {

const bool kRegistered = [] {
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_reduce_direct());
  list.push_back(dnn::make_ref_reduce());
  dnn::register_solvers("cpu", dnn::OpKind::reduce, std::move(list));
  return true;
}();

}  // namespace
}  // namespace galley::backends::cpu
