// The cpu backend's reorder list: the threaded copy, then the reference. The order lives here alone.
#include "backends/cpu/datamove_solvers.hpp"
#include "dnn/ref_datamove.hpp"

namespace galley::backends::cpu {
namespace {

const bool kRegistered = [] {
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_reorder_blocked());
  list.push_back(dnn::make_ref_reorder());
  dnn::register_solvers("cpu", dnn::OpKind::reorder, std::move(list));
  return true;
}();

}  // namespace
}  // namespace galley::backends::cpu
