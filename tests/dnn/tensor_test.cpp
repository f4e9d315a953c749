// TensorDesc and the host tensor-data helpers (conversion, seeded random data, the output judge).
#include "galley/dnn/tensor.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/conv_problem.hpp"

namespace galley::dnn {
namespace {

TEST(TensorDesc, PackedStrides) {
  const TensorDesc nchw = TensorDesc::packed(DType::f32, Layout::nchw, 2, 3, 31, 29);
  EXPECT_EQ(nchw.strides, (dnn::Dims{2697, 899, 29, 1, 1, 1}));
  EXPECT_EQ(nchw.to_string(), "f32[2,3,31,29] strides [2697,899,29,1]");
  const TensorDesc nhwc = TensorDesc::packed(DType::f16, Layout::nhwc, 2, 3, 31, 29);
  EXPECT_EQ(nhwc.strides, (dnn::Dims{2697, 1, 87, 3, 1, 1}));
  EXPECT_EQ(nchw.elements(), 2 * 3 * 31 * 29);
  EXPECT_EQ(nchw.bytes(), 4u * 2 * 3 * 31 * 29);
  EXPECT_EQ(nhwc.bytes(), 2u * 2 * 3 * 31 * 29);
  EXPECT_TRUE(nchw.is_packed(Layout::nchw));
  EXPECT_FALSE(nchw.is_packed(Layout::nhwc));
  EXPECT_TRUE(nhwc.is_packed(Layout::nhwc));
  // With C == 1 both orders coincide.
  EXPECT_TRUE(TensorDesc::packed(DType::f32, Layout::nchw, 2, 1, 4, 5).is_packed(Layout::nhwc));
}

TEST(TensorDesc, GeneralStridesSpan) {
  TensorDesc padded = TensorDesc::packed(DType::f32, Layout::nchw, 2, 3, 4, 5);
  padded.strides = {3 * 4 * 8, 4 * 8, 8, 1, 1, 1};  // rows padded to 8 elements
  EXPECT_NO_THROW(padded.validate("x"));
  EXPECT_EQ(padded.elements(), 120);
  // Last element at 1*96 + 2*32 + 3*8 + 4 = 188, so 189 elements are spanned.
  EXPECT_EQ(padded.bytes(), 189u * 4);
  EXPECT_FALSE(padded.is_packed(Layout::nchw));
}

TEST(TensorDesc, ValidationNamesTensorAndField) {
  TensorDesc d = TensorDesc::packed(DType::f32, Layout::nchw, 2, 3, 4, 5);
  d.dims[2] = 0;
  try {
    d.validate("weights");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("weights"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dimension H = 0"), std::string::npos) << e.what();
  }
  d = TensorDesc::packed(DType::f32, Layout::nchw, 2, 3, 4, 5);
  d.strides[1] = -1;
  EXPECT_THROW(d.validate("x"), Error);
  d = TensorDesc::packed(DType::f32, Layout::nchw, 1ll << 40, 1ll << 40, 1, 1);
  EXPECT_THROW(d.validate("x"), Error);
  EXPECT_THROW(d.elements(), Error);
  d = TensorDesc::packed(DType::f32, Layout::nchw, 2, 2, 2, 2);
  d.strides[0] = INT64_MAX / 2;
  EXPECT_THROW(d.validate("x"), Error);  // extent (2-1)*stride ok, but bytes overflow
}

TEST(TensorDesc, LayoutNames) {
  EXPECT_EQ(parse_layout("NHWC"), Layout::nhwc);
  EXPECT_EQ(parse_layout("nchw"), Layout::nchw);
  EXPECT_STREQ(to_string(Layout::nhwc), "nhwc");
  try {
    parse_layout("nchw4");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'nchw4'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("valid: nchw, nhwc"), std::string::npos);
  }
}

TEST(TensorData, RandomIsSeededAndInRange) {
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    const auto a = random_tensor(d, 1000, 7);
    const auto b = random_tensor(d, 1000, 7);
    const auto c = random_tensor(d, 1000, 8);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    std::vector<float> v(1000);
    to_float(d, a.data(), v.data(), 1000);
    double sum = 0;
    for (float f : v) {
      EXPECT_GE(f, -1.0f);
      EXPECT_LE(f, 1.0f);
      sum += f;
    }
    EXPECT_LT(std::abs(sum / 1000), 0.1);  // roughly centred
  }
  // A fixed first value pins the generator: the same bytes on every machine.
  const auto f = random_tensor(DType::f32, 1, 1);
  float first;
  std::memcpy(&first, f.data(), 4);
  const auto again = random_tensor(DType::f32, 1, 1);
  EXPECT_EQ(std::memcmp(f.data(), again.data(), 4), 0);
  EXPECT_TRUE(std::isfinite(first));
}

TEST(TensorData, FloatRoundTrip) {
  const std::vector<float> values = {0.0f, 1.0f, -2.5f, 0.333251953125f, 65504.0f};
  for (DType d : {DType::f32, DType::f16}) {
    std::vector<std::byte> storage(values.size() * size_of(d));
    from_float(d, values.data(), storage.data(), static_cast<std::int64_t>(values.size()));
    std::vector<float> back(values.size());
    to_float(d, storage.data(), back.data(), static_cast<std::int64_t>(values.size()));
    EXPECT_EQ(back, values) << to_string(d);
  }
  EXPECT_THROW(random_tensor(DType::i8, 4, 1), Error);
}

TEST(TensorData, CompareJudgesRelativeToTheOutputNorm) {
  const std::vector<float> ref = {1.0f, -4.0f, 2.0f, 0.0f};
  std::vector<float> got = ref;
  Comparison c = compare_outputs(DType::f32, got.data(), ref.data(), 4, 1e-5);
  EXPECT_TRUE(c.passed);
  EXPECT_EQ(c.max_rel_err, 0.0);
  got[3] = 4e-5f;  // 1e-5 of the largest magnitude (4): the boundary
  c = compare_outputs(DType::f32, got.data(), ref.data(), 4, 1e-5);
  EXPECT_NEAR(c.max_rel_err, 1e-5, 1e-9);
  got[3] = 8e-5f;
  c = compare_outputs(DType::f32, got.data(), ref.data(), 4, 1e-5);
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.worst_index, 3);
  EXPECT_NE(c.summary.find("at element 3"), std::string::npos) << c.summary;
}

