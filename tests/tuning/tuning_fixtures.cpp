#include "tuning_fixtures.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "galley/core/error.hpp"

extern char** environ;

namespace galley::tuning::testing {
namespace {

std::mutex g_runs_mutex;
std::map<std::string, long>& runs() {
  static std::map<std::string, long> r;
  return r;
}

class FakeSolver final : public dnn::ConvSolver {
 public:
  FakeSolver(std::string name, double sleep_ms, std::size_t workspace = 0, bool reference = false,
             bool toggled = false, bool spins = false)
      : name_(std::move(name)),
        sleep_ms_(sleep_ms),
        workspace_(workspace),
        reference_(reference),
        toggled_(toggled),
        spins_(spins) {}
  std::string_view name() const override { return name_; }
  dnn::Applicability check(const dnn::ConvProblem& p, const runtime::Device& d) const override {
    if (!d.is_cpu()) return dnn::Applicability::no("fake solvers run on cpu only");
    if (p.dtype != DType::f32) return dnn::Applicability::no("fake solvers take f32 only");
    if (toggled_ && !toggle_applicable().load()) return dnn::Applicability::no("switched off by the test");
    return dnn::Applicability::yes();
  }
  std::size_t workspace_bytes(const dnn::ConvProblem&, const runtime::Device&) const override { return workspace_; }
  void run(runtime::Stream& stream, const dnn::ConvProblem&, const dnn::ConvArgs& args) const override {
    if (workspace_ > 0 && args.workspace == nullptr) throw Error(Status::internal, name_ + ": no workspace given");
    {
      std::lock_guard lock(g_runs_mutex);
      ++runs()[name_];
    }
    const double ms = sleep_ms_;
    const bool spins = spins_;
    stream.launch(name_, [&stream, ms, spins] {
      stream.host_task([ms, spins] {
        const auto wait = std::chrono::duration<double, std::milli>(ms);
        if (!spins) {
          std::this_thread::sleep_for(wait);
          return;
        }
        // A busy wait lasts what it is asked to (a sleep overshoots by the scheduler's wake-up).
        const auto until = std::chrono::steady_clock::now() + wait;
        while (std::chrono::steady_clock::now() < until) {
        }
      });
    });
  }
  bool is_reference() const override { return reference_; }

 private:
  std::string name_;
  double sleep_ms_;
  std::size_t workspace_;
  bool reference_;
  bool toggled_;
  bool spins_;
};

std::atomic<long> g_counted_checks{0};

// test.conv.inner's inner choice: how long a run busy-waits, as text "wait=<ms>".
struct WaitConfig {
  double ms = 0;
  std::string to_string() const {
    std::ostringstream out;
    out << "wait=" << ms;
    return out.str();
  }
  static std::optional<WaitConfig> parse(std::string_view text) {
    constexpr std::string_view kPrefix = "wait=";
    if (text.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
    const std::string number(text.substr(kPrefix.size()));
    char* end = nullptr;
    const double ms = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !(ms > 0)) return std::nullopt;
    return WaitConfig{ms};
  }
  friend bool operator==(const WaitConfig&, const WaitConfig&) = default;
};

std::map<std::string, std::string>& configs_ran() {
  static std::map<std::string, std::string> m;
  return m;
}

// A solver with inner choices that the tuner searches (a TunableSolver): the one it prefers, run
// without a tuned choice, is the slowest, so only the search finds the fastest.
class InnerChoiceSolver final : public dnn::TunableSolver<dnn::ConvProblem, WaitConfig> {
 public:
  std::string_view name() const override { return kInner; }
  dnn::Applicability check(const dnn::ConvProblem& p, const runtime::Device& d) const override {
    return FakeSolver(kInner, 0).check(p, d);
  }
  std::vector<WaitConfig> candidates(const dnn::ConvProblem&, const runtime::Device&) const override {
    return {WaitConfig{1.5}, WaitConfig{0.3}, WaitConfig{0.8}};
  }
  void run(runtime::Stream& stream, const dnn::ConvProblem& p, const dnn::ConvArgs& args,
           const WaitConfig& config) const override {
    {
      std::lock_guard lock(g_runs_mutex);
      configs_ran()[p.key()] = config.to_string();
    }
    FakeSolver(kInner, config.ms, 0, false, false, true).run(stream, p, args);
  }
};

// Counts check() calls: a pick on a find-db hit must not check the runners-up.
class CountedSolver final : public dnn::ConvSolver {
 public:
  std::string_view name() const override { return kCounted; }
  dnn::Applicability check(const dnn::ConvProblem& p, const runtime::Device& d) const override {
    ++g_counted_checks;
    return base_.check(p, d);
  }
  void run(runtime::Stream& stream, const dnn::ConvProblem& p, const dnn::ConvArgs& args) const override {
    base_.run(stream, p, args);
  }

