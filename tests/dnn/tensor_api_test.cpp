// galley::Tensor: wrapping with sizes, the checks every entry point makes on tensors (missing,
// wrong dims or dtype, short storage, misalignment, another device), host copies with CUDA's
// pageable semantics, typed host views and dtype/layout conversion.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "conv_grid.hpp"
#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/galley.hpp"

namespace galley::dnn {
namespace {

template <class Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string_view> fragments) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    for (auto f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
}

const runtime::Device& cpu() {
  static const runtime::Device d = runtime::device("cpu");
  return d;
}

TEST(TensorApi, WrapRefusesShortNullAndMisalignedMemory) {
  const TensorDesc d = TensorDesc::packed(DType::f32, Layout::nchw, 1, 2, 3, 5);
  std::vector<float> mem(31);
  EXPECT_NO_THROW(Tensor::wrap(cpu(), d, mem.data(), 120));
  expect_error([&] { Tensor::wrap(cpu(), d, mem.data(), 119); }, {"119 bytes", "120 bytes"});
  expect_error([&] { Tensor::wrap(cpu(), d, nullptr, 120); }, {"null"});
  expect_error([&] { Tensor::wrap(cpu(), d, reinterpret_cast<std::byte*>(mem.data()) + 2, 120); }, {"aligned"});
}

TEST(TensorApi, ConvEntryPointsNameTheBadTensor) {
  runtime::Stream stream(cpu());
  const ConvProblem p = test::geometry(2, 3, 7, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  Tensor x = Tensor::empty(stream, p.x_desc()), w = Tensor::empty(stream, p.w_desc());
  Tensor y = Tensor::empty(stream, p.y_desc());
  // A y one row short: its own descriptor is smaller, the problem's is not.
  const TensorDesc short_y = TensorDesc::packed(DType::f32, Layout::nchw, 2, 4, 6, 5);
  std::vector<float> small(static_cast<std::size_t>(short_y.elements()));
  Tensor y_short = Tensor::wrap(cpu(), short_y, small.data(), small.size() * sizeof(float));
  expect_error([&] { convolution_forward(stream, p, x, w, y_short); }, {"y (output)", "f32[2,4,7,5]"});
  Tensor empty;
  expect_error([&] { convolution_forward(stream, p, empty, w, y); }, {"x (input)", "missing"});
  // Same dims, another dtype.
  ConvProblem half = p;
  half.dtype = DType::f16;
  Tensor w16 = Tensor::empty(stream, half.w_desc());
  expect_error([&] { convolution_forward(stream, p, x, w16, y); }, {"w (weights)", "f16"});
  // NHWC strides where NCHW is expected.
  ConvProblem nhwc = p;
  nhwc.layout = Layout::nhwc;
  Tensor x_nhwc = Tensor::empty(stream, nhwc.x_desc());
  expect_error([&] { convolution_forward(stream, p, x_nhwc, w, y); }, {"x (input)", "strides"});
  // The backward entry points check their own roles.
  expect_error([&] { convolution_backward_data(stream, p, x, w, y); }, {"dy (output gradient)"});
  expect_error([&] { convolution_backward_weights(stream, p, x, x, w); }, {"dy (output gradient)"});
  stream.synchronize();
}

TEST(TensorApi, ForwardThroughTensorsMatchesTheReference) {
  runtime::Stream stream(cpu());
  const ConvProblem p = test::geometry(1, 17, 11, 13, 23, 3, 3, 1, 1, 2, 1, 1, 1, 1);
  const auto hx = random_tensor(p.dtype, p.x_desc().elements(), 3);
  const auto hw = random_tensor(p.dtype, p.w_desc().elements(), 4);
  std::vector<std::byte> want(p.y_desc().bytes());
  reference_conv_forward(p, hx.data(), hw.data(), want.data());
  Tensor x = Tensor::empty(stream, p.x_desc()), w = Tensor::empty(stream, p.w_desc());
  Tensor y = Tensor::empty(stream, p.y_desc());
  x.copy_from_host(stream, hx.data(), hx.size());
  w.copy_from_host(stream, hw.data(), hw.size());
  convolution_forward(stream, p, x, w, y);
  const std::vector<float> got = y.to_host<float>(stream);
  const Comparison c = compare_outputs(p.dtype, got.data(), want.data(), p.y_desc().elements(), conv_tolerance(p.dtype));
  EXPECT_TRUE(c.passed) << c.summary;
}

TEST(TensorApi, HostSourceMayBeReusedAtOnce) {
  runtime::Stream stream(cpu());
  const TensorDesc d = TensorDesc::packed(DType::f32, Layout::nchw, 1, 1, 64, 1024);
  Tensor t = Tensor::empty(stream, d);
  std::vector<float> src(static_cast<std::size_t>(d.elements()), 1.5f);
  t.copy_from_host(stream, src.data(), d.bytes());
  std::fill(src.begin(), src.end(), -7.0f);  // as CUDA allows after a pageable copy returns
  for (float v : t.to_host<float>(stream)) ASSERT_EQ(v, 1.5f);
  expect_error([&] { t.copy_from_host(stream, src.data(), d.bytes() - 4); }, {"bytes given"});
  expect_error([&] { (void)t.to_host<std::uint16_t>(stream); }, {"2 bytes", "f32"});
}

TEST(TensorApi, ConvertChangesDtypeAndLayout) {
  runtime::Stream stream(cpu());
  const std::int64_t n = 2, c = 5, h = 3, w = 7;
  const TensorDesc f32_nchw = TensorDesc::packed(DType::f32, Layout::nchw, n, c, h, w);
  const TensorDesc bf16_nhwc = TensorDesc::packed(DType::bf16, Layout::nhwc, n, c, h, w);
  std::vector<float> values(static_cast<std::size_t>(f32_nchw.elements()));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.25f - 3.0f;
  Tensor a = Tensor::empty(stream, f32_nchw), b = Tensor::empty(stream, bf16_nhwc), back = Tensor::empty(stream, f32_nchw);
  a.copy_from_host(stream, values.data(), f32_nchw.bytes());
  convert(stream, a, b);
  convert(stream, b, back);
  const auto bits = b.to_host<std::uint16_t>(stream);
  const auto round_trip = back.to_host<float>(stream);
  for (std::int64_t in = 0; in < n; ++in)
    for (std::int64_t ic = 0; ic < c; ++ic)
      for (std::int64_t ih = 0; ih < h; ++ih)
        for (std::int64_t iw = 0; iw < w; ++iw) {
          const std::size_t nchw = static_cast<std::size_t>(((in * c + ic) * h + ih) * w + iw);
          const std::size_t nhwc = static_cast<std::size_t>(((in * h + ih) * w + iw) * c + ic);
          const float want = bfloat16_to_float(float_to_bfloat16(values[nchw]));
          ASSERT_EQ(bfloat16_to_float(bits[nhwc]), want) << nchw;
          ASSERT_EQ(round_trip[nchw], want) << nchw;
        }
  Tensor other = Tensor::empty(stream, TensorDesc::packed(DType::f32, Layout::nchw, n, c, h, w + 1));
  expect_error([&] { convert(stream, a, other); }, {"differ in dims"});
}

}  // namespace
}  // namespace galley::dnn
