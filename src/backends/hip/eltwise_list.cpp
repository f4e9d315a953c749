// The hip backend's eltwise list, fastest first: the dense kernel for equal shapes (or a
// single-value input), then the broadcast kernel, which claims everything (no MIOpen solver yet).
#include "backends/gpu/eltwise_solvers.hpp"
#include "backends/gpu/op_lists.hpp"

namespace galley::backends::gpu {
namespace {

void register_eltwise_list() {
  constexpr std::string_view b = "hip";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_eltwise_dense(b));
  list.push_back(make_eltwise_broadcast(b));
  dnn::register_solvers(b, dnn::OpKind::eltwise, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_eltwise_list);

}  // namespace
}  // namespace galley::backends::gpu
