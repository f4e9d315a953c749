// ConvProblem: output sizes, validation errors that name the field, canonical keys, MIOpenDriver lines.
#include "galley/dnn/conv_problem.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

ConvProblem r50_3x3() {
  return ConvProblem{.n = 32, .c = 64, .h = 56, .w = 56, .k = 64, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1};
}

// Expects Error(invalid_argument) whose message contains every fragment.
template <typename Fn>
void expect_invalid(Fn&& fn, std::initializer_list<std::string_view> fragments) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << *fragments.begin() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    for (std::string_view f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
}

TEST(ConvProblem, OutputSizeInferred) {
  EXPECT_EQ(r50_3x3().out_h(), 56);
  EXPECT_EQ(r50_3x3().out_w(), 56);
  const ConvProblem conv1{.n = 32,
                          .c = 3,
                          .h = 224,
                          .w = 224,
                          .k = 64,
                          .y = 7,
                          .x = 7,
                          .pad_h = 3,
                          .pad_w = 3,
                          .stride_h = 2,
                          .stride_w = 2};
  EXPECT_EQ(conv1.out_h(), 112);
  EXPECT_EQ(conv1.out_w(), 112);
  // Dilation 2 widens a 3x3 filter to 5x5; stride 2 on 31 rows keeps 14 outputs of 27 positions.
  const ConvProblem odd{.c = 17,
                        .h = 31,
                        .w = 29,
                        .k = 23,
                        .y = 3,
                        .x = 3,
                        .pad_h = 0,
                        .pad_w = 2,
                        .stride_h = 2,
                        .stride_w = 1,
                        .dilation_h = 2,
                        .dilation_w = 2};
  EXPECT_EQ(odd.out_h(), 14);  // (31 - 5) / 2 + 1
  EXPECT_EQ(odd.out_w(), 29);  // 29 + 4 - 5 + 1
  EXPECT_NO_THROW(odd.validate());
}

TEST(ConvProblem, DepthwiseAndFlops) {
  ConvProblem p = r50_3x3();
  EXPECT_FALSE(p.is_depthwise());
  p.groups = 64;
  EXPECT_TRUE(p.is_depthwise());
  EXPECT_DOUBLE_EQ(p.flops(), 2.0 * 32 * 64 * 56 * 56 * 1 * 9);
  EXPECT_DOUBLE_EQ(r50_3x3().flops(), 2.0 * 32 * 64 * 56 * 56 * 64 * 9);
  EXPECT_DOUBLE_EQ(r50_3x3().min_bytes(), 4.0 * (32.0 * 64 * 56 * 56 * 2 + 64 * 64 * 9));
}

TEST(ConvProblem, ValidationNamesTheField) {
  const auto with = [](auto change) {
    ConvProblem p = r50_3x3();
    change(p);
    return [p] { p.validate(); };
  };
  expect_invalid(with([](ConvProblem& p) { p.n = 0; }), {"n (batch", "0"});
  expect_invalid(with([](ConvProblem& p) { p.c = -3; }), {"c (input channels", "-3"});
  expect_invalid(with([](ConvProblem& p) { p.h = 0; }), {"h (input height"});
  expect_invalid(with([](ConvProblem& p) { p.w = 0; }), {"w (input width"});
  expect_invalid(with([](ConvProblem& p) { p.k = 0; }), {"k (output channels"});
  expect_invalid(with([](ConvProblem& p) { p.y = 0; }), {"y (filter height"});
  expect_invalid(with([](ConvProblem& p) { p.x = -1; }), {"x (filter width"});
  expect_invalid(with([](ConvProblem& p) { p.pad_h = -1; }), {"pad_h", "non-negative"});
  expect_invalid(with([](ConvProblem& p) { p.pad_w = -2; }), {"pad_w"});
  expect_invalid(with([](ConvProblem& p) { p.stride_h = 0; }), {"stride_h"});
  expect_invalid(with([](ConvProblem& p) { p.stride_w = -1; }), {"stride_w"});
  expect_invalid(with([](ConvProblem& p) { p.dilation_h = 0; }), {"dilation_h"});
  expect_invalid(with([](ConvProblem& p) { p.dilation_w = 0; }), {"dilation_w"});
  expect_invalid(with([](ConvProblem& p) { p.groups = 0; }), {"groups"});
  expect_invalid(with([](ConvProblem& p) { p.groups = 3; }),
                 {"c (input channels) = 64", "divisible", "groups = 3"});
  expect_invalid(with([](ConvProblem& p) { p.c = 96, p.groups = 3; }),
                 {"k (output channels) = 64", "groups = 3"});
  expect_invalid(with([](ConvProblem& p) { p.dtype = DType::i8; }), {"dtype i8"});
}

