// The cpu backend's pooling list: the direct solver, then the reference.
#include "backends/cpu/pool_solvers.hpp"
#include "dnn/ref_pool.hpp"

namespace galley::backends::cpu {
namespace {

const bool kRegistered = [] {
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_pool_direct());
  list.push_back(dnn::make_ref_pool());
  dnn::register_solvers("cpu", dnn::OpKind::pool, std::move(list));
  return true;
}();

}  // namespace
}  // namespace galley::backends::cpu
