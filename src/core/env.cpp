// The GALLEY_* table, each variable's parser, and the process's configuration snapshot.
#include "galley/core/env.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "galley/core/error.hpp"

extern char** environ;  // POSIX; listed to report GALLEY_* names nothing declares

namespace galley::env {
namespace {

// Parses one variable's text into `out`; throws Error(invalid_argument) naming the variable, the
// value and what is valid. Only called for variables that are set.
using Parser = void (*)(std::string_view name, const std::string& value, Config& out);

struct Entry {
  Variable variable;
  Parser parse;
};

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

[[noreturn]] void invalid(std::string_view name, const std::string& value, std::string_view valid) {
  throw Error(Status::invalid_argument,
              std::string(name) + "='" + value + "' is not valid (valid: " + std::string(valid) + ")");
}

bool parse_flag(std::string_view name, const std::string& value) {
  const std::string v = lower(trim(value));
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v.empty() || v == "0" || v == "false" || v == "no" || v == "off") return false;
  invalid(name, value, "1, 0, true, false, yes, no, on, off");
}

// One of `choices` (case-insensitive, surrounding blanks ignored); empty text means the default.
std::string parse_choice(std::string_view name, const std::string& value,
                         std::initializer_list<std::string_view> choices) {
  const std::string v = lower(trim(value));
  if (v.empty()) return v;
  for (std::string_view choice : choices) {
    if (v == choice) return v;
  }
  std::string valid;
  for (std::string_view choice : choices) valid += (valid.empty() ? "" : ", ") + std::string(choice);
  invalid(name, value, valid);
}

// A decimal integer in [low, high], nothing else (no sign for positives, no blanks, no suffix).
std::optional<long long> parse_integer(std::string_view text, long long low, long long high) {
  long long n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < low || n > high) return {};
  return n;
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const auto at = text.find(separator, start);
    parts.emplace_back(
        text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

// "cpu", "cuda", "hip", optionally ":N"; whether such a device exists is the registry's answer.
bool is_device_name(const std::string& text) {
  const auto colon = text.find(':');
  const std::string backend = text.substr(0, colon);
  if (backend != "cpu" && backend != "cuda" && backend != "hip") return false;
  return colon == std::string::npos ||
         parse_integer(std::string_view(text).substr(colon + 1), 0, 99999).has_value();
}

void parse_device(std::string_view name, const std::string& value, Config& out) {
  const std::string v = trim(value);
  if (!v.empty() && !is_device_name(v)) invalid(name, value, "cpu, cuda, cuda:N, hip, hip:N");
  out.device = v;
}

void parse_visible_devices(std::string_view name, const std::string& value, Config& out) {
  std::vector<std::string> entries;
  for (const auto& part : split(value, ',')) {
    const std::string item = trim(part);
    if (item.empty()) continue;
    if (!is_device_name(item)) {
      throw Error(Status::invalid_argument,
                  std::string(name) + "='" + value + "': entry '" + item +
                      "' is not a device (valid: comma list of cuda, cuda:N, hip, hip:N, cpu)");
    }
    entries.push_back(item);
  }
  out.visible_devices = std::move(entries);
}

void parse_plugin_path(std::string_view, const std::string& value, Config& out) {
  out.plugin_path.clear();
  for (auto& folder : split(value, ':')) {
    if (!folder.empty()) out.plugin_path.push_back(std::move(folder));
  }
}

void parse_log_level(std::string_view name, const std::string& value, Config& out) {
  constexpr std::string_view kLevels[] = {"error", "warn", "info", "debug", "trace"};
  const std::string v = parse_choice(name, value, {"error", "warn", "info", "debug", "trace"});
  if (v.empty()) return;
  out.log_level =
      static_cast<int>(std::find(std::begin(kLevels), std::end(kLevels), v) - std::begin(kLevels));
}

void parse_log_cmd(std::string_view name, const std::string& value, Config& out) {
  out.log_cmd = parse_flag(name, value);
}

void parse_launch_blocking(std::string_view name, const std::string& value, Config& out) {
  out.launch_blocking = parse_flag(name, value);
}

void parse_find_mode(std::string_view name, const std::string& value, Config& out) {
  out.find_mode = parse_choice(name, value, {"normal", "fast", "hybrid", "off"});
}

void parse_find_enforce(std::string_view name, const std::string& value, Config& out) {
  out.find_enforce_search = parse_choice(name, value, {"none", "search"}) == "search";
}

void parse_find_time(std::string_view name, const std::string& value, Config& out) {
  const std::string v = trim(value);
  if (v.empty()) return;
  double ms = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), ms);
  if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(ms) || ms <= 0) {
    invalid(name, value, "a positive number of milliseconds");
  }
  out.find_time_ms = ms;
}

