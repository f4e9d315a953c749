// The cuda backend's bnorm list: cuDNN first (the vendor baseline until measured), then the single-source
// kernel.
#include "backends/cuda/vendor_norm_solvers.hpp"
#include "backends/gpu/norm_solvers.hpp"
#include "backends/gpu/op_lists.hpp"

namespace galley::backends::gpu {
namespace {

void register_bnorm_list() {
  constexpr std::string_view b = "cuda";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(cuda::make_cudnn_bnorm_solver());
  list.push_back(make_bnorm_planes(b));
  dnn::register_solvers(b, dnn::OpKind::bnorm, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_bnorm_list);

}  // namespace
}  // namespace galley::backends::gpu
