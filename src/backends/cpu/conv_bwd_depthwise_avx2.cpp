// The depthwise backward loops of conv_bwd_depthwise_kernels.hpp with AVX2 code generation
// (this file's name gives it the flags); entered only after cpu_has_avx2_fma().
#include "backends/cpu/conv_bwd_depthwise_kernels.hpp"
#include "backends/cpu/conv_bwd_depthwise_row_ops.hpp"

namespace galley::backends::cpu::bwd {

DepthwiseKernels depthwise_kernels_avx2() { return this_isa_kernels(); }

}  // namespace galley::backends::cpu::bwd