void parse_cache_dir(std::string_view, const std::string& value, Config& out) { out.cache_dir = value; }

void parse_alloc_conf(std::string_view, const std::string& value, Config& out) { out.alloc_conf = value; }

void parse_no_caching(std::string_view name, const std::string& value, Config& out) {
  out.no_caching = parse_flag(name, value);
}

void parse_cuda_graphs(std::string_view name, const std::string& value, Config& out) {
  out.cuda_graphs = value.empty() || parse_flag(name, value);
}

void parse_num_threads(std::string_view name, const std::string& value, Config& out) {
  if (value.empty()) return;
  const auto n = parse_integer(value, 1, 4096);
  if (!n) invalid(name, value, "a thread count 1..4096");
  out.num_threads = static_cast<int>(*n);
}

void parse_cpu_isa(std::string_view name, const std::string& value, Config& out) {
  out.cpu_isa = parse_choice(name, value, {"scalar", "avx2", "avx512"});
}

void parse_igemm_tc_plan(std::string_view name, const std::string& value, Config& out) {
  if (value.empty()) return;
  const auto colon = value.find(':');
  const auto tile = parse_integer(std::string_view(value).substr(0, colon), 0, 1023);
  const auto splits = colon == std::string::npos
                          ? std::nullopt
                          : parse_integer(std::string_view(value).substr(colon + 1), 1, 64);
  if (!tile || !splits) invalid(name, value, "tile:splits, tile a plan index >= 0, splits 1..64");
  out.debug_igemm_tc_plan = std::pair{static_cast<int>(*tile), static_cast<int>(*splits)};
}

void parse_igemm_tc_tune(std::string_view name, const std::string& value, Config& out) {
  out.debug_igemm_tc_tune = value.empty() || parse_flag(name, value);
}

void parse_bwd_weights_wgmma(std::string_view name, const std::string& value, Config& out) {
  out.debug_bwd_weights_wgmma = value.empty() || parse_flag(name, value);
}

void parse_3xtf32(std::string_view name, const std::string& value, Config& out) {
  out.debug_3xtf32 = value.empty() || parse_flag(name, value);
}

void parse_bwd_data_phases(std::string_view name, const std::string& value, Config& out) {
  out.debug_bwd_data_phases = value.empty() || parse_flag(name, value);
}

void parse_gemm_wgmma(std::string_view name, const std::string& value, Config& out) {
  out.debug_gemm_wgmma = value.empty() || parse_flag(name, value);
}

#ifndef GALLEY_PROFILER
#define GALLEY_PROFILER 1
#endif
// A build configured with -DGALLEY_PROFILER=OFF has no tracer hooks to turn on.
constexpr bool kProfilerBuilt = GALLEY_PROFILER != 0;

// The path is checked by the profile layer's validator (a writable file in an existing folder).
// Blanks alone mean off, as `NAME=` does; a path is taken as written.
void parse_profile(std::string_view name, const std::string& value, Config& out) {
  out.profile = trim(value).empty() ? std::string() : value;
  if (!kProfilerBuilt && !out.profile.empty()) {
    throw Error(Status::unsupported, std::string(name) + "='" + value +
                                         "' is set, but this build has no profiler (configured with "
                                         "-DGALLEY_PROFILER=OFF); unset it or use a build with the profiler");
  }
}

