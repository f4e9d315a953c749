// The cuda backend's gnorm list: the single-source kernel.
#include "backends/gpu/norm_solvers.hpp"
#include "backends/gpu/op_lists.hpp"

namespace galley::backends::gpu {
namespace {

void register_gnorm_list() {
  constexpr std::string_view b = "cuda";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_gnorm_planes(b));
  dnn::register_solvers(b, dnn::OpKind::gnorm, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_gnorm_list);

}  // namespace
}  // namespace galley::backends::gpu
