// From the run-time Activation to the compile-time functor of activation_math.hpp: solvers write
// their loop once as a generic callable and get one instantiation per activation, so the inner
// loop never branches on the activation.
#pragma once

#include <string>

#include "dnn/activation_math.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/activation.hpp"

namespace galley::dnn {

/// Calls fn(functor) with the activation_math functor of `activation` in precision T with the
/// elementary functions of M, holding alpha and beta rounded to T, and returns what fn returns.
template <class T, class M = activ_math::LibmMath, class Fn>
decltype(auto) with_activation(Activation activation, double alpha, double beta, Fn&& fn) {
  const T a = static_cast<T>(alpha), b = static_cast<T>(beta);
  switch (activation) {
    case Activation::relu: return fn(activ_math::Relu<T, M>{a, b});
    case Activation::leaky_relu: return fn(activ_math::LeakyRelu<T, M>{a, b});
    case Activation::clip: return fn(activ_math::Clip<T, M>{a, b});
    case Activation::elu: return fn(activ_math::Elu<T, M>{a, b});
    case Activation::sigmoid: return fn(activ_math::Sigmoid<T, M>{a, b});
    case Activation::tanh: return fn(activ_math::Tanh<T, M>{a, b});
    case Activation::gelu_erf: return fn(activ_math::GeluErf<T, M>{a, b});
    case Activation::gelu_tanh: return fn(activ_math::GeluTanh<T, M>{a, b});
    case Activation::silu: return fn(activ_math::Silu<T, M>{a, b});
    case Activation::hardswish: return fn(activ_math::Hardswish<T, M>{a, b});
    case Activation::hardsigmoid: return fn(activ_math::Hardsigmoid<T, M>{a, b});
  }
  throw Error(Status::invalid_argument,
              "unknown activation " + std::to_string(static_cast<int>(activation)));
}

}  // namespace galley::dnn
