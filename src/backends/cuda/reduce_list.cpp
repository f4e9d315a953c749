// The cuda backend's reduce list, both directions: the single-source kernel (deterministic, any
// dtype, both directions) first, cuDNN's cudnnReduceTensor (forward, f32/f16) next.
#include "backends/cuda/vendor_softmax_reduce_solvers.hpp"
#include "backends/gpu/op_lists.hpp"
#include "backends/gpu/softmax_reduce_solvers.hpp"

namespace galley::backends::gpu {
namespace {

void register_reduce_list() {
  constexpr std::string_view b = "cuda";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_reduce_direct(b));
  list.push_back(cuda::make_cudnn_reduce_solver());
  dnn::register_solvers(b, dnn::OpKind::reduce, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_reduce_list);

}  // namespace
}  // namespace galley::backends::gpu
