// The cpu backend's GEMM list, every direction: Galley's AVX-512 kernel first (it beats the
// Debian OpenBLAS's AVX2 kernels where the CPU has AVX-512), OpenBLAS for every other CPU, the
// reference last. The order lives here alone.
#include "backends/cpu/gemm_solvers.hpp"
#include "dnn/ref_gemm.hpp"

namespace galley::backends::cpu {
namespace {

const bool kRegistered = [] {
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_gemm_avx512());
  list.push_back(make_gemm_openblas());
  list.push_back(dnn::make_ref_gemm());
  dnn::register_solvers("cpu", dnn::OpKind::gemm, std::move(list));
  return true;
}();

}  // namespace
}  // namespace galley::backends::cpu
