// The cuda backend's activation list: cuDNN first for the functions it has (the vendor baseline,
// until the tuner has measured), then the single-source kernel, which claims everything.
#include "backends/cuda/activ_cudnn.hpp"
#include "backends/gpu/activ_solvers.hpp"
#include "backends/gpu/op_lists.hpp"

namespace galley::backends::gpu {
namespace {

void register_activ_list() {
  constexpr std::string_view b = "cuda";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(cuda::make_cudnn_activ_solver());
  list.push_back(make_activ_eltwise(b));
  dnn::register_solvers(b, dnn::OpKind::activ, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_activ_list);

}  // namespace
}  // namespace galley::backends::gpu
