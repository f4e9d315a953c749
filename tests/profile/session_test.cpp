// GALLEY_PROFILE as a program sees it, and `galley prof` as a user runs it: a bad path is a named
// Error before any work, a trace is written at exit, an unwritable trace is a warning.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/run_command.hpp"
#include "common/scoped_env.hpp"
#include "core/config.hpp"
#include "galley/core/env.hpp"
#include "galley/core/error.hpp"
#include "profile/chrome_trace.hpp"
#include "trace_check.hpp"

namespace galley::profile {
namespace {

const std::string kGalley = std::string(GALLEY_TEST_BIN_DIR) + "/galley";
const std::string kSmallConv = "bench conv -n 1 -c 8 -H 12 -W 12 -k 8 -y 3 -x 3 -p 1 -q 1 --device cpu -i 3";

std::filesystem::path scratch(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("galley-profile-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

std::string read(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

void expect_check_names(const std::string& value, const std::string& why) {
  testing::ScopedEnv profile("GALLEY_PROFILE", value.c_str());
  try {
    env::check();
    ADD_FAILURE() << "GALLEY_PROFILE=" << value << " accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("GALLEY_PROFILE='" + value + "'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(ProfileSession, BadTracePathsAreNamedErrors) {
  expect_check_names("/nonexistent-galley-folder/trace.json", "does not exist");
  expect_check_names(std::filesystem::temp_directory_path().string(), "is a folder");
  if (::geteuid() != 0) {  // root writes anywhere
    const auto locked = scratch("locked");
    std::filesystem::create_directories(locked);
    ::chmod(locked.c_str(), 0500);
    expect_check_names((locked / "trace.json").string(), "is not writable");
    ::chmod(locked.c_str(), 0700);
  }
}

TEST(ProfileSession, BlanksMeanOff) {
  testing::ScopedEnv profile("GALLEY_PROFILE", "  ");
  EXPECT_NO_THROW(env::check());
  EXPECT_EQ(env::config().profile, "");
}

TEST(ProfileSession, AWritableTracePathIsAccepted) {
  const std::string path = scratch("ok.json").string();
  testing::ScopedEnv profile("GALLEY_PROFILE", path.c_str());
  EXPECT_NO_THROW(env::check());
  EXPECT_EQ(env::config().profile, path);
  const auto& table = env::variables();
  const auto entry =
      std::find_if(table.begin(), table.end(), [](const auto& v) { return v.name == "GALLEY_PROFILE"; });
  ASSERT_NE(entry, table.end());
  EXPECT_TRUE(entry->implemented);
}

TEST(ProfileSession, AFailedWriteIsAnErrorAndLeavesNoFile) {
  try {
    write_chrome_trace("/nonexistent-galley-folder/trace.json", {}, 0);
    ADD_FAILURE() << "written";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::io_error);
    EXPECT_NE(std::string(e.what()).find("/nonexistent-galley-folder/trace.json"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists("/nonexistent-galley-folder"));
}

TEST(ProfileSession, GalleyProfileWritesATraceOfABenchRunAtExit) {
  const auto path = scratch("bench.json");
  std::filesystem::remove(path);
  const auto r = galley::testing::run_command("GALLEY_PROFILE=" + path.string() + " timeout -s KILL 120 " +
                                              kGalley + " " + kSmallConv + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(std::filesystem::exists(path)) << r.output;
  const auto trace = test::check_chrome_trace(read(path));
  EXPECT_FALSE(test::events_where(trace, "X", "kernel").empty());
  EXPECT_FALSE(test::events_where(trace, "X", "tune").empty());
  EXPECT_FALSE(test::events_where(trace, "C", "memory").empty());
  EXPECT_EQ(trace["otherData"]["dropped_records"], 0);
  for (const auto& entry : std::filesystem::directory_iterator(path.parent_path()))
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos)
        << "temporary file left: " << entry.path();
}

TEST(ProfileSession, AnUnwritableTraceAtExitIsAWarningNotACrash) {
  // The folder exists when the variable is checked and is gone when the trace is written.
  const auto folder = scratch("vanishing");
  std::filesystem::create_directories(folder);
  const auto path = folder / "trace.json";
  const auto r = galley::testing::run_command(
      "GALLEY_PROFILE=" + path.string() + " timeout -s KILL 120 sh -c '" + kGalley +
      " bench conv -n 4 -c 32 -H 56 -W 56 -k 32 --device cpu -i 400 & sleep 0.5; rmdir " + folder.string() +
      "; wait $!' 2>&1");
  if (std::filesystem::exists(folder)) GTEST_SKIP() << "the run ended before the folder was removed";
  if (r.output.find("does not exist") != std::string::npos)
    GTEST_SKIP() << "the folder was removed before the check";
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("galley: warning: GALLEY_PROFILE: cannot write the trace"), std::string::npos)
      << r.output;
}

TEST(GalleyProf, SummaryOfABenchRunMatchesItsTrace) {
  const auto path = scratch("prof.json");
  const auto r = galley::testing::run_command("timeout -s KILL 120 " + kGalley + " prof --out " +
                                              path.string() + " --summary -- " + kSmallConv + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("trace written to " + path.string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("T_total"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sum(T_gap)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cpu.conv."), std::string::npos) << r.output;
  test::check_chrome_trace(read(path));
  const auto again = galley::testing::run_command(kGalley + " prof --in " + path.string() + " 2>&1");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("T_total"), std::string::npos) << again.output;
}

TEST(GalleyProf, ExitCodeOfTheCommandIsKept) {
  const auto path = scratch("failing.json");
  const auto r = galley::testing::run_command(kGalley + " prof --out " + path.string() +
                                              " -- bench conv -n 0 --device cpu 2>&1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("galley: error"), std::string::npos) << r.output;
}

TEST(GalleyProf, BadUseIsANamedError) {
  struct Case {
    std::string args, named;
  };
  const Case cases[] = {
      {"prof --out /tmp/x.json", "needs a galley command after '--'"},
      {"prof -- info", "needs --out"},
      {"prof --out /nonexistent-galley-folder/t.json -- info", "--out='/nonexistent-galley-folder/t.json'"},
      {"prof --out /tmp/x.json -- prof --out /tmp/y.json -- info", "cannot profile 'prof'"},
      {"prof --in /nonexistent-galley-folder/t.json", "--in"},
      {"prof --in /tmp/a.json --out /tmp/b.json", "takes no --out"},
  };
  for (const auto& c : cases) {
    const auto r = galley::testing::run_command(kGalley + " " + c.args + " 2>&1");
    EXPECT_NE(r.exit_code, 0) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find("galley: error"), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.named), std::string::npos) << c.args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace galley::profile
