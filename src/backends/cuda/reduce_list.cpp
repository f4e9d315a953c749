// The cuda backend's reduce list, both directions: the single-source kernel (deterministic, any
// dtype, both directions). cuDNN's cudnnReduceTensor is deprecated in cuDNN 9 and refused some of
// the problems this kernel runs (CUDNN_STATUS_BAD_PARAM), so it is not listed.
#include "backends/gpu/op_lists.hpp"
#include "backends/gpu/softmax_reduce_solvers.hpp"

namespace galley::backends::gpu {
namespace {

void register_reduce_list() {
  constexpr std::string_view b = "cuda";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_reduce_direct(b));
  dnn::register_solvers(b, dnn::OpKind::reduce, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_reduce_list);

}  // namespace
}  // namespace galley::backends::gpu
