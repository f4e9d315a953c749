// KeyReader (src/dnn/key_text.hpp), which every op but convolution reads its problem key with: the
// fields it reads, and the one message format of its errors.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "dnn/key_text.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/problem.hpp"

namespace galley::dnn {
namespace {

using detail::KeyReader;

constexpr std::string_view kExample = "demo-F-f32-nchw-n2-d3x4-s1.2-ceil1-mode2";

// The message of the Error fn() throws; fails the test unless it is invalid_argument.
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// Reads a key of kExample's form to its end.
void read_demo(std::string_view key) {
  KeyReader r("demo", key, kExample);
  r.direction();
  r.dtype();
  r.layout();
  r.count("n");
  r.counts("d", 'x', "dims");
  r.counts("s", '.', "sizes");
  r.flag("ceil");
  r.one_of("mode", {"mode1", "mode2"});
  r.end();
}

TEST(KeyReader, ReadsEveryFieldKind) {
  KeyReader r("demo", kExample, kExample);
  EXPECT_EQ(r.direction(), 'F');
  EXPECT_EQ(r.dtype(), DType::f32);
  EXPECT_EQ(r.layout(), Layout::nchw);
  EXPECT_EQ(r.count("n"), 2);
  Dims dims{};
  int rank = 0;
  r.dims("d", dims, rank);
  EXPECT_EQ(rank, 2);
  EXPECT_EQ(dims, (Dims{3, 4, 1, 1, 1, 1}));
  EXPECT_EQ(r.counts("s", '.', "sizes"), (std::vector<std::int64_t>{1, 2}));
  EXPECT_TRUE(r.flag("ceil"));
  EXPECT_EQ(r.one_of("mode", {"mode1", "mode2"}), 1u);
  r.end();
}

TEST(KeyReader, AcceptTakesOnlyTheLiteral) {
  KeyReader r("demo", "demo-row-x", "");
  EXPECT_FALSE(r.accept("nchw"));
  EXPECT_TRUE(r.accept("row"));
  EXPECT_EQ(r.word("rest"), "x");
  EXPECT_FALSE(r.accept("x"));
  r.end();
}

TEST(KeyReader, ErrorsNameTheKeyTheFieldAndTheExample) {
  EXPECT_EQ(error_of([] { read_demo("demo-F-f32-nchw-n02-d3x4-s1.2-ceil1-mode2"); }),
            "malformed demo key 'demo-F-f32-nchw-n02-d3x4-s1.2-ceil1-mode2': field 5 'n02' is not "
            "'n<integer>' (expected e.g. demo-F-f32-nchw-n2-d3x4-s1.2-ceil1-mode2)");
  EXPECT_EQ(error_of([] { KeyReader("demo", "demo-q7", "").count("n"); }),
            "malformed demo key 'demo-q7': field 2 'q7' is not 'n<integer>'");
}

TEST(KeyReader, EachFieldKindRefusesOtherSpellings) {
  struct Case {
    const char* key;
    const char* says;
  };
  for (const Case& c : {
           Case{"conv-F-f32-nchw-n2-d3x4-s1.2-ceil1-mode2", "does not start with 'demo'"},
           Case{"demo", "ending before its direction"},
           Case{"demo-W-f32-nchw-n2-d3x4-s1.2-ceil1-mode2", "direction 'W' is not F or B"},
           Case{"demo-FB-f32-nchw-n2-d3x4-s1.2-ceil1-mode2", "direction 'FB' is not F or B"},
           Case{"demo-F-f64-nchw-n2-d3x4-s1.2-ceil1-mode2", "unknown dtype 'f64'"},
           Case{"demo-F-f32-NCHW-n2-d3x4-s1.2-ceil1-mode2", "layout 'NCHW' must be lower case"},
           Case{"demo-F-f32-chwn-n2-d3x4-s1.2-ceil1-mode2", "unknown layout 'chwn'"},
           Case{"demo-F-f32-nchw-n-d3x4-s1.2-ceil1-mode2", "field 5 'n' is not 'n<integer>'"},
           Case{"demo-F-f32-nchw-n+2-d3x4-s1.2-ceil1-mode2", "field 5 'n+2' is not 'n<integer>'"},
           Case{"demo-F-f32-nchw-c2-d3x4-s1.2-ceil1-mode2", "field 5 'c2' is not 'n<integer>'"},
           Case{"demo-F-f32-nchw-n2-d3xx4-s1.2-ceil1-mode2", "field 6 'd3xx4' is not 'd<dims>'"},
           Case{"demo-F-f32-nchw-n2-d-s1.2-ceil1-mode2", "field 6 'd' is not 'd<dims>'"},
           Case{"demo-F-f32-nchw-n2-d3x4-s1.2-ceil2-mode2", "field 8 'ceil2' is not 'ceil<0 or 1>'"},
           Case{"demo-F-f32-nchw-n2-d3x4-s1.2-ceil1-mode3", "mode 'mode3' is not mode1 or mode2"},
           Case{"demo-F-f32-nchw-n2-d3x4-s1.2-ceil1", "has 8 '-'-separated fields, ending before its mode"},
           Case{"demo-F-f32-nchw-n2-d3x4-s1.2-ceil1-mode2-x", "has 10 '-'-separated fields, want 9"},
       }) {
    const std::string message = error_of([&] { read_demo(c.key); });
    EXPECT_NE(message.find(c.says), std::string::npos) << c.key << ": " << message;
    EXPECT_NE(message.find(std::string("malformed demo key '") + c.key + "'"), std::string::npos) << message;
  }
}

TEST(KeyReader, DirectionLettersAreTheCallers) {
  EXPECT_EQ(KeyReader("demo", "demo-W", "").direction("FBW"), 'W');
  EXPECT_NE(error_of([] { KeyReader("demo", "demo-X", "").direction("FBW"); }).find("is not F, B or W"),
            std::string::npos);
}

TEST(KeyReader, DimsAreOneToMaxRank) {
  Dims dims{};
  int rank = 0;
  KeyReader("demo", "demo-s7", "").dims("s", dims, rank);
  EXPECT_EQ(rank, 1);
  EXPECT_NE(error_of([&] {
              KeyReader("demo", "demo-s1x1x1x1x1x1x1", "").dims("s", dims, rank);
            }).find("is not 's<1 to 6 dims joined by x>'"),
            std::string::npos);
}

TEST(KeyReader, ParsedFieldsUseTheCallersCanonicalForm) {
  const auto even = [](std::string_view text, std::int64_t& out) {
    return detail::parse_key_uint(text, out) && out % 2 == 0;
  };
  EXPECT_EQ(KeyReader("demo", "demo-v4", "").field<std::int64_t>("v", "even number", even), 4);
  EXPECT_NE(error_of([&] {
              KeyReader("demo", "demo-v3", "").field<std::int64_t>("v", "even number", even);
            }).find("field 2 'v3' is not 'v<even number>'"),
            std::string::npos);
}

TEST(KeyReader, ValueTailFieldsMayHoldMinusSigns) {
  KeyReader r("demo", "demo-n2-alpha-0.5-beta1e-05", "", {"alpha", "beta"});
  EXPECT_EQ(r.count("n"), 2);
  EXPECT_EQ(r.field("alpha", "number"), "-0.5");
  EXPECT_EQ(r.field("beta", "number"), "1e-05");
  r.end();
  EXPECT_NE(error_of([] {
              KeyReader("demo", "demo-n2-alpha1", "", {"alpha", "beta"});
            }).find("does not end in -alpha<value>-beta<value>"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              KeyReader("demo", "demo-n2-beta1-alpha1", "", {"alpha", "beta"});
            }).find("does not end in -alpha<value>-beta<value>"),
            std::string::npos);
}

// Every op's malformed-key message ends with an example key, which must itself be a valid key.
TEST(KeyReader, EveryOpsExampleKeyParses) {
  for (const char* kind : {"activ", "bnorm", "gnorm", "lnorm", "pool", "eltwise", "gemm", "softmax", "reduce",
                           "concat", "split", "transpose", "pad", "reorder"}) {
    const std::string message = error_of([&] { parse_problem_key(std::string(kind) + "-?"); });
    const std::size_t at = message.find("(expected e.g. ");
    ASSERT_NE(at, std::string::npos) << message;
    std::string examples = message.substr(at + 15, message.size() - at - 16);
    std::vector<std::string> keys;
    for (std::size_t or_at; (or_at = examples.find(" or ")) != std::string::npos;) {
      keys.push_back(examples.substr(0, or_at));
      examples.erase(0, or_at + 4);
    }
    keys.push_back(examples);
    for (const std::string& key : keys) {
      SCOPED_TRACE(key);
      EXPECT_EQ(parse_problem_key(key).ref().key(), key);
    }
  }
}

}  // namespace
}  // namespace galley::dnn