void parse_profile_device_times(std::string_view name, const std::string& value, Config& out) {
  out.profile_device_times = parse_choice(name, value, {"events", "cupti", "host"});
  if (!kProfilerBuilt && !out.profile_device_times.empty()) {
    throw Error(Status::unsupported, std::string(name) + "='" + value +
                                         "' is set, but this build has no profiler (configured with "
                                         "-DGALLEY_PROFILER=OFF)");
  }
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = {
      {{"GALLEY_DEVICE", "default device (cpu, cuda:0, hip:0)", "first GPU, else cpu"}, parse_device},
      {{"GALLEY_VISIBLE_DEVICES",
        "comma list of GPU devices or backends to expose (cuda:0,hip); cpu is always visible", "all"},
       parse_visible_devices},
      {{"GALLEY_PLUGIN_PATH", "colon list of folders searched for backend plugins before libgalley's own",
        "(unset)"},
       parse_plugin_path},
      {{"GALLEY_LOG_LEVEL", "error|warn|info|debug|trace", "warn"}, parse_log_level},
      {{"GALLEY_LOG_CMD", "1: print the `galley bench` command reproducing each op", "0"}, parse_log_cmd},
      {{"GALLEY_LAUNCH_BLOCKING", "1: synchronise after every op and name the op that failed", "0"},
       parse_launch_blocking},
      {{"GALLEY_FIND_MODE", "normal|fast|hybrid|off: how solvers are chosen on a find-db miss", "hybrid"},
       parse_find_mode},
      {{"GALLEY_FIND_ENFORCE", "none|search: search re-tunes even on a find-db hit", "none"},
       parse_find_enforce},
      {{"GALLEY_FIND_TIME_MS", "time box for tuning one problem, in milliseconds (> 0)", "2000"},
       parse_find_time},
      {{"GALLEY_CACHE_DIR", "find-db and kernel cache folder", "$XDG_CACHE_HOME/galley or ~/.cache/galley"},
       parse_cache_dir},
      {{"GALLEY_ALLOC_CONF",
        "caching allocator settings key:value,... (max_split_mb, max_non_split_rounding_mb, "
        "roundup_power2_divisions, memory_fraction, snapshot_on_oom; keys listed below)",
        "(unset)"},
       parse_alloc_conf},
      {{"GALLEY_NO_CACHING", "1: allocator passes straight to the backend (for memory checkers)", "0"},
       parse_no_caching},
      {{"GALLEY_CUDA_GRAPHS",
        "0: cuDNN graph-API and cuBLAS conv calls are never replayed as CUDA graphs (they are from a pointer "
        "set's third call)",
        "1"},
       parse_cuda_graphs},
      {{"GALLEY_PROFILE",
        "FILE.json: trace every op, launch, copy, allocation and tuner pick and write a Chrome/Perfetto "
        "trace there at exit (see `galley prof`)",
        "(unset: off)", kProfilerBuilt},
       parse_profile},
      {{"GALLEY_PROFILE_DEVICE_TIMES",
        "events|cupti|host: where a traced launch's device span comes from on cuda: an event pair recorded "
        "around each launch, or CUPTI's kernel records (no events; falls back to events where CUPTI does not "
        "run); host: host spans only, no device spans or kernel records on any device (the lowest cost)",
        "cupti", kProfilerBuilt},
       parse_profile_device_times},
      {{"GALLEY_NUM_THREADS", "threads in the cpu backend's pool (1..4096)", "hardware threads"},
       parse_num_threads},
      {{"GALLEY_CPU_ISA", "highest cpu kernel level: scalar|avx2|avx512 (like oneDNN's DNNL_MAX_CPU_ISA)",
        "all the CPU has"},
       parse_cpu_isa},
      {{"GALLEY_DEBUG_IGEMM_TC_PLAN",
        "development: tile:splits forces gpu.conv.igemm_tc's plan (tile sweeps on a GPU)", "(unset: tuned)"},
       parse_igemm_tc_plan},
      {{"GALLEY_DEBUG_IGEMM_TC_TUNE",
        "development: 0 lists only gpu.conv.igemm_tc's cost-model plan to the tuner (no tile search)", "1"},
       parse_igemm_tc_tune},
      {{"GALLEY_DEBUG_BWD_WEIGHTS_WGMMA",
        "development: 0 keeps gpu.conv.bwd_weights_igemm's Hopper wgmma tiles from the planner and the tuner "
        "(mma.sync tiles only)",
        "1"},
       parse_bwd_weights_wgmma},
      {{"GALLEY_DEBUG_3XTF32",
        "development: 0 keeps f32 off the tensor cores in gpu.gemm.tc and the backward implicit GEMMs "
        "(gpu.conv.bwd_data_igemm, bwd_weights_igemm), which otherwise run it as 3xTF32",
        "1"},
       parse_3xtf32},
      {{"GALLEY_DEBUG_BWD_DATA_PHASES",
        "development: 0 runs strided backward-data through the forward solvers on a spread dy instead of "
        "as stride phases (one unit-stride convolution per phase)",
        "1"},
       parse_bwd_data_phases},
      {{"GALLEY_DEBUG_GEMM_WGMMA",
        "development: 0 keeps gpu.gemm.tc's Hopper wgmma tiles (f16/bf16) from the tuner's candidates, "
        "leaving its mma.sync tiles",
        "1"},
       parse_gemm_wgmma},
  };
  return table;
}

std::mutex& validators_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::map<std::string, Validator, std::less<>>& validators() {
  static std::map<std::string, Validator, std::less<>> registered;
  return registered;
}

