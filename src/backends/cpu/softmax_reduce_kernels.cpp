// The baseline-ISA build of the softmax and reduce loops, and the choice between the builds.
#define GALLEY_SOFTMAX_KERNELS_NS scalar
#include "backends/cpu/softmax_reduce_kernels.inc"

#include "backends/cpu/conv_isa.hpp"

namespace galley::backends::cpu::softmax_kernels {

const Kernels& best() { return cpu_has_avx2_fma() ? avx2::kernels() : scalar::kernels(); }

}  // namespace galley::backends::cpu::softmax_kernels