TEST(ConvProblem, EmptyOutputIsAnError) {
  ConvProblem p{.h = 2, .w = 8, .y = 3, .x = 3};
  expect_invalid([&] { p.validate(); }, {"empty output height"});
  p = ConvProblem{.h = 8, .w = 4, .y = 3, .x = 3, .dilation_w = 2};  // dilated width 5 > 4
  expect_invalid([&] { p.validate(); }, {"empty output width", "dilation 2"});
  p.pad_w = 1;  // 4 + 2 >= 5
  EXPECT_NO_THROW(p.validate());
  EXPECT_EQ(p.out_w(), 2);
}

TEST(ConvProblem, OverflowingCountsAreErrors) {
  ConvProblem p{.n = 1ll << 31, .c = 1ll << 31, .h = 4, .w = 4};
  expect_invalid([&] { p.validate(); }, {"input element count"});
  p = ConvProblem{.n = 1ll << 20, .c = 1ll << 20, .h = 1ll << 20, .w = 4};  // 2^62 elements, 2^64 bytes
  expect_invalid([&] { p.validate(); }, {"input byte size"});
  p = ConvProblem{.c = 1ll << 40, .h = 1, .w = 1, .k = 1ll << 40};
  expect_invalid([&] { p.validate(); }, {"weight"});
  p = ConvProblem{.h = 1, .w = 1, .pad_h = INT64_MAX / 2, .pad_w = 0};
  expect_invalid([&] { p.validate(); }, {"overflow"});
  p = ConvProblem{.h = 1ll << 40, .w = 1ll << 40};
  expect_invalid([&] { p.validate(); }, {"count"});
}

TEST(ConvProblem, Descriptors) {
  ConvProblem p{.n = 2, .c = 6, .h = 5, .w = 7, .k = 4, .y = 3, .x = 1, .pad_h = 1, .groups = 2};
  EXPECT_EQ(p.x_desc(), TensorDesc::packed(DType::f32, Layout::nchw, 2, 6, 5, 7));
  EXPECT_EQ(p.w_desc(), TensorDesc::packed(DType::f32, Layout::nchw, 4, 3, 3, 1));
  EXPECT_EQ(p.y_desc(), TensorDesc::packed(DType::f32, Layout::nchw, 2, 4, 5, 7));
  p.layout = Layout::nhwc;
  p.dtype = DType::bf16;
  EXPECT_EQ(p.w_desc().strides, (dnn::Dims{9, 1, 3, 3, 1, 1}));  // KYXC
  EXPECT_EQ(p.y_desc().strides, (dnn::Dims{5 * 7 * 4, 1, 7 * 4, 4, 1, 1}));
  EXPECT_NO_THROW(p.check_tensors(p.x_desc(), p.w_desc(), p.y_desc()));
}

TEST(ConvProblem, MismatchedTensorsNameTheTensor) {
  const ConvProblem p = r50_3x3();
  TensorDesc x = p.x_desc(), w = p.w_desc(), y = p.y_desc();
  TensorDesc bad_x = x;
  bad_x.dims[1] = 63;
  expect_invalid([&] { p.check_tensors(bad_x, w, y); }, {"x (input)", "f32[32,63,56,56]"});
  TensorDesc bad_w = w;
  bad_w.dtype = DType::f16;
  expect_invalid([&] { p.check_tensors(x, bad_w, y); }, {"w (weights)", "f16"});
  TensorDesc bad_y = y;
  bad_y.dims[2] = 55;
  expect_invalid([&] { p.check_tensors(x, w, bad_y); }, {"y (output)"});
  // Right dims, wrong memory order: an NHWC tensor handed to an NCHW problem.
  const TensorDesc nhwc_y = TensorDesc::packed(DType::f32, Layout::nhwc, 32, 64, 56, 56);
  expect_invalid([&] { p.check_tensors(x, w, nhwc_y); }, {"y (output)", "not packed nchw"});
  TensorDesc negative = x;
  negative.strides[3] = 0;
  expect_invalid([&] { p.check_tensors(negative, w, y); }, {"x (input)", "stride of W"});
}

