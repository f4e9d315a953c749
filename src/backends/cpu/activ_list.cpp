// The cpu backend's activation list: the blocked pass, then the reference. The order lives here.
#include "backends/cpu/activ_solvers.hpp"
#include "dnn/ref_activ.hpp"

namespace galley::backends::cpu {
namespace {

const bool kRegistered = [] {
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_activ_blocked());
  list.push_back(dnn::make_ref_activ());
  dnn::register_solvers("cpu", dnn::OpKind::activ, std::move(list));
  return true;
}();

}  // namespace
}  // namespace galley::backends::cpu
