// The hip backend's reduce list, both directions: the single-source kernel (MIOpen's
// miopenReduceTensor is not wired in yet).
#include "backends/gpu/op_lists.hpp"
#include "backends/gpu/softmax_reduce_solvers.hpp"

namespace galley::backends::gpu {
namespace {

void register_reduce_list() {
  constexpr std::string_view b = "hip";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_reduce_direct(b));
  dnn::register_solvers(b, dnn::OpKind::reduce, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_reduce_list);

}  // namespace
}  // namespace galley::backends::gpu
