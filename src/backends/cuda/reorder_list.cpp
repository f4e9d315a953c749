// The cuda backend's reorder list: the single-source kernels (no vendor library has faster
// ones), the register transpose where it applies, then the shared-memory tiles for every problem.
#include "backends/gpu/datamove_solvers.hpp"
#include "backends/gpu/op_lists.hpp"

namespace galley::backends::gpu {

namespace {

void register_reorder_list() {
  constexpr std::string_view b = "cuda";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_reorder_regs(b));
  list.push_back(make_reorder_tiled(b));
  dnn::register_solvers(b, dnn::OpKind::reorder, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_reorder_list);

}  // namespace

}  // namespace galley::backends::gpu
