// The hip backend's pad list: the single-source kernel (no vendor library has a faster one).
#include "backends/gpu/datamove_solvers.hpp"
#include "backends/gpu/op_lists.hpp"

namespace galley::backends::gpu {

namespace {

void register_pad_list() {
  constexpr std::string_view b = "hip";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_pad_copy(b));
  dnn::register_solvers(b, dnn::OpKind::pad, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_pad_list);

}  // namespace

}  // namespace galley::backends::gpu
