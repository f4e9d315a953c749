// cpu.activ.blocked's loops compiled for AVX2 + FMA + F16C (8 floats per vector, fused
// polynomial steps); entered only after cpu_has_avx2_fma(). See activ_kernels.hpp.
//
// As in activ_blocked.cpp: no floating-point exception flags are read here, so arithmetic may be
// assumed not to trap, which lets GCC turn the functors' selects into vector blends.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "backends/cpu/activ_kernels.hpp"
#include "backends/cpu/activ_vector_math.hpp"

namespace galley::backends::cpu {
namespace {
struct Avx2Isa {};
}  // namespace

void activ_range_avx2(const dnn::ActivProblem& p, const dnn::ActivArgs& a, std::int64_t begin, std::int64_t end) {
  ActivKernels<VectorMath<Avx2Isa>>::range(p, a, begin, end, true);
}

}  // namespace galley::backends::cpu
