// cpu.activ.blocked: an activation as one pass over memory. The tensor is cut into blocks of
// kBlock elements that the pool's threads take in contiguous runs; f16/bf16 blocks are widened
// to float on the stack (F16C where the CPU has it), computed and narrowed back, so the inner loop
// is always a plain float loop over activation_math's functor, which the compiler vectorises for
// the piecewise-linear activations. Reading a block before writing it makes in-place calls safe.
#include <algorithm>
#include <cstdint>

#include "backends/cpu/activ_solvers.hpp"
#include "backends/cpu/conv_convert.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "dnn/activation_dispatch.hpp"
#include "galley/core/dtype.hpp"

namespace galley::backends::cpu {
namespace {

using dnn::ActivArgs;
using dnn::ActivProblem;
using dnn::Applicability;

// A block's three float buffers (24 KiB) stay in L1/L2 between widening, computing and narrowing.
constexpr std::int64_t kBlock = 2048;
// Below this many elements a pool round trip costs more than the pass itself.
constexpr std::int64_t kParallelElements = 1 << 15;

void widen(DType dtype, const void* src, std::int64_t offset, float* dst, std::int64_t count, bool f16c) {
  const auto* in = static_cast<const std::uint16_t*>(src) + offset;
  const auto n = static_cast<std::size_t>(count);
  if (dtype == DType::f16) {
    if (f16c) {
      avx2::half_to_float(in, dst, n);
    } else {
      for (std::size_t i = 0; i < n; ++i) dst[i] = half_to_float(in[i]);
    }
  } else {
    if (f16c) {
      avx2::bf16_to_float(in, dst, n);
    } else {
      for (std::size_t i = 0; i < n; ++i) dst[i] = bfloat16_to_float(in[i]);
    }
  }
}

void narrow(DType dtype, const float* src, void* dst, std::int64_t offset, std::int64_t count, bool f16c) {
  auto* out = static_cast<std::uint16_t*>(dst) + offset;
  const auto n = static_cast<std::size_t>(count);
  if (dtype == DType::f16) {
    if (f16c) {
      avx2::float_to_half(src, out, n);
    } else {
      for (std::size_t i = 0; i < n; ++i) out[i] = float_to_half(src[i]);
    }
  } else {
    if (f16c) {
      avx2::float_to_bf16(src, out, n);
    } else {
      for (std::size_t i = 0; i < n; ++i) out[i] = float_to_bfloat16(src[i]);
    }
  }
}

template <class F>
void forward_span(const F f, const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = f.forward(x[i]);
}

template <class F>
void backward_span(const F f, const float* dy, const float* v, float* dx, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dx[i] = f.backward(dy[i], v[i]);
}

// Elements [begin, end) of one call, block by block.
template <class F>
void run_range(const F f, const ActivProblem& p, const ActivArgs& a, std::int64_t begin, std::int64_t end, bool f16c) {
  const bool forward = p.direction == dnn::ActivDirection::forward;
  const void* in0 = forward ? a.x : a.dy;
  const void* in1 = forward ? nullptr : (p.reads_dst() ? static_cast<const void*>(a.y) : a.x);
  void* out = forward ? a.y : a.dx;
  if (p.dtype == DType::f32) {
    const auto* i0 = static_cast<const float*>(in0);
    const auto* i1 = static_cast<const float*>(in1);
    auto* o = static_cast<float*>(out);
    if (forward) {
      forward_span(f, i0 + begin, o + begin, end - begin);
    } else {
      backward_span(f, i0 + begin, i1 + begin, o + begin, end - begin);
    }
    return;
  }
  alignas(64) float b0[kBlock];
  alignas(64) float b1[kBlock];
  alignas(64) float bo[kBlock];
  for (std::int64_t s = begin; s < end; s += kBlock) {
    const std::int64_t n = std::min(kBlock, end - s);
    widen(p.dtype, in0, s, b0, n, f16c);
    if (forward) {
      forward_span(f, b0, bo, n);
    } else {
      widen(p.dtype, in1, s, b1, n, f16c);
      backward_span(f, b0, b1, bo, n);
    }
    narrow(p.dtype, bo, out, s, n, f16c);
  }
}

void compute(const ActivProblem& p, const ActivArgs& a) {
  const std::int64_t count = p.elements();
  const bool f16c = cpu_has_f16c();
  dnn::with_activation<float>(p.activation, p.alpha, p.beta, [&](auto f) {
    if (count < kParallelElements) {
      run_range(f, p, a, 0, count, f16c);
      return;
    }
    const std::int64_t blocks = (count + kBlock - 1) / kBlock;
    parallel_for(0, blocks, [&](std::int64_t lo, std::int64_t hi) {
      run_range(f, p, a, lo * kBlock, std::min(count, hi * kBlock), f16c);
    });
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
    return "blocks of " + std::to_string(kBlock) + " elements over " + std::to_string(pool_size()) + " threads";
  }
};

}  // namespace

std::unique_ptr<dnn::ActivSolver> make_activ_blocked() { return std::make_unique<ActivBlocked>(); }

}  // namespace galley::backends::cpu
