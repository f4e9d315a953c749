// The hip backend's pooling list, fastest first: the global reduction for the problems it claims,
// then the direct kernels, which claim every problem (no MIOpen solver is built yet).
#include "backends/gpu/op_lists.hpp"
#include "backends/gpu/pool_solvers.hpp"

namespace galley::backends::gpu {
namespace {

void register_pool_list() {
  constexpr std::string_view b = "hip";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_pool_global(b));
  list.push_back(make_pool_strips(b));
  list.push_back(make_pool_direct(b));
  dnn::register_solvers(b, dnn::OpKind::pool, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_pool_list);

}  // namespace
}  // namespace galley::backends::gpu