 private:
  FakeSolver base_{kCounted, 2.0};
};

// A check() that spends 150 ms the first time it sees a problem, as cuda.conv.cudnn_graph builds its
// graph and finalizes its engine plans.
class SlowPrepSolver final : public dnn::ConvSolver {
 public:
  std::string_view name() const override { return kSlowPrep; }
  dnn::Applicability check(const dnn::ConvProblem& p, const runtime::Device& d) const override {
    bool first = false;
    {
      std::lock_guard lock(g_runs_mutex);
      first = prepared_.insert(p.key()).second;
    }
    if (first) std::this_thread::sleep_for(std::chrono::milliseconds(150));
    return base_.check(p, d);
  }
  void run(runtime::Stream& stream, const dnn::ConvProblem& p, const dnn::ConvArgs& args) const override {
    base_.run(stream, p, args);
  }

 private:
  FakeSolver base_{kSlowPrep, 0.5};
  mutable std::set<std::string> prepared_;
};

// A naive fallback: fast here, so that only its flag can keep it out of the timing.
class FallbackSolver final : public dnn::ConvSolver {
 public:
  std::string_view name() const override { return kFallback; }
  bool is_fallback() const override { return true; }
  dnn::Applicability check(const dnn::ConvProblem& p, const runtime::Device& d) const override {
    return base_.check(p, d);
  }
  void run(runtime::Stream& stream, const dnn::ConvProblem& p, const dnn::ConvArgs& args) const override {
    base_.run(stream, p, args);
  }

 private:
  FakeSolver base_{kFallback, 0.5};
};

// Busy-waits 0.5 ms on every third of its runs and 3 ms on the others: what a loaded host makes of
// a 0.5 ms solver when another process takes its core for two samples in three.
class JitterySolver final : public dnn::ConvSolver {
 public:
  std::string_view name() const override { return kJittery; }
  dnn::Applicability check(const dnn::ConvProblem& p, const runtime::Device& d) const override {
    return FakeSolver(kJittery, 0).check(p, d);
  }
  void run(runtime::Stream& stream, const dnn::ConvProblem& p, const dnn::ConvArgs& args) const override {
    // FakeSolver counts the run under kJittery: this one's count comes first.
    const long count = runs_of(kJittery) + 1;
    FakeSolver(kJittery, count % 3 == 0 ? 0.5 : 3.0, 0, false, false, true).run(stream, p, args);
  }
};

// Busy-waits 20 ms on its first two runs of each problem (the cold run and the first warm one),
// 0.2 ms after: one-time costs that outlast the cold run.
class SlowStartSolver final : public dnn::ConvSolver {
 public:
  std::string_view name() const override { return kSlowStart; }
  dnn::Applicability check(const dnn::ConvProblem& p, const runtime::Device& d) const override {
    return FakeSolver(kSlowStart, 0).check(p, d);
  }
  void run(runtime::Stream& stream, const dnn::ConvProblem& p, const dnn::ConvArgs& args) const override {
    long seen = 0;
    {
      std::lock_guard lock(g_runs_mutex);
      seen = ++runs_by_problem_[p.key()];
    }
    FakeSolver(kSlowStart, seen <= 2 ? 20.0 : 0.2, 0, false, false, true).run(stream, p, args);
  }

