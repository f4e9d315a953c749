// The cpu backend's softmax list, both directions, fastest first: contiguous rows when the axis is
// innermost, the column-blocked kernel for any axis, the reference last.
#include "backends/cpu/softmax_reduce_solvers.hpp"
#include "dnn/ref_softmax.hpp"

namespace galley::backends::cpu {
namespace {

const bool kRegistered = [] {
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_softmax_rows());
  list.push_back(make_softmax_strided());
  list.push_back(dnn::make_ref_softmax());
  dnn::register_solvers("cpu", dnn::OpKind::softmax, std::move(list));
  return true;
}();

}  // namespace
}  // namespace galley::backends::cpu
