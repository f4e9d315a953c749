// quoted_input: how error messages quote user input (short, printable, with the full length).
#include "core/quoted_input.hpp"

#include <gtest/gtest.h>

#include <string>

namespace galley {
namespace {

TEST(QuotedInput, ShortTextIsQuotedAsIs) {
  EXPECT_EQ(quoted_input("017"), "'017'");
  EXPECT_EQ(quoted_input(""), "''");
}

TEST(QuotedInput, LongTextIsCutWithItsLength) {
  const std::string text(10 << 20, 'z');
  const std::string q = quoted_input(text);
  EXPECT_EQ(q, "'" + std::string(kQuotedInputChars, 'z') + "...' (10485760 chars)");
  EXPECT_EQ(quoted_input("abcdef", 3), "'abc...' (6 chars)");
}

TEST(QuotedInput, ControlBytesAreEscaped) {
  EXPECT_EQ(quoted_input("a\nb\x1b[0m\x7f"), "'a\\x0Ab\\x1B[0m\\x7F'");
}

TEST(QuotedInput, NeverCutsInsideAUtf8Character) {
  // "é" is two bytes; a cut after 3 bytes would split the second one.
  EXPECT_EQ(quoted_input("a\xc3\xa9\xc3\xa9", 4), "'a\xc3\xa9...' (5 chars)");
}

}  // namespace
}  // namespace galley
