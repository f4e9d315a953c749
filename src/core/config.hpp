// The parsed GALLEY_* configuration (internal: layers, plugins and tests read it, users do not).
//
// The environment is read once, at the first config() call, into one immutable snapshot; every
// later read is a pointer load. A snapshot with an invalid variable is kept too, so config()
// throws the same Error (naming every bad variable) on every call until the process ends: the
// library calls it before its first work, so a bad value fails before anything is queued.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace galley::env {

/// Every GALLEY_* variable, parsed. Field defaults are the values used when a variable is unset.
struct Config {
  std::string device;                                       ///< GALLEY_DEVICE; empty: the first GPU, else cpu
  std::optional<std::vector<std::string>> visible_devices;  ///< GALLEY_VISIBLE_DEVICES entries
  std::vector<std::string> plugin_path;                     ///< GALLEY_PLUGIN_PATH folders, in search order
  int log_level = 1;                                        ///< GALLEY_LOG_LEVEL as log::Level (warn)
  bool log_cmd = false;                                     ///< GALLEY_LOG_CMD
  bool launch_blocking = false;                             ///< GALLEY_LAUNCH_BLOCKING
  std::string find_mode;               ///< GALLEY_FIND_MODE, lower case; empty: the default
  bool find_enforce_search = false;    ///< GALLEY_FIND_ENFORCE=search
  std::optional<double> find_time_ms;  ///< GALLEY_FIND_TIME_MS, > 0
  std::string cache_dir;               ///< GALLEY_CACHE_DIR; empty: the XDG default
  std::string alloc_conf;              ///< GALLEY_ALLOC_CONF, validated by the memory layer
  bool no_caching = false;             ///< GALLEY_NO_CACHING
  bool cuda_graphs = true;             ///< GALLEY_CUDA_GRAPHS
  std::string profile;                 ///< GALLEY_PROFILE trace file; empty: tracing off
  /// GALLEY_PROFILE_DEVICE_TIMES, lower case: "events" (an event pair per launch), "cupti" (device
  /// spans from a device activity source's kernel records where one runs), "host" (host spans only:
  /// no device spans, no activity source); empty: the default, cupti
  std::string profile_device_times;
  int num_threads = 0;  ///< GALLEY_NUM_THREADS, 1..4096; 0: hardware threads
  std::string cpu_isa;  ///< GALLEY_CPU_ISA: scalar|avx2|avx512; empty: all
  /// GALLEY_DEBUG_IGEMM_TC_PLAN "tile:splits" (the tile's upper bound is checked by the solver).
  std::optional<std::pair<int, int>> debug_igemm_tc_plan;
  bool debug_igemm_tc_tune = true;      ///< GALLEY_DEBUG_IGEMM_TC_TUNE
  bool debug_bwd_weights_wgmma = true;  ///< GALLEY_DEBUG_BWD_WEIGHTS_WGMMA
  bool debug_3xtf32 = true;             ///< GALLEY_DEBUG_3XTF32
  bool debug_bwd_data_phases = true;    ///< GALLEY_DEBUG_BWD_DATA_PHASES
  bool debug_gemm_wgmma = true;         ///< GALLEY_DEBUG_GEMM_WGMMA
};

/// The process's configuration. Throws Error(invalid_argument) as check() does while any variable
/// is invalid.
const Config& config();

/// Validates a variable whose grammar belongs to a higher layer (GALLEY_ALLOC_CONF: the memory
/// layer's parser). `validate` throws Error on a bad value. Registered at static initialisation;
/// returns true so it can initialise a namespace-scope constant.
using Validator = void (*)(const std::string& value);
bool register_validator(std::string_view name, Validator validate);

/// Test hook: re-reads the environment into a new snapshot, so a test can setenv() a variable and
/// see its effect. Never throws (a bad value makes config() throw). Not for production code: the
/// snapshot a running stream or solver already read stays what it was.
void reload_for_testing();

/// Test hook: frees the snapshots reload_for_testing() replaced, which it keeps alive because a
/// reader may still hold one. Only for a caller that knows no reference into them remains (a fuzz
/// target between inputs, which reloads millions of times).
void release_retired_for_testing();

}  // namespace galley::env