// Parses one set variable into `out`; returns the problem, empty when valid.
std::string apply(const Entry& entry, const std::string& value, Config& out) {
  try {
    entry.parse(entry.variable.name, value, out);
    Validator validate = nullptr;
    {
      std::lock_guard lock(validators_mutex());
      const auto it = validators().find(entry.variable.name);
      if (it != validators().end()) validate = it->second;
    }
    if (validate != nullptr && !value.empty()) validate(value);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

struct Snapshot {
  Config config;
  std::string error;  // every invalid variable, one per line; empty when all are valid
  Status status = Status::ok;
};

const Snapshot* read_environment() {
  auto snapshot = std::make_unique<Snapshot>();
  for (const Entry& entry : entries()) {
    const char* value = std::getenv(std::string(entry.variable.name).c_str());
    if (value == nullptr) continue;
    const std::string problem = apply(entry, value, snapshot->config);
    if (problem.empty()) continue;
    // unsupported (a feature this build lacks) only when nothing is plainly malformed.
    const Status status = entry.variable.implemented ? Status::invalid_argument : Status::unsupported;
    if (snapshot->status == Status::ok || status == Status::invalid_argument) snapshot->status = status;
    snapshot->error += (snapshot->error.empty() ? "" : "\n") + problem;
  }
  return snapshot.release();
}

// Snapshots are never freed: a reader may hold a reference to one across a test's reload, and
// only reload_for_testing() ever replaces one.
std::atomic<const Snapshot*> g_snapshot{nullptr};

const Snapshot& snapshot() {
  const Snapshot* current = g_snapshot.load(std::memory_order_acquire);
  if (current != nullptr) return *current;
  const Snapshot* fresh = read_environment();
  if (g_snapshot.compare_exchange_strong(current, fresh, std::memory_order_acq_rel)) return *fresh;
  delete fresh;  // another thread read it first; both read the same environment
  return *current;
}

}  // namespace

const std::vector<Variable>& variables() {
  static const std::vector<Variable> table = [] {
    std::vector<Variable> out;
    for (const Entry& entry : entries()) out.push_back(entry.variable);
    return out;
  }();
  return table;
}

std::vector<Setting> settings() {
  std::vector<Setting> out;
  for (const Entry& entry : entries()) {
    Setting s{std::string(entry.variable.name), std::nullopt, {}, true};
    if (const char* value = std::getenv(s.name.c_str()); value != nullptr) {
      s.value = value;
      Config scratch;
      s.problem = apply(entry, *s.value, scratch);
    }
    out.push_back(std::move(s));
  }
  for (char** item = environ; item != nullptr && *item != nullptr; ++item) {
    const std::string_view text(*item);
    if (!text.starts_with("GALLEY_")) continue;
    const auto equals = text.find('=');
    const std::string name(text.substr(0, equals));
    const auto& table = entries();
    if (std::any_of(table.begin(), table.end(), [&](const Entry& e) { return e.variable.name == name; }))
      continue;
    // Development knobs carry a GALLEY_DEBUG_ prefix; an old name without it gets pointed there.
    const std::string debug_name = "GALLEY_DEBUG_" + name.substr(7);
    const bool renamed = std::any_of(table.begin(), table.end(),
                                     [&](const Entry& e) { return e.variable.name == debug_name; });
    out.push_back(
        {name, equals == std::string_view::npos ? "" : std::string(text.substr(equals + 1)),
         "not a Galley variable; ignored" + (renamed ? "; did you mean " + debug_name + "?" : std::string()),
         false});
  }
  return out;
}

void check() {
  const Snapshot& s = snapshot();
  if (!s.error.empty()) throw Error(s.status, s.error);
}

const Config& config() {
  const Snapshot& s = snapshot();
  if (!s.error.empty()) throw Error(s.status, s.error);
  return s.config;
}

bool register_validator(std::string_view name, Validator validate) {
  std::lock_guard lock(validators_mutex());
  validators()[std::string(name)] = validate;
  return true;
}

namespace {

// Snapshots replaced by reload_for_testing(): alive (a reader may hold one) and reachable, so leak
// checkers do not count them.
struct Retired {
  std::mutex mutex;
  std::vector<std::unique_ptr<const Snapshot>> snapshots;
};

Retired& retired() {
  static Retired& r = *new Retired();
  return r;
}

}  // namespace

void reload_for_testing() {
  const Snapshot* old = g_snapshot.exchange(read_environment(), std::memory_order_acq_rel);
  if (old == nullptr) return;
  Retired& r = retired();
  std::lock_guard lock(r.mutex);
  r.snapshots.emplace_back(old);
}

void release_retired_for_testing() {
  Retired& r = retired();
  std::lock_guard lock(r.mutex);
  r.snapshots.clear();
}

}  // namespace galley::env
