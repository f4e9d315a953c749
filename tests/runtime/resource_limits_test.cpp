// The galley CLI as a child process under faults: bad GALLEY_* values that used to fail after work
// was queued (and crash while unwinding), a thread limit that used to hang the pool's construction,
// and a stream fed faster than it runs (memory must stay flat). Every run has a timeout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "common/run_command.hpp"

namespace galley::runtime {
namespace {

const std::string kGalley = std::string(GALLEY_TEST_BIN_DIR) + "/galley";

bool killed_by_signal_or_timeout(const galley::testing::CommandResult& r) {
  // run_command gives -1 for a signal; timeout(1) exits 124 (137 after its KILL).
  return r.exit_code == -1 || r.exit_code == 124 || r.exit_code == 137 || r.exit_code >= 128;
}

TEST(BadEnvironment, EveryCaseOfTheIssueFailsBeforeWorkWithANamedError) {
  struct Case {
    const char* env;
    const char* args;
    const char* named;  // what the message must quote
  };
  const Case cases[] = {
      {"GALLEY_LAUNCH_BLOCKING=2", "bench transfer --sizes 64M --repeats 2", "GALLEY_LAUNCH_BLOCKING='2'"},
      {"GALLEY_LAUNCH_BLOCKING=2", "demo", "GALLEY_LAUNCH_BLOCKING='2'"},
      {"GALLEY_FIND_TIME_MS=abc", "demo", "GALLEY_FIND_TIME_MS='abc'"},
      {"GALLEY_FIND_ENFORCE=yes", "demo", "GALLEY_FIND_ENFORCE='yes'"},
      {"GALLEY_FIND_MODE=turbo", "demo", "GALLEY_FIND_MODE='turbo'"},
      {"GALLEY_LOG_CMD=maybe", "demo", "GALLEY_LOG_CMD='maybe'"},
      {"GALLEY_LOG_CMD=maybe", "info", "GALLEY_LOG_CMD='maybe'"},
      {"GALLEY_LAUNCH_BLOCKING=2", "bench conv -n 8 -c 64 -H 56 -W 56 -k 64 -V 1",
       "GALLEY_LAUNCH_BLOCKING='2'"},
      {"GALLEY_PROFILE=/nonexistent-galley-folder/trace.json", "info",
       "GALLEY_PROFILE='/nonexistent-galley-folder/trace.json'"},
      {"GALLEY_NUM_THREADS=lots", "info", "GALLEY_NUM_THREADS='lots'"},
  };
  for (const auto& c : cases) {
    // Three runs each: the crash this replaces was intermittent (4-10 of 10).
    for (int run = 0; run < 3; ++run) {
      const auto r = galley::testing::run_command(std::string("env ") + c.env + " timeout -s KILL 120 " +
                                                  kGalley + " " + c.args + " 2>&1");
      ASSERT_FALSE(killed_by_signal_or_timeout(r))
          << c.env << " galley " << c.args << ": exit " << r.exit_code << "\n"
          << r.output;
      EXPECT_EQ(r.exit_code, 1) << c.env << " galley " << c.args << "\n" << r.output;
      EXPECT_NE(r.output.find("galley: error"), std::string::npos) << r.output;
      EXPECT_NE(r.output.find(c.named), std::string::npos) << r.output;
    }
  }
}

TEST(BadEnvironment, InfoEnvListsEveryVariableAndMarksTheInvalidOnes) {
  const auto r =
      galley::testing::run_command("env GALLEY_FIND_MODE=turbo GALLEY_NUM_THREADS=4 timeout -s KILL 60 " +
                                   kGalley + " info --env --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"GALLEY_DEBUG_IGEMM_TC_PLAN\""), std::string::npos) << r.output;
  const auto turbo = r.output.find("\"turbo\"");
  ASSERT_NE(turbo, std::string::npos) << r.output;
  const auto row_end = r.output.find('}', turbo);
  const std::string row = r.output.substr(r.output.rfind('{', turbo), row_end - r.output.rfind('{', turbo));
  EXPECT_NE(row.find("\"valid\": false"), std::string::npos) << row;
  EXPECT_NE(row.find("normal, fast, hybrid, off"), std::string::npos) << row;
  const auto table = galley::testing::run_command("env GALLEY_FIND_MODE=turbo timeout -s KILL 60 " + kGalley +
                                                  " info --env 2>&1");
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("turbo  INVALID"), std::string::npos) << table.output;
}