TEST(ConvKey, CanonicalTextAndRoundTrip) {
  EXPECT_EQ(r50_3x3().key(), "conv-F-f32-nchw-n32-c64-h56-w56-k64-y3-x3-p1-q1-u1-v1-l1-j1-g1");
  ConvProblem p{.n = 3,
                .c = 34,
                .h = 31,
                .w = 29,
                .k = 46,
                .y = 1,
                .x = 7,
                .pad_h = 0,
                .pad_w = 2,
                .stride_h = 2,
                .stride_w = 1,
                .dilation_h = 1,
                .dilation_w = 2,
                .groups = 2,
                .dtype = DType::bf16,
                .layout = Layout::nhwc,
                .direction = ConvDirection::backward_weights};
  EXPECT_EQ(p.key(), "conv-W-bf16-nhwc-n3-c34-h31-w29-k46-y1-x7-p0-q2-u2-v1-l1-j2-g2");
  EXPECT_EQ(ConvProblem::parse_key(p.key()), p);
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      for (ConvDirection dir : {ConvDirection::forward, ConvDirection::backward_data}) {
        ConvProblem q = r50_3x3();
        q.dtype = d, q.layout = l, q.direction = dir;
        EXPECT_EQ(ConvProblem::parse_key(q.key()), q) << q.key();
        EXPECT_EQ(ConvProblem::parse_key(q.key()).key(), q.key());
      }
    }
  }
}

TEST(ConvKey, MalformedKeysAreRejected) {
  const std::string good = r50_3x3().key();
  for (const std::string bad : {
           std::string(""),
           std::string("conv"),
           good + "-z1",
           "conf" + good.substr(4),
           std::string("conv-X-f32-nchw-n32-c64-h56-w56-k64-y3-x3-p1-q1-u1-v1-l1-j1-g1"),
           std::string("conv-F-f64-nchw-n32-c64-h56-w56-k64-y3-x3-p1-q1-u1-v1-l1-j1-g1"),
           std::string("conv-F-f32-NCHW-n32-c64-h56-w56-k64-y3-x3-p1-q1-u1-v1-l1-j1-g1"),
           std::string("conv-F-f32-nchw-n32-c64-w56-h56-k64-y3-x3-p1-q1-u1-v1-l1-j1-g1"),   // fields swapped
           std::string("conv-F-f32-nchw-n032-c64-h56-w56-k64-y3-x3-p1-q1-u1-v1-l1-j1-g1"),  // not canonical
           std::string("conv-F-f32-nchw-n32-c64-h56-w56-k64-y3-x3-p1-q1-u1-v1-l1-j1-g3"),   // invalid problem
           std::string("conv-F-f32-nchw-n32-c64-h56-w56-k64-y3-x3-p1-q1-u1-v1-l1-j1-g1 "),
           std::string("conv-F-f32-nchw-n32-c64-h56-w56-k64-y3-x3-p1-q1-u1-v1-l1-j1-gx"),
           std::string("conv-F-f32-nchw-n32-c64-h56-w56-k64-y3-x3-p1-q1-u1-v1-l1-j1-g99999999999999999999"),
       }) {
    EXPECT_THROW(ConvProblem::parse_key(bad), Error) << "'" << bad << "'";
  }
}

