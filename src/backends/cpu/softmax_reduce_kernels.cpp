// The baseline-ISA build of the softmax and reduce loops, and the choice between the builds.
#define GALLEY_SOFTMAX_KERNELS_NS scalar
#include "backends/cpu/softmax_reduce_kernels.inc"

#include "backends/cpu/conv_isa.hpp"

namespace galley::backends::cpu::softmax_kernels {

const Kernels& best() {
  switch (cpu_isa()) {
    case CpuIsa::avx512:
      return avx512::kernels();
    case CpuIsa::avx2:
      return avx2::kernels();
    case CpuIsa::scalar:
      break;
  }
  return scalar::kernels();
}

}  // namespace galley::backends::cpu::softmax_kernels
