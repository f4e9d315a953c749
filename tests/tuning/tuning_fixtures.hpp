// Shared pieces of the tuning tests: fake cpu solvers with known speeds and switchable check(),
// temporary cache folders, and child processes running this test binary.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/tuning/tuner.hpp"

namespace galley::tuning::testing {

// Registered on the real "cpu" backend by this binary only (tuning_fixtures.cpp):
//   test.conv.fast   sleeps 1 ms per run, rank 1000 (after the real solvers)
//   test.conv.slow   sleeps 4 ms per run, rank 999 (before fast in list order)
//   test.conv.toggle busy-waits 0.2 ms, the fastest, but check() follows toggle_applicable()
//   test.conv.bigws  asks for 1 GiB of workspace
//   test.conv.ref    a reference solver (sleeps 1 ms)
//   test.conv.sleepy sleeps 40 ms (time-box tests)
//   test.conv.inner  a TunableSolver: configs "wait=1.5" (preferred), "wait=0.3", "wait=0.8", each
//                    busy-waiting that long; records the config each problem last ran with
//   test.conv.counted sleeps 2 ms and counts its check() calls
//   test.conv.twin_a, test.conv.twin_b busy-wait 2 ms each (a near-tie)
//   test.conv.slowprep sleeps 0.5 ms, rank 998 (first in list order); its first check() of a
//                    problem takes 150 ms (a vendor library's plan search)
//   test.conv.jittery busy-waits 0.5 ms on every third run and 3 ms on the others (a fast solver
//                    on a host where another process takes its core two samples in three)
//   test.conv.slowstart busy-waits 20 ms on its first two runs of each problem, 0.2 ms after (a
//                    fast solver whose first warm run still pays one-time costs)
// Each counts its runs.
inline constexpr const char* kFast = "test.conv.fast";
inline constexpr const char* kSlow = "test.conv.slow";
inline constexpr const char* kToggle = "test.conv.toggle";
inline constexpr const char* kBigWs = "test.conv.bigws";
inline constexpr const char* kRef = "test.conv.ref";
inline constexpr const char* kSleepy = "test.conv.sleepy";
inline constexpr const char* kInner = "test.conv.inner";
inline constexpr const char* kCounted = "test.conv.counted";
inline constexpr const char* kTwinA = "test.conv.twin_a";
inline constexpr const char* kTwinB = "test.conv.twin_b";
inline constexpr const char* kSlowPrep = "test.conv.slowprep";
inline constexpr const char* kFallback = "test.conv.fallback";  // a naive fallback (is_fallback), 0.5 ms
inline constexpr const char* kGlacial = "test.conv.glacial";    // 150 ms a run
inline constexpr const char* kJittery = "test.conv.jittery";
inline constexpr const char* kSlowStart = "test.conv.slowstart";

/// The config test.conv.inner last ran `problem_key` with ("" if never).
std::string inner_config_ran(const std::string& problem_key);
/// check() calls of test.conv.counted so far.
long checks_of_counted();

std::atomic<bool>& toggle_applicable();
/// Runs of a fake solver so far.
long runs_of(const std::string& name);

/// A small valid problem; `variant` changes the channel count so keys differ.
dnn::ConvProblem small_problem(int variant = 0);

runtime::Device cpu();

/// A fresh folder under the system temp dir, removed (recursively) at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Options for a tuner over `dir`/finddb.sqlite limited to `solvers`, with no system db.
TunerOptions options_in(const std::filesystem::path& dir, FindMode mode, std::vector<std::string> solvers);

/// Runs this test binary with `--gtest_filter=<filter>` and extra environment, returns the exit
/// code; stderr and stdout go to `output` when given. Spawned asynchronously by spawn(); wait() collects.
int spawn(const std::string& filter, const std::map<std::string, std::string>& env);
int wait_child(int pid, std::string* output = nullptr);
int run_child(const std::string& filter, const std::map<std::string, std::string>& env, std::string* output = nullptr);

}  // namespace galley::tuning::testing
