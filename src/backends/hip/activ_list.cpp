// The hip backend's activation list: the single-source kernel (MIOpen's activation solver is not
// built yet).
#include "backends/gpu/activ_solvers.hpp"
#include "backends/gpu/op_lists.hpp"

namespace galley::backends::gpu {
namespace {

void register_activ_list() {
  constexpr std::string_view b = "hip";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_activ_eltwise(b));
  dnn::register_solvers(b, dnn::OpKind::activ, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_activ_list);

}  // namespace
}  // namespace galley::backends::gpu
