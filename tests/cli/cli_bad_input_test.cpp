// The command lines of issue 19 that once crashed, printed a raw internal error or silently did
// something else than asked, replayed through the real `galley`: each must now fail with a
// "galley: error" line naming the bad value, exit non-zero without a signal, and finish quickly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_cases.hpp"

namespace galley::testing {
namespace {

constexpr double kLimitSeconds = 10;  // generous: the machine is shared; most take milliseconds
constexpr std::size_t kMaxOutput = 4096;

class CliBadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        std::filesystem::path(::testing::TempDir()) / ("galley_cli_bad_input_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(list()) << "# two small problems\n"
                          << "conv -n 1 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3 -p 1 -q 1 # small.3x3\n"
                          << "conv -n 1 -c 4 -H 8 -W 8 -k 8 -y 1 -x 1 # small.1x1\n";
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string list() { return (dir_ / "list.txt").string(); }
  static std::string file_with(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  // Runs every case and reports each one that does not fail cleanly.
  static void expect_clean_failures(const std::vector<CliCase>& cases, std::size_t max_output = kMaxOutput) {
    const auto outcomes = run_cli_cases(cases, 2, 60);
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const std::string problem = clean_failure_problem(cases[i], outcomes[i], kLimitSeconds, max_output);
      EXPECT_TRUE(problem.empty()) << problem;
    }
  }

  static std::filesystem::path dir_;
};
std::filesystem::path CliBadInput::dir_;

const std::vector<std::string> kSmall = {"-n", "1", "-c", "4", "-H",       "8",
                                         "-W", "8", "-k", "4", "--device", "cpu"};

std::vector<std::string> small(std::vector<std::string> more) {
  std::vector<std::string> args{"bench", "conv"};
  args.insert(args.end(), kSmall.begin(), kSmall.end());
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST_F(CliBadInput, NumbersAreDecimalAndInRange) {
  expect_clean_failures({
      {{"bench", "conv", "-n", "017", "--device", "cpu"}, {}, "'017'"},
      {{"bench", "conv", "-n", "0x10", "--device", "cpu"}, {}, "'0x10'"},
      {{"bench", "conv", "-u", "99999999999999999999", "--device", "cpu"},
       {},
       "'99999999999999999999' is out of range"},
      {small({"-t", "-7"}), {}, "'-7'"},
      {small({"-V", "1", "--tolerance", "nan"}), {}, "'nan'"},
      {small({"-V", "1", "--tolerance", "-1"}), {}, "'-1'"},
      {{"bench", "tuner", "--file", list(), "--budget-ms", "-1"}, {}, "'-1'"},
      {{"bench", "tuner", "--file", list(), "--budget-ms", "nan"}, {}, "'nan'"},
      {{"tune", "--file", list(), "--batch", "0"}, {}, "'0'"},
      {{"bench", "tuner", "--file", list(), "--batch", "0"}, {}, "'0'"},
  });
}

TEST_F(CliBadInput, RangesAreShort) {
  // CLI11's PositiveNumber printed the largest double in full: 300 digits.
  const auto outcomes = run_cli_cases({{{"tune", "--file", list(), "--batch", "0"}, {}, ""}}, 1, 60);
  EXPECT_LT(outcomes[0].output.size(), 300u) << outcomes[0].output;
  EXPECT_NE(outcomes[0].output.find("--batch"), std::string::npos) << outcomes[0].output;
}

TEST_F(CliBadInput, OptionsThatNeedAnotherSaySo) {
  const std::vector<std::string> tuner = {"bench", "tuner", "--device", "cpu", "--file", list()};
  auto with = [&](std::vector<std::string> more) {
    auto args = tuner;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  expect_clean_failures({
      {with({"--preload"}), {}, "--preload needs --first-call"},
      {with({"--sequence"}), {}, "--sequence needs --first-call"},
      {with({"--passes"}), {}, "--passes needs --first-call"},
      {with({"--explicit"}), {}, "--explicit needs --first-call"},
      {with({"--touch"}), {}, "--touch needs --first-call"},
      {with({"--first-call", "--touch"}), {}, "--touch needs --passes"},
      {with({"--first-call", "--passes", "--explicit"}), {}, "--passes and --explicit exclude each other"},
      {with({"--first-call", "--explicit", "--preload"}), {}, "--explicit and --preload exclude each other"},
      {with({"--first-call", "--budget-ms", "100"}), {}, "--budget-ms and --first-call"},
      {small({"--tolerance", "1e-3"}), {}, "--tolerance needs -V 1"},
      {small({"--solver", "ref.conv.direct", "--all-solvers"}), {}, "--solver and --all-solvers"},
  });
}

TEST_F(CliBadInput, UnknownWordsAreNamedWithWhatIsValid) {
  expect_clean_failures({
      {{"nosuch"}, {}, "unknown subcommand 'nosuch' of 'galley' (valid: "},
      {{"--bogus"}, {}, "unknown option '--bogus' for 'galley'"},
      {{"db", "bogus"}, {}, "unknown subcommand 'bogus' of 'galley db' (valid: path, list"},
      {{"bench", "nosuch"}, {}, "unknown subcommand 'nosuch' of 'galley bench' (valid: "},
      {{"bench", "conv", "--bogus", "1"},
       {},
       "unknown option '--bogus' for 'galley bench conv' (valid: --help, --help-all, -n"},
      {{"info", "extra"}, {}, "unexpected argument 'extra'"},
      {{}, {}, "'galley' needs a subcommand (valid: "},
      {{"bench"}, {}, "'galley bench' needs a subcommand (valid: "},
  });
  // The valid subcommands are listed, not just "a subcommand is required".
  const auto outcomes = run_cli_cases({{{"nosuch"}, {}, ""}}, 1, 60);
  for (const char* name : {"info", "bench", "tune", "db", "demo"}) {
    EXPECT_NE(outcomes[0].output.find(name), std::string::npos) << name << " in " << outcomes[0].output;
  }
}

TEST_F(CliBadInput, HugeShapesAreNamedErrorsNotBadAlloc) {
  expect_clean_failures({
      {{"bench", "conv", "-H", "100000000", "--device", "cpu"}, {}, "x (input)"},
      {{"bench", "conv", "-H", "100000", "-W", "100000", "--device", "cpu"}, {}, "x (input)"},
      {{"bench", "conv", "-k", "1000000000000", "--device", "cpu"}, {}, "w (weights)"},
      {{"tune", "--device", "cpu", "--file", list(), "--batch", "100000000000"}, {}, "n100000000000"},
      {{"bench", "tuner", "--device", "cpu", "--file", list(), "--batch", "100000000000"},
       {},
       "n100000000000"},
      // Past 64 bits: the element count itself is refused.
      {{"bench", "conv", "-n", "4611686018427387904", "-c", "4", "--device", "cpu"}, {}, "overflows 64 bits"},
  });
  const auto outcomes =
      run_cli_cases({{{"bench", "conv", "-H", "100000000", "--device", "cpu"}, {}, ""}}, 1, 60);
  EXPECT_NE(outcomes[0].output.find("out_of_memory"), std::string::npos) << outcomes[0].output;
  EXPECT_NE(outcomes[0].output.find("bytes"), std::string::npos) << outcomes[0].output;
}

TEST_F(CliBadInput, ProblemFileErrorsAreShortAndCarryFileAndLine) {
  // A 10 MB junk line was quoted twice in full: 20 MB of stderr.
  const std::string junk = file_with("junk.txt", "# header\n" + std::string(10 << 20, 'z') + "\n");
  const std::string bad_third =
      file_with("bad_third.txt", "conv -n 1 -c 4 -H 8 -W 8 -k 4\n\nconv -n 017 -c 4\n");
  const std::string long_value = file_with("long_value.txt", "conv -n " + std::string(1 << 20, '9') + "\n");
  const std::string directory = dir_.string();
  std::vector<CliCase> cases;
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{"bench", "conv", "--device", "cpu", "--file"},
                                             {"bench", "tuner", "--device", "cpu", "--file"},
                                             {"tune", "--device", "cpu", "--file"}}) {
    auto with = [&](const std::string& path) {
      auto args = command;
      args.push_back(path);
      return args;
    };
    cases.push_back({with(junk), {}, junk + ":2: "});
    cases.push_back({with(bad_third), {}, bad_third + ":3: "});
    cases.push_back({with(bad_third), {}, "'017'"});
    cases.push_back({with(long_value), {}, "(1048576 chars)"});
    cases.push_back({with(directory), {}, "is a directory"});
  }
  expect_clean_failures(cases);
}

TEST(CliValidInput, StrictParsingKeepsEveryValidForm) {
  // Zero where zero means something, attached values, exponents: all still accepted.
  const std::vector<CliCase> cases = {
      {small({"-p", "0", "-q", "0", "-i", "1", "--warmup", "0", "-V", "1", "--tolerance", "1e-3", "-t", "1"}),
       {},
       ""},
      {small({"-i1", "--warmup=0", "-F", "1", "-m", "conv"}), {}, ""},
  };
  const auto outcomes = run_cli_cases(cases, 2, 120);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(outcomes[i].exit_code, 0) << describe(cases[i]) << "\n" << outcomes[i].output;
  }
}

}  // namespace
}  // namespace galley::testing
