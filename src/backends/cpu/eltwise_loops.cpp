// The baseline-ISA build of the eltwise loops, and the choice between the builds.
#define GALLEY_ELTWISE_LOOPS_NS eltwise_scalar
#include "backends/cpu/eltwise_loops.inc"

#include "backends/cpu/conv_isa.hpp"

namespace galley::backends::cpu {

const EltwiseLoops& eltwise_loops() {
  switch (cpu_isa()) {
    case CpuIsa::avx512:
      return eltwise_avx512::loops();
    case CpuIsa::avx2:
      return eltwise_avx2::loops();
    case CpuIsa::scalar:
      break;
  }
  return eltwise_scalar::loops();
}

}  // namespace galley::backends::cpu
