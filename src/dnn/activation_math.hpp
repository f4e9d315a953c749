// The scalar definitions of every activation and its derivative, shared by the reference (double),
// the cpu solvers (float), the single-source GPU kernels and the fused convolution epilogues: one
// definition, so no two implementations can drift apart. Self-contained on purpose (no Galley
// header): nvcc and hipcc compile it into device code, where the functions are __host__ __device__.
//
// Each functor, of a precision T and a policy M of elementary functions (LibmMath by default),
// holds the activation's parameters (alpha, beta; unused ones are ignored) and has
//   T forward(T x)            y = f(x)
//   T backward(T dy, T v)     dx = dy * f'(x), where v is x, or y when kBackwardFromDst
// with PyTorch's formulas (aten/src/ATen/native/Activation*.cpp and cuda/Activation*.cu) written
// the same way, so rounding, NaN handling and the derivative at each kink agree with it:
// relu'(0) = 0, leaky_relu'(0) = alpha, clip'(bounds) = 0, elu'(0) = alpha, hardswish'(-3) = -0.5,
// hardswish'(3) = 1.5, hardsigmoid'(+-3) = 0. Comparisons are written so that a NaN input takes
// the branch PyTorch's does: NaN propagates through every forward; in backward, NaN comes out
// wherever PyTorch's formula multiplies by it. Both sides of a select are computed first and the
// conditions joined with & and |, so that a cpu loop over a functor has no control flow left and
// vectorises (the compiler may not evaluate an arm speculatively under IEEE trapping rules).
#pragma once

#include <math.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define GALLEY_HOST_DEVICE __host__ __device__
#else
#define GALLEY_HOST_DEVICE
#endif

