#include "galley/core/env.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include "galley/core/error.hpp"

namespace galley::env {

const std::vector<Variable>& variables() {
  static const std::vector<Variable> table = {
      {"GALLEY_DEVICE", "default device (cpu, cuda:0, hip:0)", "first GPU, else cpu"},
      {"GALLEY_VISIBLE_DEVICES",
       "comma list of GPU devices or backends to expose (cuda:0,hip); cpu is always visible", "all"},
      {"GALLEY_PLUGIN_PATH", "colon list of folders searched for backend plugins before libgalley's own",
       "(unset)"},
      {"GALLEY_LOG_LEVEL", "error|warn|info|debug|trace", "warn"},
      {"GALLEY_LOG_CMD", "1: print the `galley bench` command reproducing each op", "0"},
      {"GALLEY_LAUNCH_BLOCKING", "1: synchronise after every op and name the op that failed", "0"},
      {"GALLEY_FIND_MODE", "normal|fast|hybrid|off: how solvers are chosen on a find-db miss", "hybrid"},
      {"GALLEY_FIND_ENFORCE", "search: re-tune even on a find-db hit", "(unset)"},
      {"GALLEY_FIND_TIME_MS", "time box for tuning one problem, in milliseconds", "2000"},
      {"GALLEY_CACHE_DIR", "find-db and kernel cache folder", "$XDG_CACHE_HOME/galley or ~/.cache/galley"},
      {"GALLEY_ALLOC_CONF", "caching allocator settings key:value,... (max_split_mb, max_non_split_rounding_mb, roundup_power2_divisions, memory_fraction; keys listed below)", "(unset)"},
      {"GALLEY_NO_CACHING", "1: allocator passes straight to the backend (for memory checkers)", "0"},
      {"GALLEY_CUDA_GRAPHS",
       "0: cuDNN graph-API and cuBLAS conv calls are never replayed as CUDA graphs (they are from a pointer set's third call)",
       "1"},
      {"GALLEY_PROFILE", "FILE.json: write a Chrome trace of the run", "(unset)"},
      {"GALLEY_NUM_THREADS", "threads in the cpu backend's pool", "hardware threads"},
      {"GALLEY_CPU_ISA", "highest cpu kernel level: scalar|avx2|avx512 (like oneDNN's DNNL_MAX_CPU_ISA)",
       "all the CPU has"},
  };
  return table;
}

std::optional<std::string> get(std::string_view name) {
  const auto& table = variables();
  const bool known = std::any_of(table.begin(), table.end(), [&](const Variable& v) { return v.name == name; });
  if (!known) throw Error(Status::internal, "read of undocumented environment variable " + std::string(name));
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

bool get_flag(std::string_view name) {
  const auto value = get(name);
  if (!value) return false;
  std::string v = *value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v.empty() || v == "0" || v == "false" || v == "no" || v == "off") return false;
  throw Error(Status::invalid_argument, std::string(name) + "='" + *value +
                                            "' is not a flag (valid: 1, 0, true, false, yes, no, on, off)");
}

}  // namespace galley::env
