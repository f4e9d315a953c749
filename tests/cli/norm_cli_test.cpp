// `galley bench bnorm|lnorm|gnorm` as a user runs them: the default problems run and verify on the
// cpu, every mode and direction verifies, and bad flags or impossible attributes are errors that
// name them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/run_command.hpp"

namespace {

galley::testing::CommandResult bench(const std::string& args) {
  return galley::testing::run_command(GALLEY_TEST_BIN_DIR "/galley bench " + args + " --device cpu 2>&1");
}

TEST(NormCli, DefaultProblemsRunAndVerify) {
  for (const char* op : {"bnorm", "lnorm", "gnorm"}) {
    const auto r = bench(std::string(op) + " -V 1 -i 2");
    EXPECT_EQ(r.exit_code, 0) << op << "\n" << r.output;
    EXPECT_NE(r.output.find("ok "), std::string::npos) << r.output;
  }
}

TEST(NormCli, EveryModeAndDirectionVerifiesInJson) {
  const struct {
    const char* args;
    std::size_t problems;
  } cases[] = {{"bnorm -n 2 -c 17 -H 7 -W 5 -F 1 -b 1 --layout nhwc --dtype bf16", 2},
               {"bnorm -n 2 -c 17 -H 7 -W 5 -F 2 --dtype f16", 1},
               {"lnorm -X 3x5x31x29 -o 1 -F 0 --dtype f16", 2},
               {"gnorm -n 2 -c 24 -H 5 -W 7 -g 6 -F 0 --layout nhwc", 2}};
  for (const auto& c : cases) {
    const auto r = bench(std::string(c.args) + " -V 1 -i 1 --json");
    ASSERT_EQ(r.exit_code, 0) << c.args << "\n" << r.output;
    const auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
    ASSERT_EQ(j["problems"].size(), c.problems) << r.output;
    for (const auto& p : j["problems"]) {
      ASSERT_FALSE(p["results"].empty()) << p.dump();
      EXPECT_EQ(p["results"][0]["verified"], true) << p.dump();
      // The repro line (what GALLEY_LOG_CMD prints) runs the same problem again.
      const std::string command = p["command"].get<std::string>();
      ASSERT_EQ(command.rfind("galley bench ", 0), 0u) << command;
      const auto again = galley::testing::run_command(GALLEY_TEST_BIN_DIR "/galley" + command.substr(6) +
                                                      " -V 1 -i 1 --json 2>&1");
      ASSERT_EQ(again.exit_code, 0) << command << "\n" << again.output;
      const auto j2 = nlohmann::json::parse(again.output.substr(again.output.find('{')));
      EXPECT_EQ(j2["problems"][0]["key"], p["key"]) << command;
    }
  }
}

TEST(NormCli, BadFlagsAndAttributesAreNamedErrors) {
  const struct {
    const char* args;
    const char* expect;
  } cases[] = {{"bnorm -m 0", "per-activation"},
               {"bnorm -F 0 -b 0", "runs nothing"},
               {"bnorm -F 3", "--forw"},
               {"bnorm --epsilon 0", "--epsilon"},
               {"bnorm --momentum 2", "--momentum"},
               {"bnorm -n 1 -H 1 -W 1", "more than one value per channel"},
               {"bnorm --layout nchw4", "nchw4"},
               {"gnorm -g 5", "groups (-g) = 5"},
               {"gnorm -c 0", "--in_channels"},
               {"lnorm -o 3", "axis"},
               {"lnorm -X 8xax768", "-X"},
               {"lnorm -X 1x2x3x4x5x6x7", "more than 6 dims"},
               {"lnorm --layout nhwc", "--layout"},
               {"lnorm --dtype f64", "f64"}};
  for (const auto& c : cases) {
    const auto r = bench(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find("galley: error"), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
  }
}

}  // namespace
