// The hip backend's softmax list, both directions: the single-source kernels in the cuda list's
// order (MIOpen's softmax is not wired in yet).
#include "backends/gpu/op_lists.hpp"
#include "backends/gpu/softmax_reduce_solvers.hpp"

namespace galley::backends::gpu {
namespace {

void register_softmax_list() {
  constexpr std::string_view b = "hip";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_softmax_rows(b));
  list.push_back(make_softmax_strided(b));
  dnn::register_solvers(b, dnn::OpKind::softmax, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_softmax_list);

}  // namespace
}  // namespace galley::backends::gpu
