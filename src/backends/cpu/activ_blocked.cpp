// cpu.activ.blocked: an activation as one pass over memory, threaded over blocks of elements; the
// loops are activ_kernels.hpp's, run from activ_blocked_avx512.cpp where the CPU has AVX-512, from
// activ_blocked_avx2.cpp where it has AVX2 and FMA, else from here for baseline x86-64.
//
// GCC honours IEEE trapping by default, so it will not turn `c ? a : b` into a vector select when
// it has sunk the computation of a or b into the branch (it would then be speculative), and the
// loops stay scalar. Nothing here reads the floating-point exception flags, so this file (and the
// activation_math functors it instantiates) may assume that arithmetic never traps; that changes
// no result, NaN and inf included. Clang does not model traps by default.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <algorithm>
#include <cstdint>
#include <string>

#include "backends/cpu/activ_kernels.hpp"
#include "backends/cpu/activ_solvers.hpp"
#include "backends/cpu/activ_vector_math.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu {
namespace {

using dnn::ActivArgs;
using dnn::ActivProblem;
using dnn::Applicability;

struct BaselineIsa {};

// Below this many elements a pool round trip costs more than the pass itself.
constexpr std::int64_t kParallelElements = 1 << 15;

void compute(const ActivProblem& p, const ActivArgs& a) {
  const std::int64_t count = p.elements();
  const CpuIsa isa = cpu_isa();
  const bool f16c = cpu_has_f16c();
  const auto range = [&](std::int64_t begin, std::int64_t end) {
    if (isa == CpuIsa::avx512) {
      activ_range_avx512(p, a, begin, end);
    } else if (isa == CpuIsa::avx2) {
      activ_range_avx2(p, a, begin, end);
    } else {
      ActivKernels<VectorMath<BaselineIsa>>::range(p, a, begin, end, f16c);
    }
  };
  if (count < kParallelElements) {
    range(0, count);
    return;
  }
  const std::int64_t blocks = (count + kActivBlock - 1) / kActivBlock;
  parallel_for(0, blocks, [&](std::int64_t lo, std::int64_t hi) {
    range(lo * kActivBlock, std::min(count, hi * kActivBlock));
  });
}

class ActivBlocked final : public dnn::ActivSolver {
 public:
  std::string_view name() const override { return "cpu.activ.blocked"; }

  Applicability check(const ActivProblem& problem, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    (void)problem;
    return Applicability::yes();
  }

  void run(runtime::Stream& stream, const ActivProblem& problem, const ActivArgs& args) const override {
    stream.launch(name(), [&] { stream.host_task([problem, args] { compute(problem, args); }); });
  }

  std::string detail(const ActivProblem&, const runtime::Device&) const override {
    return std::string(to_string(cpu_isa())) + ", blocks of " + std::to_string(kActivBlock) +
           " elements over " + std::to_string(pool_size()) + " threads";
  }
};

}  // namespace

std::unique_ptr<dnn::ActivSolver> make_activ_blocked() { return std::make_unique<ActivBlocked>(); }

}  // namespace galley::backends::cpu
