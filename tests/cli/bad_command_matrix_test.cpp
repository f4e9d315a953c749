// A generated matrix of bad command lines: every numeric option of every subcommand, given each
// malformed or out-of-range value, in both spellings (`-n V` / `-nV`, `--opt V` / `--opt=V`), run
// through the real `galley`. Every one must fail cleanly: non-zero exit, no signal, no "internal
// error", a "galley: error" line quoting the bad value (shortened when long), bounded output.
//
// Rows are {args, env}: a case that needs a GALLEY_* variable adds it to CliCase::env, so the
// environment's bad values can join this table once one configuration object validates them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_cases.hpp"
#include "core/quoted_input.hpp"

namespace galley::testing {
namespace {

enum class Kind { integer, number, size_list };

// One numeric option: the command that takes it (with whatever else it requires), its name, what
// it holds, and the values bad for this option alone (in range for the type, not for the option).
struct NumericOption {
  std::vector<std::string> command;
  std::string option;
  Kind kind;
  std::vector<std::string> bad_here;
};

// Malformed for any integer option: octal and hex spellings, floats, words, out of 64 bits,
// separators, signs and digits CLI11 or strtol would have taken, control bytes, megabytes.
std::vector<std::string> bad_integers() {
  return {"017",
          "0x10",
          "1e400",
          "nan",
          "inf",
          "99999999999999999999",
          "-99999999999999999999",
          "",
          "junk",
          "1.5",
          "+5",
          "1e3",
          "5x",
          " 5",
          "5 ",
          "0b101",
          "-0x1",
          "\xd9\xa3",
          "-",
          "1,000",
          "1_000",
          "\x1b[31m7",
          std::string(100000, '9'),
          std::string(100000, 'x')};
}

// Malformed for any floating-point option: not-a-numbers, infinities, hex floats, out of range.
std::vector<std::string> bad_numbers() {
  return {"nan",
          "NaN",
          "-nan",
          "inf",
          "-inf",
          "infinity",
          "1e400",
          "-1e400",
          "0x1p3",
          "",
          "junk",
          "1,5",
          "+1",
          "--1",
          "1e",
          "1.5.5",
          "\x1b[31m1",
          std::string(100000, '9'),
          std::string(100000, 'x')};
}

// Malformed byte-size lists (--sizes).
std::vector<std::string> bad_size_lists() {
  return {"",     "junk",  "1Q",      "99999999999999999999",  "nan", "0", ",,,", "-1", "1e3",
          "0x10", "64M,0", "4K,junk", std::string(100000, 'x')};
}

// What the message must quote: the value, or for a list the bad item in it.
std::string expected_quote(Kind kind, const std::string& value) {
  if (kind == Kind::size_list && value.find(',') != std::string::npos &&
      value.find_first_not_of(',') != std::string::npos) {
    return quoted_input(value.substr(value.rfind(',') + 1));
  }
  return quoted_input(value);
}

// Stands for the path of a valid problem list in the commands that require --file.
const std::string kList = "@LIST@";

std::vector<NumericOption> numeric_options() {
  const std::vector<std::string> conv = {"bench", "conv", "--device", "cpu"};
  const std::vector<std::string> tuner = {"bench", "tuner", "--device", "cpu", "--file", kList};
  const std::vector<std::string> tune = {"tune", "--device", "cpu", "--file", kList};
  const std::vector<std::string> alloc = {"bench", "alloc", "--device", "cpu"};
  const std::vector<std::string> transfer = {"bench", "transfer", "--device", "cpu"};
  std::vector<NumericOption> out;
  for (const char* positive : {"-n", "-c", "-H", "-W", "-k", "-y", "-x", "-u", "-v", "-l", "-j", "-g"}) {
    out.push_back({conv, positive, Kind::integer, {"0", "-1", "-9223372036854775808"}});
  }
  for (const char* padding : {"-p", "-q"}) out.push_back({conv, padding, Kind::integer, {"-1"}});
  out.push_back({conv, "-F", Kind::integer, {"3", "5", "-1"}});
  out.push_back({conv, "-V", Kind::integer, {"2", "-1"}});
  out.push_back({conv, "-t", Kind::integer, {"2", "-7"}});
  out.push_back({conv, "-i", Kind::integer, {"0", "-1", "1000001", "2147483647"}});
  out.push_back({conv, "--warmup", Kind::integer, {"-1", "1000001"}});
  out.push_back({conv, "--tolerance", Kind::number, {"0", "-1e-3"}});
  out.push_back({tuner, "--batch", Kind::integer, {"0", "-1"}});
  out.push_back({tuner, "--rounds", Kind::integer, {"0", "-1", "1000001"}});
  out.push_back({tuner, "--budget-ms", Kind::number, {"-1", "-0.5"}});
  out.push_back({tune, "--batch", Kind::integer, {"0", "-1"}});
  out.push_back({alloc, "--repeats", Kind::integer, {"0", "-1", "1000001"}});
  out.push_back({alloc, "--sizes", Kind::size_list, {}});
  // bench transfer checks its own ranges after parsing (its messages say "got V"): the syntax
  // matrix applies to it through the CLI-wide number check.
  out.push_back({transfer, "--repeats", Kind::integer, {}});
  out.push_back({transfer, "--warmup", Kind::integer, {}});
  out.push_back({transfer, "--sizes", Kind::size_list, {}});
  return out;
}

// `-n V` and `-nV` for a short option; `--opt V` and `--opt=V` for a long one. The attached
// spelling of an empty value is the bare option (no value at all), a different mistake that the
// message cannot quote.
std::vector<CliCase> spellings(const NumericOption& o, const std::string& value) {
  const bool is_long = o.option.starts_with("--");
  auto with = [&](std::vector<std::string> tail) {
    auto args = o.command;
    args.insert(args.end(), tail.begin(), tail.end());
    return args;
  };
  const std::string expect = expected_quote(o.kind, value);
  std::vector<CliCase> out;
  out.push_back({with({o.option, value}), {}, expect});
  out.push_back(
      {with({is_long ? o.option + "=" + value : o.option + value}), {}, value.empty() ? "" : expect});
  return out;
}

// Every bad value of one option, in both spellings.
std::vector<CliCase> cases_for(const NumericOption& o) {
  std::vector<std::string> values = o.kind == Kind::integer  ? bad_integers()
                                    : o.kind == Kind::number ? bad_numbers()
                                                             : bad_size_lists();
  values.insert(values.end(), o.bad_here.begin(), o.bad_here.end());
  std::vector<CliCase> cases;
  for (const auto& value : values) {
    for (auto& c : spellings(o, value)) cases.push_back(std::move(c));
  }
  return cases;
}

// One test per option, so ctest spreads the matrix over cores and names the option that broke.
class BadCommandMatrix : public ::testing::TestWithParam<std::size_t> {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("galley_bad_matrix_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "list.txt") << "conv -n 1 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3 -p 1 -q 1 # small\n";
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::filesystem::path dir_;
};
std::filesystem::path BadCommandMatrix::dir_;

TEST(BadCommandMatrixSize, HoldsAtLeast500CommandLines) {
  std::size_t total = 0;
  for (const auto& o : numeric_options()) total += cases_for(o).size();
  EXPECT_GE(total, 500u);
}

TEST_P(BadCommandMatrix, EveryBadValueFailsCleanly) {
  auto cases = cases_for(numeric_options().at(GetParam()));
  for (auto& c : cases) {
    for (auto& arg : c.args) {
      if (arg == kList) arg = (dir_ / "list.txt").string();
    }
  }
  const auto outcomes = run_cli_cases(cases, 2, 60);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string problem = clean_failure_problem(cases[i], outcomes[i], 10, 4096);
    EXPECT_TRUE(problem.empty()) << problem;
  }
}

std::string option_test_name(const ::testing::TestParamInfo<std::size_t>& info) {
  const NumericOption o = numeric_options().at(info.param);
  std::string name;
  for (const auto& word : o.command) {
    if (word.starts_with("-")) break;
    name += word + "_";
  }
  // "--budget-ms" -> "budget_ms"; "-V" and "-v" stay apart (names are case-sensitive).
  const std::string bare = o.option.substr(o.option.find_first_not_of('-'));
  for (char ch : bare) name += ch == '-' ? '_' : ch;
  return name;
}

INSTANTIATE_TEST_SUITE_P(Options, BadCommandMatrix,
                         ::testing::Range<std::size_t>(0, numeric_options().size()), option_test_name);

}  // namespace
}  // namespace galley::testing
