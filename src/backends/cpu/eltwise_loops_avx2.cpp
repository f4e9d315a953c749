// The AVX2 + FMA build of the eltwise loops (this file is compiled with -mavx2 -mfma); entered only
// through eltwise_loops() after cpu_has_avx2_fma().
#define GALLEY_ELTWISE_LOOPS_NS eltwise_avx2
#include "backends/cpu/eltwise_loops.inc"
