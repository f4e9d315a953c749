// The AVX2 + FMA build of the softmax and reduce loops (this file is compiled with -mavx2 -mfma);
// entered only through softmax_kernels::best() after cpu_has_avx2_fma().
#define GALLEY_SOFTMAX_KERNELS_NS avx2
#include "backends/cpu/softmax_reduce_kernels.inc"
