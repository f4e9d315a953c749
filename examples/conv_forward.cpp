// One convolution on the default device (the first GPU, else the CPU), tuned once and remembered.
#include <cstdio>
#include <vector>

#include "galley/galley.hpp"

int main() {
  namespace dnn = galley::dnn;
  galley::runtime::Stream stream(galley::runtime::default_device());

  // 2 images of 3x32x32, 8 filters of 3x3, padding 1: the output is 2x8x32x32.
  const dnn::ConvProblem conv{.n = 2, .c = 3, .h = 32, .w = 32, .k = 8, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1};
  std::vector<float> x(conv.x_desc().elements(), 1.0f), w(conv.w_desc().elements(), 0.5f);

  galley::Tensor tx = galley::Tensor::empty(stream, conv.x_desc());
  galley::Tensor tw = galley::Tensor::empty(stream, conv.w_desc());
  galley::Tensor ty = galley::Tensor::empty(stream, conv.y_desc());
  tx.copy_from_host(stream, x.data(), x.size() * sizeof(float));
  tw.copy_from_host(stream, w.data(), w.size() * sizeof(float));

  const dnn::ConvSolver& solver = dnn::convolution_forward(stream, conv, tx, tw, ty);
  const std::vector<float> y = ty.to_host<float>(stream);

  // An interior output sums 3 channels x 9 taps of 1.0 * 0.5.
  const float centre = y[static_cast<std::size_t>(16 * 32 + 16)];
  std::printf("%s ran on %s: y[0,0,16,16] = %g (want 13.5)\n", std::string(solver.name()).c_str(),
              stream.device().name().c_str(), centre);
  return centre == 13.5f ? 0 : 1;
}
