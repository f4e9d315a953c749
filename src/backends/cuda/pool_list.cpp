// The cuda backend's pooling list, fastest first: the global reduction for the problems it claims,
// the own direct kernels (PyTorch's tie and NaN rules, every problem), then cuDNN's legacy pooling
// for what it supports.
#include "backends/cuda/vendor_pool_solvers.hpp"
#include "backends/gpu/op_lists.hpp"
#include "backends/gpu/pool_solvers.hpp"

namespace galley::backends::gpu {
namespace {

void register_pool_list() {
  constexpr std::string_view b = "cuda";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_pool_global(b));
  list.push_back(make_pool_strips(b));
  list.push_back(make_pool_direct(b));
  list.push_back(cuda::make_cudnn_pool_solver());
  dnn::register_solvers(b, dnn::OpKind::pool, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_pool_list);

}  // namespace
}  // namespace galley::backends::gpu
