// The cuda backend's softmax list, both directions: the own kernels first (one read of each row
// when it fits), cuDNN next, the strided kernel for any axis last.
#include "backends/cuda/vendor_softmax_reduce_solvers.hpp"
#include "backends/gpu/op_lists.hpp"
#include "backends/gpu/softmax_reduce_solvers.hpp"

namespace galley::backends::gpu {
namespace {

void register_softmax_list() {
  constexpr std::string_view b = "cuda";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_softmax_rows(b));
  list.push_back(cuda::make_cudnn_softmax_solver());
  list.push_back(make_softmax_strided(b));
  dnn::register_solvers(b, dnn::OpKind::softmax, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_softmax_list);

}  // namespace
}  // namespace galley::backends::gpu
