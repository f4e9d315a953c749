// The cpu backend's eltwise list: the threaded solver, then the reference. The order lives here alone.
#include "backends/cpu/eltwise_solvers.hpp"
#include "dnn/ref_eltwise.hpp"

namespace galley::backends::cpu {
namespace {

const bool kRegistered = [] {
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_eltwise_direct());
  list.push_back(dnn::make_ref_eltwise());
  dnn::register_solvers("cpu", dnn::OpKind::eltwise, std::move(list));
  return true;
}();

}  // namespace
}  // namespace galley::backends::cpu