TEST(ThreadLimit, InfoAndTransferFinishWhenThreadsCannotBeCreated) {
  // RLIMIT_NPROC does not bind root, so as root the command runs as nobody, whose few processes
  // leave room for some of the 64 threads asked for, not all.
  std::string prefix;
  if (::geteuid() == 0) {
    if (galley::testing::run_command("command -v setpriv").exit_code != 0)
      GTEST_SKIP() << "no setpriv to drop root";
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  } else {
    GTEST_SKIP()
        << "needs root (setpriv) to run with a private process count; `ulimit -u` counts all the user's";
  }
  // The cpu device: its streams and pool are what need the threads (a GPU default device would not).
  for (const char* args : {"info", "bench transfer --device cpu --sizes 1M --repeats 1"}) {
    const auto r =
        galley::testing::run_command("timeout -s KILL 60 " + prefix + "bash -c 'ulimit -u 30; " +
                                     "GALLEY_NUM_THREADS=64 exec " + kGalley + " " + args + "' 2>&1");
    if (r.exit_code == 126 || r.exit_code == 127) GTEST_SKIP() << "nobody cannot run " << kGalley << ": " << r.output;
    ASSERT_FALSE(killed_by_signal_or_timeout(r))
        << "galley " << args << " hung or crashed: exit " << r.exit_code << "\n"
        << r.output;
    EXPECT_NE(r.output.find("could not start thread"), std::string::npos) << r.output;
    if (r.exit_code != 0) {
      // A stream that gets no worker thread is an Error naming the limit, not a crash.
      EXPECT_NE(r.output.find("galley: error (backend_error): cpu stream: cannot start its worker thread"),
                std::string::npos)
          << r.output;
    }
  }
}

TEST(StreamBackpressure, ABenchmarkWithEndlessIterationsKeepsItsMemoryFlat) {
  // Without a bound the cpu stream's queue grows by tens of MB per second for as long as the run
  // lasts; with it the resident set levels off once the allocator's arenas are warm. So the test
  // compares the peak at 3 s with the peak at 6 s (the run, the most iterations -i allows, is
  // stopped then), rather than with a fixed size: the cuda and hip plugins alone map and touch
  // about 160 MB of vendor libraries where they are built.
  const std::string command = "bash -c '" + kGalley +
                              " bench conv -n 1 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 --device cpu --solver ref.conv.direct"
                              " -i 1000000 >/dev/null 2>&1 & pid=$!; sleep 3; "
                              "grep VmHWM /proc/$pid/status; sleep 3; grep VmHWM /proc/$pid/status; kill -9 $pid'";
  const auto r = galley::testing::run_command(command);
  const auto first = r.output.find("VmHWM:");
  ASSERT_NE(first, std::string::npos) << "the benchmark exited early: " << r.output;
  const auto second = r.output.find("VmHWM:", first + 6);
  ASSERT_NE(second, std::string::npos) << "the benchmark exited early: " << r.output;
  const long at_3s = std::stol(r.output.substr(first + 6)), at_6s = std::stol(r.output.substr(second + 6));
  EXPECT_LT(at_6s - at_3s, 24 * 1024) << "peak resident set grew from " << at_3s << " to " << at_6s
                                       << " KiB in 3 s";
  EXPECT_LT(at_6s, 512 * 1024) << "peak resident set " << at_6s << " KiB (plugins and their vendor libraries included)";
}

}  // namespace
}  // namespace galley::runtime
