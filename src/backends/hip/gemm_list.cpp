// The hip backend's gemm list: the single-source SIMT kernel (gpu.gemm.tc is mma.sync, NVIDIA's;
// rocBLAS is not built yet). It claims every problem of every direction.
#include "backends/gpu/gemm_solvers.hpp"
#include "backends/gpu/op_lists.hpp"

namespace galley::backends::gpu {
namespace {

void register_gemm_list() {
  constexpr std::string_view b = "hip";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_gemm_simt(b));
  dnn::register_solvers(b, dnn::OpKind::gemm, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_gemm_list);

}  // namespace
}  // namespace galley::backends::gpu
