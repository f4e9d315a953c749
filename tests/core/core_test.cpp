#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "galley/core/dtype.hpp"
#include "galley/core/env.hpp"
#include "galley/core/error.hpp"
#include "galley/core/hash.hpp"
#include "galley/core/units.hpp"

namespace galley {
namespace {

TEST(Dtype, SizesNamesAndParse) {
  EXPECT_EQ(size_of(DType::f32), 4u);
  EXPECT_EQ(size_of(DType::bf16), 2u);
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i8}) EXPECT_EQ(parse_dtype(to_string(d)), d);
  try {
    parse_dtype("f64");
    FAIL() << "f64 parsed";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("f64"), std::string::npos);
  }
}

TEST(Dtype, HalfRoundTripsEveryHalfValue) {
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const float f = half_to_float(static_cast<std::uint16_t>(bits));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    EXPECT_EQ(float_to_half(f), bits) << bits;
  }
}

TEST(Dtype, HalfAndBfloatRoundToNearest) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-100.f, 100.f);
  for (int i = 0; i < 10000; ++i) {
    const float f = dist(rng);
    EXPECT_NEAR(half_to_float(float_to_half(f)), f, std::fabs(f) * 0x1p-11f + 1e-7f);
    EXPECT_NEAR(bfloat16_to_float(float_to_bfloat16(f)), f, std::fabs(f) * 0x1p-8f + 1e-7f);
  }
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Units, ParseAndFormatBytes) {
  EXPECT_EQ(parse_bytes("4096"), 4096u);
  EXPECT_EQ(parse_bytes("64M"), 64u << 20);
  EXPECT_EQ(parse_bytes("1g"), std::size_t{1} << 30);
  EXPECT_EQ(parse_bytes("2KiB"), 2048u);
  EXPECT_THROW(parse_bytes(""), Error);
  EXPECT_THROW(parse_bytes("12Q"), Error);
  EXPECT_THROW(parse_bytes("99999999999999999999999"), Error);
  EXPECT_THROW(parse_bytes("17179869184G"), Error);
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
}

TEST(Hash, StableFnv) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_NE(fnv1a64("a"), fnv1a64("b"));
}

}  // namespace
}  // namespace galley