TEST(ConvDriverLine, ParsesFlagsAndTag) {
  std::string tag;
  const ConvProblem p = ConvProblem::parse_driver_line(
      "conv -n 32 -c 128 -H 56 -W 56 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -l 1 -j 1 -g 1 # r50.l2.c2s2 ",
      &tag);
  EXPECT_EQ(tag, "r50.l2.c2s2");
  EXPECT_EQ(p.key(), "conv-F-f32-nchw-n32-c128-h56-w56-k128-y3-x3-p1-q1-u2-v2-l1-j1-g1");
  EXPECT_EQ(ConvProblem::parse_driver_line("conv " + p.driver_flags()), p);
  EXPECT_EQ(p.driver_flags(), "-n 32 -c 128 -H 56 -W 56 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -l 1 -j 1 -g 1");

  // No leading word, no tag: the tag is cleared. Long flags and --flag=value work.
  tag = "stale";
  const ConvProblem q = ConvProblem::parse_driver_line(
      "--batchsize=2 --in_channels 6 -H 9 -W 7 --out_channels 4 -y 1 -x 1 --group_count 2 -F 1 -t 1 -V 0 -i "
      "5",
      &tag);
  EXPECT_EQ(tag, "");
  EXPECT_EQ(q.n, 2);
  EXPECT_EQ(q.c, 6);
  EXPECT_EQ(q.groups, 2);
  EXPECT_EQ(q.direction, ConvDirection::forward);

  // MIOpenDriver's defaults for the flags left out, so a pasted driver command means the same.
  const ConvProblem d = ConvProblem::parse_driver_line("conv -F 1");
  EXPECT_EQ(d.key(), "conv-F-f32-nchw-n100-c3-h32-w32-k32-y3-x3-p0-q0-u1-v1-l1-j1-g1");

  EXPECT_EQ(ConvProblem::parse_driver_line("convfp16 -n 1").dtype, DType::f16);
  EXPECT_EQ(ConvProblem::parse_driver_line("convbfp16 -n 1").dtype, DType::bf16);
  const ConvProblem e = ConvProblem::parse_driver_line("conv -n 1 --dtype bf16 --layout NHWC -F 2");
  EXPECT_EQ(e.dtype, DType::bf16);
  EXPECT_EQ(e.layout, Layout::nhwc);
  EXPECT_EQ(e.direction, ConvDirection::backward_data);
}

TEST(ConvDriverLine, BadLinesNameTheProblem) {
  expect_invalid([] { ConvProblem::parse_driver_line("conv -n 1 -Z 3"); }, {"unknown flag -Z"});
  expect_invalid([] { ConvProblem::parse_driver_line("conv -n 1 -c"); }, {"-c has no value"});
  expect_invalid([] { ConvProblem::parse_driver_line("conv -n x1"); }, {"'x1'", "-n"});
  expect_invalid([] { ConvProblem::parse_driver_line("conv -n 1 -n 2"); }, {"given twice"});
  expect_invalid([] { ConvProblem::parse_driver_line("conv -n 1 --batchsize 2"); }, {"given twice"});
  expect_invalid([] { ConvProblem::parse_driver_line("pool -n 1"); }, {"'pool'"});
  expect_invalid([] { ConvProblem::parse_driver_line("conv -c 3 -g 2"); }, {"divisible", "-c 3 -g 2"});
  expect_invalid([] { ConvProblem::parse_driver_line("conv -F 0"); }, {"-F 0"});
  expect_invalid([] { ConvProblem::parse_driver_line("   # only a comment"); }, {"no conv problem"});
  expect_invalid([] { ConvProblem::parse_driver_line("conv -n 1 stray"); }, {"'stray' is not a flag"});
}

TEST(ConvDriverLine, EveryBenchmarkProblemParses) {
  std::ifstream file(std::string(GALLEY_SOURCE_DIR) + "/../shared/bench/conv_problems.txt");
  if (!file) GTEST_SKIP() << "shared/bench/conv_problems.txt is not beside the repository";
  std::string line;
  int problems = 0;
  while (std::getline(file, line)) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    std::string tag;
    const ConvProblem p = ConvProblem::parse_driver_line(line, &tag);
    EXPECT_FALSE(tag.empty()) << line;
    EXPECT_EQ(ConvProblem::parse_key(p.key()), p);
    EXPECT_EQ(ConvProblem::parse_driver_line(p.driver_flags()), p);
    ++problems;
  }
  EXPECT_EQ(problems, 27);
}

}  // namespace
}  // namespace galley::dnn
