// ConvProblem at the limits of user input: problem-file numbers are canonical decimal (as keys
// are), sizes past 64 bits are refused by name, and messages quote junk input shortened.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "galley/core/error.hpp"
#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/tensor.hpp"

namespace galley::dnn {
namespace {

// The message of the Error(invalid_argument) that `fn` throws; fails the test when none is thrown.
template <typename Fn>
std::string invalid_message(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(ConvProblemLimits, LineNumbersAreCanonicalDecimal) {
  for (const char* value : {"017", "0x10", "00", "+5", "1e3", "1.0", "5x", "99999999999999999999"}) {
    const std::string message =
        invalid_message([&] { ConvProblem::parse_driver_line(std::string("conv -n ") + value + " -c 4"); });
    EXPECT_NE(message.find(std::string("'") + value + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("-n"), std::string::npos) << message;
  }
  EXPECT_EQ(ConvProblem::parse_driver_line("conv -n 10 -c 4 -p 0").n, 10);
}

TEST(ConvProblemLimits, JunkLinesAreQuotedShort) {
  const std::string junk(1 << 20, 'z');
  const std::string message = invalid_message([&] { ConvProblem::parse_driver_line(junk); });
  EXPECT_LT(message.size(), 600u) << message.substr(0, 600);
  EXPECT_NE(message.find("(1048576 chars)"), std::string::npos) << message;

  const std::string long_value = invalid_message([&] { ConvProblem::parse_driver_line("conv -n " + junk); });
  EXPECT_LT(long_value.size(), 600u);
  const std::string long_flag =
      invalid_message([&] { ConvProblem::parse_driver_line("conv -" + junk + " 1"); });
  EXPECT_LT(long_flag.size(), 600u);
  const std::string long_dtype =
      invalid_message([&] { ConvProblem::parse_driver_line("conv --dtype " + junk); });
  EXPECT_LT(long_dtype.size(), 600u);
  const std::string long_key = invalid_message([&] { ConvProblem::parse_key("conv-" + junk); });
  EXPECT_LT(long_key.size(), 600u);
  // Control bytes are shown escaped, never written raw to a terminal.
  const std::string escaped = invalid_message([] { ConvProblem::parse_driver_line("conv -n \x1b[2J"); });
  EXPECT_EQ(escaped.find('\x1b'), std::string::npos) << escaped;
  EXPECT_NE(escaped.find("\\x1B"), std::string::npos) << escaped;
}

TEST(ConvProblemLimits, SizesPast64BitsAreNamed) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  ConvProblem p{.n = 1, .c = 4, .h = 8, .w = 8, .k = 4};
  p.n = std::int64_t{1} << 62;
  EXPECT_NE(invalid_message([&] { p.validate(); }).find("input element count"), std::string::npos);
  p = ConvProblem{.n = 1, .c = 4, .h = 8, .w = 8, .k = std::int64_t{1} << 62};
  EXPECT_NE(invalid_message([&] { p.validate(); }).find("weight element count"), std::string::npos);
  // h + 2*pad_h past 64 bits: refused, not wrapped (the sum itself used to overflow).
  p = ConvProblem{.n = 1, .c = 1, .h = kMax / 2, .w = 1, .k = 1, .y = 1, .x = 1, .pad_h = kMax / 4 + 1};
  EXPECT_FALSE(invalid_message([&] { p.validate(); }).empty());
}

TEST(TensorDescLimits, CountsPast64BitsThrowNamingTheTensor) {
  const auto huge = TensorDesc::packed(DType::f32, Layout::nchw, std::int64_t{1} << 40, 1 << 20, 1 << 20, 1);
  EXPECT_NE(invalid_message([&] { (void)huge.elements(); }).find("overflows"), std::string::npos);
  EXPECT_NE(invalid_message([&] { (void)huge.bytes(); }).find("overflows"), std::string::npos);
  EXPECT_NE(invalid_message([&] { huge.validate("x"); }).find("x tensor"), std::string::npos);
  // Fits in elements, not in bytes.
  const auto bytes_only = TensorDesc::packed(DType::f32, Layout::nchw, std::int64_t{1} << 62, 1, 1, 1);
  EXPECT_EQ(bytes_only.elements(), std::int64_t{1} << 62);
  EXPECT_NE(invalid_message([&] { (void)bytes_only.bytes(); }).find("byte size overflows"),
            std::string::npos);
}

}  // namespace
}  // namespace galley::dnn