 private:
  mutable std::map<std::string, long> runs_by_problem_;
};

// Appended to the cpu list after ref.conv.direct; tests name the solvers they want (only_solvers),
// and this order is what they see among these.
const bool g_registered = [] {
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(std::make_unique<SlowPrepSolver>());
  list.push_back(std::make_unique<FakeSolver>(kSlow, 4.0, 1024));
  list.push_back(std::make_unique<FakeSolver>(kFast, 1.0));
  // A busy wait: a 0.2 ms sleep woke after test.conv.fast's 1 ms one on a loaded 2-core host (ASan).
  list.push_back(std::make_unique<FakeSolver>(kToggle, 0.2, 0, false, true, true));
  list.push_back(std::make_unique<FakeSolver>(kBigWs, 0.1, std::size_t{1} << 30));
  list.push_back(std::make_unique<FakeSolver>(kSleepy, 40.0));
  list.push_back(std::make_unique<InnerChoiceSolver>());
  list.push_back(std::make_unique<CountedSolver>());
  list.push_back(std::make_unique<FakeSolver>(kTwinA, 2.0, 0, false, false, true));
  list.push_back(std::make_unique<FakeSolver>(kTwinB, 2.0, 0, false, false, true));
  list.push_back(std::make_unique<FallbackSolver>());
  list.push_back(std::make_unique<FakeSolver>(kGlacial, 150.0));
  list.push_back(std::make_unique<JitterySolver>());
  list.push_back(std::make_unique<SlowStartSolver>());
  list.push_back(std::make_unique<FakeSolver>(kRef, 1.0, 0, true));
  dnn::register_solvers("cpu", dnn::OpKind::conv, std::move(list));
  return true;
}();

}  // namespace

std::atomic<bool>& toggle_applicable() {
  static std::atomic<bool> on{true};
  return on;
}

std::string inner_config_ran(const std::string& problem_key) {
  std::lock_guard lock(g_runs_mutex);
  const auto it = configs_ran().find(problem_key);
  return it == configs_ran().end() ? std::string() : it->second;
}

long checks_of_counted() { return g_counted_checks.load(); }

long runs_of(const std::string& name) {
  std::lock_guard lock(g_runs_mutex);
  return runs()[name];
}

dnn::ConvProblem small_problem(int variant) {
  return dnn::ConvProblem{.n = 1, .c = 4 + variant, .h = 8, .w = 8, .k = 4, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1};
}

runtime::Device cpu() { return runtime::device("cpu"); }

TempDir::TempDir() {
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() /
          ("galley-tuning-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

TunerOptions options_in(const std::filesystem::path& dir, FindMode mode, std::vector<std::string> solvers) {
  TunerOptions o;
  o.find.mode = mode;
  o.find.time_box_ms = 5000;
  o.db_paths.user = dir / "finddb.sqlite";
  o.workspace_limit = std::size_t{64} << 20;
  o.only_solvers = std::move(solvers);
  return o;
}

namespace {
std::mutex g_children_mutex;
std::map<int, std::string> g_child_logs;
}  // namespace

int spawn(const std::string& filter, const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : merged) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string filter_arg = "--gtest_filter=" + filter;
  std::string quiet = "--gtest_brief=1";
  std::vector<char*> argv = {const_cast<char*>(exe.c_str()), filter_arg.data(), quiet.data(), nullptr};

  static std::atomic<int> counter{0};
  const std::string log = (std::filesystem::temp_directory_path() /
                           ("galley-tuning-child-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
                              .string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  std::lock_guard lock(g_children_mutex);
  g_child_logs[pid] = log;
  return pid;
}

int wait_child(int pid, std::string* output) {
  int status = 0;
  if (pid <= 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  std::string log;
  {
    std::lock_guard lock(g_children_mutex);
    log = g_child_logs[pid];
    g_child_logs.erase(pid);
  }
  if (output != nullptr) {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    *output = ss.str();
  }
  std::error_code ec;
  std::filesystem::remove(log, ec);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run_child(const std::string& filter, const std::map<std::string, std::string>& env, std::string* output) {
  return wait_child(spawn(filter, env), output);
}

}  // namespace galley::tuning::testing
