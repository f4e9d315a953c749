// The cpu backend's layer norm list: the row solver, the reference last. The order lives here alone.
#include "backends/cpu/norm_solvers.hpp"
#include "dnn/ref_norm.hpp"

namespace galley::backends::cpu {
namespace {

const bool kRegistered = [] {
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_lnorm_rows());
  list.push_back(dnn::make_ref_lnorm());
  dnn::register_solvers("cpu", dnn::OpKind::lnorm, std::move(list));
  return true;
}();

}  // namespace
}  // namespace galley::backends::cpu