TEST(TensorData, NaNNeverPasses) {
  const std::vector<float> ref = {1.0f, 2.0f, 3.0f};
  for (float poison : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> got = ref;
    got[1] = poison;
    const Comparison c = compare_outputs(DType::f32, got.data(), ref.data(), 3, 1e30);
    EXPECT_FALSE(c.passed);
    EXPECT_EQ(c.nan_count, 1);
    EXPECT_EQ(c.worst_index, 1);
    EXPECT_TRUE(std::isinf(c.max_rel_err));
  }
  // All-0xFF bytes (the poison) is NaN in f16 and bf16 too.
  const std::vector<std::uint16_t> poisoned(3, 0xffff), zeros(3, 0);
  for (DType d : {DType::f16, DType::bf16}) {
    const Comparison c = compare_outputs(d, poisoned.data(), zeros.data(), 3, 1e30);
    EXPECT_FALSE(c.passed);
    EXPECT_EQ(c.nan_count, 3);
  }
  // A NaN in the reference fails as well.
  const Comparison c = compare_outputs(DType::f16, zeros.data(), poisoned.data(), 3, 1e30);
  EXPECT_FALSE(c.passed);
}

TEST(TensorData, ZeroReferenceDemandsExactZeros) {
  const std::vector<float> ref(4, 0.0f);
  std::vector<float> got(4, 0.0f);
  EXPECT_TRUE(compare_outputs(DType::f32, got.data(), ref.data(), 4, 1e-5).passed);
  got[2] = 1e-3f;
  EXPECT_FALSE(compare_outputs(DType::f32, got.data(), ref.data(), 4, 1e-5).passed);
}

TEST(TensorData, Tolerances) {
  EXPECT_EQ(conv_tolerance(DType::f32), 1e-5);
  EXPECT_EQ(conv_tolerance(DType::f16), 1e-2);
  EXPECT_EQ(conv_tolerance(DType::bf16), 1e-2);
  EXPECT_THROW(conv_tolerance(DType::i32), Error);
}

TEST(TensorData, ProblemTolerancesWidenForLongSumsAndWinograd) {
  ConvProblem p;
  p.dtype = DType::f32;
  p.n = 2, p.c = 64, p.h = p.w = 28, p.k = 64, p.y = p.x = 1;
  EXPECT_EQ(conv_tolerance(p), 1e-5);  // 64 products a sum: a direct sum's rounding
  p.c = 4096;
  EXPECT_DOUBLE_EQ(conv_tolerance(p), 2e-5);  // sqrt(4096 / 1024)
  p.c = 64, p.y = p.x = 3, p.pad_h = p.pad_w = 1;
  EXPECT_DOUBLE_EQ(conv_tolerance(p), 2e-5);  // 3x3 stride 1: Winograd's transforms
  p.stride_h = p.stride_w = 2;
  EXPECT_EQ(conv_tolerance(p), 1e-5);
  p.dtype = DType::f16;
  p.stride_h = p.stride_w = 1;
  EXPECT_EQ(conv_tolerance(p), 1e-2);  // half precision's own rounding dominates
}

}  // namespace
}  // namespace galley::dnn
