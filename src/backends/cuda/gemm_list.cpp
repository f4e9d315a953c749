// The cuda backend's gemm list, every direction, fastest first: the own tensor-core kernel for
// f16/bf16 (its tiles are the tuner's inner choices), cuBLAS, then the SIMT kernel, which claims
// every problem (f32 included: it never uses TF32, so it is the same arithmetic as cuBLAS's f32).
#include "backends/cuda/vendor_gemm_solvers.hpp"
#include "backends/gpu/gemm_solvers.hpp"
#include "backends/gpu/op_lists.hpp"

namespace galley::backends::gpu {
namespace {

void register_gemm_list() {
  constexpr std::string_view b = "cuda";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_gemm_tc(b));
  list.push_back(cuda::make_cublas_gemm_solver());
  list.push_back(make_gemm_simt(b));
  dnn::register_solvers(b, dnn::OpKind::gemm, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_gemm_list);

}  // namespace
}  // namespace galley::backends::gpu
