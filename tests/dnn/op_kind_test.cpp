// Op kinds and tensor roles by name, and the any-rank tensor descriptor.
#include <gtest/gtest.h>

#include "galley/core/error.hpp"
#include "galley/dnn/op.hpp"
#include "galley/dnn/problem.hpp"

namespace galley::dnn {
namespace {

TEST(OpKind, EveryKindRoundTripsThroughItsName) {
  for (std::size_t i = 0; i < kOpKindCount; ++i) {
    const auto kind = static_cast<OpKind>(i);
    const std::string name = to_string(kind);
    EXPECT_NE(name, "?");
    EXPECT_EQ(parse_op_kind(name), kind);
    EXPECT_EQ(op_kind_of_key(name + "-f32-anything"), kind);
  }
}

TEST(OpKind, UnknownNamesAreErrorsListingTheKnownKinds) {
  try {
    parse_op_kind("pooling");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'pooling'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bnorm"), std::string::npos) << e.what();
  }
  EXPECT_THROW(op_kind_of_key("convolution-F-f32"), Error);
}

TEST(ArgId, NamesIncludingVariadicOnes) {
  EXPECT_STREQ(to_string(ArgId::saved_invstd), "saved_invstd");
  EXPECT_STREQ(to_string(ArgId::indices), "indices");
  EXPECT_STREQ(to_string(multi_arg(0)), "multi[0]");
  EXPECT_STREQ(to_string(multi_arg(kMaxMultiArgs - 1)), ("multi[" + std::to_string(kMaxMultiArgs - 1) + "]").c_str());
  OpArgs args;
  int x = 0;
  args.set(multi_arg(7), &x);
  EXPECT_EQ(args.get(multi_arg(7)), &x);
  EXPECT_EQ(args.get(multi_arg(6)), nullptr);
}

TEST(OpKind, ConvHasAProblemTypeAndKindsWithoutOneSayUnsupported) {
  EXPECT_EQ(problem_ops_for(OpKind::conv).kind, OpKind::conv);
  for (std::size_t i = 0; i < kOpKindCount; ++i) {
    try {
      EXPECT_EQ(problem_ops_for(static_cast<OpKind>(i)).kind, static_cast<OpKind>(i));
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::unsupported) << e.what();
    }
  }
}

TEST(TensorDesc, ContiguousOfAnyRank) {
  const TensorDesc d = TensorDesc::contiguous(DType::f16, {2, 3, 5, 7, 11});
  EXPECT_EQ(d.rank, 5);
  EXPECT_EQ(d.strides, (Dims{3 * 5 * 7 * 11, 5 * 7 * 11, 7 * 11, 11, 1, 1}));
  EXPECT_EQ(d.elements(), 2 * 3 * 5 * 7 * 11);
  EXPECT_EQ(d.bytes(), 2u * 2 * 3 * 5 * 7 * 11);
  EXPECT_TRUE(d.is_contiguous());
  EXPECT_FALSE(d.is_packed(Layout::nchw));
  EXPECT_EQ(d.to_string(), "f16[2,3,5,7,11] strides [1155,385,77,11,1]");
  const TensorDesc v = TensorDesc::contiguous(DType::f32, {9});
  EXPECT_EQ(v.rank, 1);
  EXPECT_EQ(v.bytes(), 36u);
  // A rank-4 row-major tensor is NCHW-packed.
  EXPECT_TRUE(TensorDesc::contiguous(DType::f32, {2, 3, 4, 5}).is_packed(Layout::nchw));
}

TEST(TensorDesc, BadRanksAndStrayDimsAreNamed) {
  EXPECT_THROW(TensorDesc::contiguous(DType::f32, {}), Error);
  EXPECT_THROW(TensorDesc::contiguous(DType::f32, {1, 2, 3, 4, 5, 6, 7}), Error);
  TensorDesc d = TensorDesc::contiguous(DType::f32, {4, 4});
  d.dims[3] = 2;  // past the rank
  try {
    d.validate("x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("past its rank"), std::string::npos) << e.what();
  }
  TensorDesc z = TensorDesc::contiguous(DType::f32, {4, 0, 2});
  try {
    z.validate("y");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dimension dim 1 = 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace galley::dnn