namespace galley::dnn::activ_math {

/// The elementary functions the functors call, as a policy, so a backend may bring faster ones
/// (the cpu solver brings vectorisable float versions) while the formulas stay here. This one is
/// the C library's (CUDA's and HIP's in device code), accurate to an ulp or two.
struct LibmMath {
  GALLEY_HOST_DEVICE static float exp(float x) { return expf(x); }
  GALLEY_HOST_DEVICE static double exp(double x) { return ::exp(x); }
  GALLEY_HOST_DEVICE static float expm1(float x) { return expm1f(x); }
  GALLEY_HOST_DEVICE static double expm1(double x) { return ::expm1(x); }
  GALLEY_HOST_DEVICE static float tanh(float x) { return tanhf(x); }
  GALLEY_HOST_DEVICE static double tanh(double x) { return ::tanh(x); }
  GALLEY_HOST_DEVICE static float erf(float x) { return erff(x); }
  GALLEY_HOST_DEVICE static double erf(double x) { return ::erf(x); }
};

// Constants to double precision, rounded once to T.
inline constexpr double kSqrtHalf = 0.70710678118654752440;       // 1/sqrt(2)
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;     // 1/sqrt(2*pi)
inline constexpr double kSqrt2OverPi = 0.79788456080286535588;    // sqrt(2/pi)
inline constexpr double kGeluTanhKappa = 0.044715;

/// max(x, 0); NaN stays NaN (PyTorch's clamp_min). Backward from y: y <= 0 gives 0.
template <class T, class M = LibmMath>
struct Relu {
  static constexpr bool kBackwardFromDst = true;
  T alpha, beta;
  GALLEY_HOST_DEVICE T forward(T x) const { return x < T(0) ? T(0) : x; }
  GALLEY_HOST_DEVICE T backward(T dy, T y) const { return y <= T(0) ? T(0) : dy; }
};

/// x > 0 ? x : alpha * x.
template <class T, class M = LibmMath>
struct LeakyRelu {
  static constexpr bool kBackwardFromDst = false;
  T alpha, beta;
  GALLEY_HOST_DEVICE T forward(T x) const {
    const T negative = x * alpha;
    return x > T(0) ? x : negative;
  }
  GALLEY_HOST_DEVICE T backward(T dy, T x) const {
    const T negative = dy * alpha;
    return x > T(0) ? dy : negative;
  }
};

/// min(max(x, alpha), beta) (hardtanh; relu6 with 0 and 6); NaN stays NaN as in PyTorch's clamp.
template <class T, class M = LibmMath>
struct Clip {
  static constexpr bool kBackwardFromDst = false;
  T alpha, beta;
  GALLEY_HOST_DEVICE T forward(T x) const { return x < alpha ? alpha : (x > beta ? beta : x); }
  GALLEY_HOST_DEVICE T backward(T dy, T x) const { return ((x <= alpha) | (x >= beta)) ? T(0) : dy; }
};

/// x > 0 ? x : alpha * (exp(x) - 1), with expm1 for accuracy near 0 (PyTorch's scale and
/// input_scale are 1).
template <class T, class M = LibmMath>
struct Elu {
  static constexpr bool kBackwardFromDst = false;
  T alpha, beta;
  GALLEY_HOST_DEVICE T forward(T x) const {
    const T negative = M::expm1(x) * alpha;
    return x <= T(0) ? negative : x;
  }
  GALLEY_HOST_DEVICE T backward(T dy, T x) const {
    const T negative = dy * alpha * M::exp(x);
    return x <= T(0) ? negative : dy;
  }
};

/// 1 / (1 + exp(-x)): exp overflows to inf for x < -88 (float), giving exactly 0, never NaN.
template <class T, class M = LibmMath>
struct Sigmoid {
  static constexpr bool kBackwardFromDst = true;
  T alpha, beta;
  GALLEY_HOST_DEVICE T forward(T x) const { return T(1) / (T(1) + M::exp(-x)); }
  GALLEY_HOST_DEVICE T backward(T dy, T y) const { return dy * (T(1) - y) * y; }
};

template <class T, class M = LibmMath>
struct Tanh {
  static constexpr bool kBackwardFromDst = true;
  T alpha, beta;
  GALLEY_HOST_DEVICE T forward(T x) const { return M::tanh(x); }
  GALLEY_HOST_DEVICE T backward(T dy, T y) const { return dy * (T(1) - y * y); }
};

/// x * Phi(x) with the normal CDF through erf.
template <class T, class M = LibmMath>
struct GeluErf {
  static constexpr bool kBackwardFromDst = false;
  T alpha, beta;
  GALLEY_HOST_DEVICE T forward(T x) const { return x * T(0.5) * (T(1) + M::erf(x * T(kSqrtHalf))); }
  GALLEY_HOST_DEVICE T backward(T dy, T x) const {
    const T cdf = T(0.5) * (T(1) + M::erf(x * T(kSqrtHalf)));
    const T pdf = M::exp(T(-0.5) * x * x) * T(kInvSqrt2Pi);
    return dy * (cdf + x * pdf);
  }
};

/// The tanh approximation of gelu.
template <class T, class M = LibmMath>
struct GeluTanh {
  static constexpr bool kBackwardFromDst = false;
  T alpha, beta;
  GALLEY_HOST_DEVICE T forward(T x) const {
    const T inner = T(kSqrt2OverPi) * (x + T(kGeluTanhKappa) * x * x * x);
    return T(0.5) * x * (T(1) + M::tanh(inner));
  }
  GALLEY_HOST_DEVICE T backward(T dy, T x) const {
    const T x_sq = x * x;
    const T inner = T(kSqrt2OverPi) * (x + T(kGeluTanhKappa) * x_sq * x);
    const T t = M::tanh(inner);
    const T left = T(0.5) * x;
    const T left_derivative = T(0.5) * (T(1) + t);
    const T tanh_derivative = T(1) - t * t;
    const T inner_derivative = T(kSqrt2OverPi) * (T(1) + T(3) * T(kGeluTanhKappa) * x_sq);
    // Where tanh has saturated its derivative is exactly 0, and so is this term: PyTorch's
    // 0 * inf (x_sq overflows for |x| > 1.8e19 in float) would give NaN for a finite input.
    const T product = left * tanh_derivative * inner_derivative;
    const T right_derivative = tanh_derivative == T(0) ? T(0) : product;
    return dy * (left_derivative + right_derivative);
  }
};

/// x * sigmoid(x).
template <class T, class M = LibmMath>
struct Silu {
  static constexpr bool kBackwardFromDst = false;
  T alpha, beta;
  GALLEY_HOST_DEVICE T forward(T x) const { return x / (T(1) + M::exp(-x)); }
  GALLEY_HOST_DEVICE T backward(T dy, T x) const {
    const T s = T(1) / (T(1) + M::exp(-x));
    return dy * s * (T(1) + x * (T(1) - s));
  }
};

/// relu6(x + 3) / 6 with NaN propagating through both clamps.
template <class T>
GALLEY_HOST_DEVICE inline T relu6_shifted(T x) {
  const T v = x + T(3);
  const T lo = v < T(0) ? T(0) : v;
  return lo > T(6) ? T(6) : lo;
}

/// x * relu6(x + 3) / 6.
template <class T, class M = LibmMath>
struct Hardswish {
  static constexpr bool kBackwardFromDst = false;
  T alpha, beta;
  GALLEY_HOST_DEVICE T forward(T x) const { return x * relu6_shifted(x) / T(6); }
  GALLEY_HOST_DEVICE T backward(T dy, T x) const {
    const T middle = dy * (x / T(3) + T(0.5));
    return x < T(-3) ? T(0) : (x <= T(3) ? middle : dy);
  }
};

/// relu6(x + 3) / 6.
template <class T, class M = LibmMath>
struct Hardsigmoid {
  static constexpr bool kBackwardFromDst = false;
  T alpha, beta;
  GALLEY_HOST_DEVICE T forward(T x) const { return relu6_shifted(x) / T(6); }
  GALLEY_HOST_DEVICE T backward(T dy, T x) const {
    const T middle = dy * T(1.0 / 6.0);
    return ((x > T(-3)) & (x < T(3))) ? middle : T(0);
  }
};

}  // namespace galley::dnn::activ_math
