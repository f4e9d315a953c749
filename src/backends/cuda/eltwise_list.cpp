// The cuda backend's eltwise list, fastest first: the dense kernel for equal shapes (or a
// single-value input), the broadcast kernel, which claims everything, then cuDNN's OpTensor, a
// vendor baseline for the tuner to time (it does no division and no backward, and its broadcasts
// are limited), never the list-order choice.
#include "backends/cuda/vendor_eltwise_solvers.hpp"
#include "backends/gpu/eltwise_solvers.hpp"
#include "backends/gpu/op_lists.hpp"

namespace galley::backends::gpu {
namespace {

void register_eltwise_list() {
  constexpr std::string_view b = "cuda";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_eltwise_dense(b));
  list.push_back(make_eltwise_broadcast(b));
  list.push_back(cuda::make_cudnn_eltwise_solver());
  dnn::register_solvers(b, dnn::OpKind::eltwise, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_eltwise_list);

}  // namespace
}  // namespace galley::backends::gpu
