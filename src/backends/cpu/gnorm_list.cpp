// The cpu backend's group norm list: the plane solver, the reference last. The order lives here alone.
#include "backends/cpu/norm_solvers.hpp"
#include "dnn/ref_norm.hpp"

namespace galley::backends::cpu {
namespace {

const bool kRegistered = [] {
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_gnorm_planes());
  list.push_back(dnn::make_ref_gnorm());
  dnn::register_solvers("cpu", dnn::OpKind::gnorm, std::move(list));
  return true;
}();

}  // namespace
}  // namespace galley::backends::cpu
