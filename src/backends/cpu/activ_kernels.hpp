// The loops of cpu.activ.blocked, as a template over the elementary-function policy, included by
// activ_blocked.cpp (baseline x86-64), activ_blocked_avx2.cpp (AVX2 + FMA + F16C) and
// activ_blocked_avx512.cpp (AVX-512), each with its own internal Math type (see activ_vector_math.hpp), so
// each file's copy is its own.
//
// A call's elements are cut into blocks of kActivBlock; f16/bf16 blocks are widened to float on
// the stack, computed and narrowed back, so the inner loop is always a plain float loop: a file's
// hand-written one where its Spans policy has one (the AVX-512 file's, activ_spans_avx512.hpp),
// else one over an activation_math functor, which the compiler vectorises. Reading a block before writing it
// makes in-place calls (y == x, dx == dy) safe.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/cpu/conv_convert.hpp"
#include "dnn/activation_dispatch.hpp"
#include "galley/core/dtype.hpp"
#include "galley/dnn/activation.hpp"

namespace galley::backends::cpu {

/// Elements per block: three float buffers of it (24 KiB) stay in L1/L2 between widening,
/// computing and narrowing.
inline constexpr std::int64_t kActivBlock = 2048;

/// Elements [begin, end) of one activation call, on the calling thread.
void activ_range_avx2(const dnn::ActivProblem& p, const dnn::ActivArgs& a, std::int64_t begin,
                      std::int64_t end);
void activ_range_avx512(const dnn::ActivProblem& p, const dnn::ActivArgs& a, std::int64_t begin,
                        std::int64_t end);

/// The span policy of a file without hand-written loops: every span goes to the functor loop.
struct FunctorSpansOnly {
  static bool span(dnn::Activation, dnn::ActivDirection, const float*, const float*, float*, std::int64_t) {
    return false;
  }
};

/// `Spans::span` may take an f32 span itself (returning true) before the functor loop would.
template <class Math, class Spans = FunctorSpansOnly>
struct ActivKernels {
  template <class F>
  static void forward_span(const F f, const float* x, float* y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = f.forward(x[i]);
  }

  template <class F>
  static void backward_span(const F f, const float* dy, const float* v, float* dx, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) dx[i] = f.backward(dy[i], v[i]);
  }

  static void widen(DType dtype, const void* src, std::int64_t offset, float* dst, std::int64_t count,
                    bool f16c) {
    const auto* in = static_cast<const std::uint16_t*>(src) + offset;
    const auto n = static_cast<std::size_t>(count);
    if (f16c) {
      dtype == DType::f16 ? avx2::half_to_float(in, dst, n) : avx2::bf16_to_float(in, dst, n);
    } else if (dtype == DType::f16) {
      for (std::size_t i = 0; i < n; ++i) dst[i] = half_to_float(in[i]);
    } else {
      for (std::size_t i = 0; i < n; ++i) dst[i] = bfloat16_to_float(in[i]);
    }
  }

  static void narrow(DType dtype, const float* src, void* dst, std::int64_t offset, std::int64_t count,
                     bool f16c) {
    auto* out = static_cast<std::uint16_t*>(dst) + offset;
    const auto n = static_cast<std::size_t>(count);
    if (f16c) {
      dtype == DType::f16 ? avx2::float_to_half(src, out, n) : avx2::float_to_bf16(src, out, n);
    } else if (dtype == DType::f16) {
      for (std::size_t i = 0; i < n; ++i) out[i] = float_to_half(src[i]);
    } else {
      for (std::size_t i = 0; i < n; ++i) out[i] = float_to_bfloat16(src[i]);
    }
  }

  template <class F>
  static void run(const F f, const dnn::ActivProblem& p, const dnn::ActivArgs& a, std::int64_t begin,
                  std::int64_t end, bool f16c) {
    const bool forward = p.direction == dnn::ActivDirection::forward;
    const void* in0 = forward ? a.x : a.dy;
    const void* in1 = forward ? nullptr : (p.reads_dst() ? static_cast<const void*>(a.y) : a.x);
    void* out = forward ? a.y : a.dx;
    if (p.dtype == DType::f32) {
      const auto* i0 = static_cast<const float*>(in0);
      const auto* i1 = static_cast<const float*>(in1);
      auto* o = static_cast<float*>(out);
      const std::int64_t n = end - begin;
      if (Spans::span(p.activation, p.direction, i0 + begin, i1 != nullptr ? i1 + begin : nullptr, o + begin,
                      n)) {
        return;
      }
      if (forward) {
        forward_span(f, i0 + begin, o + begin, n);
      } else {
        backward_span(f, i0 + begin, i1 + begin, o + begin, n);
      }
      return;
    }
    alignas(64) float b0[kActivBlock];
    alignas(64) float b1[kActivBlock];
    alignas(64) float bo[kActivBlock];
    for (std::int64_t s = begin; s < end; s += kActivBlock) {
      const std::int64_t n = std::min(kActivBlock, end - s);
      widen(p.dtype, in0, s, b0, n, f16c);
      if (!forward) widen(p.dtype, in1, s, b1, n, f16c);
      if (!Spans::span(p.activation, p.direction, b0, b1, bo, n)) {
        if (forward) {
          forward_span(f, b0, bo, n);
        } else {
          backward_span(f, b0, b1, bo, n);
        }
      }
      narrow(p.dtype, bo, out, s, n, f16c);
    }
  }

  /// Elements [begin, end) with the activation's functor over Math.
  static void range(const dnn::ActivProblem& p, const dnn::ActivArgs& a, std::int64_t begin, std::int64_t end,
                    bool f16c) {
    dnn::with_activation<float, Math>(p.activation, p.alpha, p.beta,
                                      [&](auto f) { run(f, p, a, begin, end, f16c); });
  }
};

}  // namespace galley::backends::cpu
