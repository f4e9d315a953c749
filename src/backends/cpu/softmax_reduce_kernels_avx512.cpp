// The AVX-512 build of the softmax and reduce loops (this file is compiled with AVX-512 F/BW/VL/DQ);
// entered only through softmax_kernels::best() after cpu_has_avx512(). GCC's generic tuning prefers
// 256-bit vectors even where AVX-512 is enabled; the column loops are bound by exp, so they ask
// for full-width ones (one 16-lane array per register).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif

#define GALLEY_SOFTMAX_KERNELS_NS avx512
#include "backends/cpu/softmax_reduce_kernels.inc"
