// The AVX-512 build of the eltwise loops (this file is compiled with AVX-512 F/BW/VL/DQ); entered
// only through eltwise_loops() after cpu_has_avx512(). GCC's generic tuning prefers 256-bit
// vectors even where AVX-512 is enabled; these loops ask for full-width ones.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif

#define GALLEY_ELTWISE_LOOPS_NS eltwise_avx512
#include "backends/cpu/eltwise_loops.inc"
