// `galley demo` on the cpu: every check passes, the network matches the reference path, and a
// second run in a new process finds every layer in the find-db (nothing tuned again).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/run_command.hpp"

namespace {

galley::testing::CommandResult run_demo(const std::string& cache) {
  return galley::testing::run_command("GALLEY_CACHE_DIR=" + cache + " " GALLEY_TEST_BIN_DIR "/galley demo --device cpu 2>&1");
}

TEST(CliDemo, PassesAndSecondRunTunesNothing) {
  const auto cache = std::filesystem::temp_directory_path() / ("galley-demo-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(cache);
  const auto first = run_demo(cache.string());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("demo: all checks passed"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("[ ok ] its output matches the reference path"), std::string::npos) << first.output;
  EXPECT_EQ(first.output.find(" 0 tuned now"), std::string::npos) << "a fresh find-db must tune: " << first.output;
  const auto second = run_demo(cache.string());
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find(" 0 tuned now"), std::string::npos) << second.output;
  std::filesystem::remove_all(cache);
}

}  // namespace
