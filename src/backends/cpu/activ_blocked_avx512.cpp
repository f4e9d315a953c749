// cpu.activ.blocked's loops compiled for AVX-512 (16 floats per vector, mask registers for the
// functors' selects); entered only after cpu_has_avx512(). See activ_kernels.hpp. Sigmoid, silu and
// gelu-erf take the hand-written loops of activ_spans_avx512.hpp instead of their functor loops.
//
// As in activ_blocked.cpp: no floating-point exception flags are read here, so arithmetic may be
// assumed not to trap, which lets GCC turn the functors' selects into vector blends. GCC's generic
// tuning prefers 256-bit vectors even where AVX-512 is enabled; these loops are compute-bound (exp,
// erf, a division per element), so they ask for full-width ones.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#pragma GCC target("prefer-vector-width=512")
#endif

#include "backends/cpu/activ_kernels.hpp"
#include "backends/cpu/activ_spans_avx512.hpp"
#include "backends/cpu/activ_vector_math.hpp"

namespace galley::backends::cpu {
namespace {
struct Avx512Isa {};
struct HandWrittenSpans {
  static bool span(dnn::Activation activation, dnn::ActivDirection direction, const float* in0,
                   const float* in1, float* out, std::int64_t n) {
    return avx512::activ_span(activation, direction, in0, in1, out, n);
  }
};
}  // namespace

void activ_range_avx512(const dnn::ActivProblem& p, const dnn::ActivArgs& a, std::int64_t begin,
                        std::int64_t end) {
  ActivKernels<VectorMath<Avx512Isa>, HandWrittenSpans>::range(p, a, begin, end, true);
}

}  // namespace galley::backends::cpu
