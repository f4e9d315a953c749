// GALLEY_ALLOC_CONF parsing: "key:value,key:value", strict, with errors that list the valid keys.
#include "galley/memory/allocator_config.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "galley/core/error.hpp"
#include "profile/output_file.hpp"

namespace galley::memory {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
// Above this N MiB would overflow or exceed any device; rejected as a typo.
constexpr std::size_t kMaxMiB = std::size_t{1} << 40;

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

[[noreturn]] void fail(std::string_view text, const std::string& why) {
  throw Error(Status::invalid_argument, "GALLEY_ALLOC_CONF='" + std::string(text) + "': " + why +
                                            "; valid keys:\n" + alloc_conf_help());
}

std::size_t parse_count(std::string_view text, const std::string& key, const std::string& value) {
  std::size_t result = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), result);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size()) {
    fail(text, "value '" + value + "' of " + key + " is not a non-negative integer");
  }
  return result;
}

double parse_fraction(std::string_view text, const std::string& key, const std::string& value) {
  // strtod accepts "inf", "nan" and hex; the range check below rejects the first two.
  char* end = nullptr;
  const double result = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || !(result > 0.0 && result <= 1.0)) {
    fail(text, "value '" + value + "' of " + key + " is not a number in (0, 1]");
  }
  return result;
}

}  // namespace

std::string alloc_conf_help() {
  return "  max_split_mb:N               cached blocks >= N MiB are never split (N > 20; default: no limit)\n"
         "  max_non_split_rounding_mb:N  a request >= max_split_mb may take a cached block at most N MiB "
         "larger "
         "(default 20)\n"
         "  roundup_power2_divisions:N   round sizes up to N steps between powers of two (N = 0, 1, 2, 4 ... "
         "64; "
         "default 0 = off)\n"
         "  memory_fraction:F            reserve at most F of the device's memory (0 < F <= 1; default 1)\n"
         "  snapshot_on_oom:PATH         on an out-of-memory error, write the allocator's snapshot (JSON) "
         "there first\n"
         "  (GALLEY_NO_CACHING=1 bypasses the cache entirely)";
}

AllocatorConfig AllocatorConfig::parse(std::string_view text) {
  AllocatorConfig config;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string item = trim(text.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;  // "a:1," or an empty variable
    const auto colon = item.find(':');
    if (colon == std::string::npos) fail(text, "entry '" + item + "' has no ':' (expected key:value)");
    const std::string key = trim(std::string_view(item).substr(0, colon));
    const std::string value = trim(std::string_view(item).substr(colon + 1));
    if (key == "max_split_mb") {
      const auto mb = parse_count(text, key, value);
      if (mb <= 20 || mb > kMaxMiB)
        fail(text, "max_split_mb must be > 20 (the 20 MiB segment size) and sane, not " + value);
      config.max_split_size = mb * kMiB;
    } else if (key == "max_non_split_rounding_mb") {
      const auto mb = parse_count(text, key, value);
      if (mb > kMaxMiB) fail(text, "max_non_split_rounding_mb " + value + " is too large");
      config.max_non_split_rounding = mb * kMiB;
    } else if (key == "roundup_power2_divisions") {
      const auto n = parse_count(text, key, value);
      if (n > 64 || (n & (n - 1)) != 0)
        fail(text, "roundup_power2_divisions must be 0 or a power of two up to 64, not " + value);
      config.roundup_power2_divisions = n;
    } else if (key == "memory_fraction") {
      config.memory_fraction = parse_fraction(text, key, value);
    } else if (key == "snapshot_on_oom") {
      try {
        profile::check_trace_path(key, value);
      } catch (const Error& e) {
        fail(text, e.what());
      }
      config.snapshot_on_oom = value;
    } else if (key == "max_split_size_mb") {
      fail(text, "unknown key 'max_split_size_mb' (PyTorch's name; Galley's is max_split_mb)");
    } else {
      fail(text, "unknown key '" + key + "'");
    }
  }
  return config;
}

namespace {
// GALLEY_ALLOC_CONF's grammar lives here; the configuration checks it with every other variable,
// up front, instead of at the first allocation (which may come after work is queued).
const bool alloc_conf_validated = env::register_validator(
    "GALLEY_ALLOC_CONF", [](const std::string& text) { (void)AllocatorConfig::parse(text); });
}  // namespace

AllocatorConfig AllocatorConfig::from_env() {
  const env::Config& environment = env::config();
  AllocatorConfig config = parse(environment.alloc_conf);
  config.caching = !environment.no_caching;
  return config;
}

std::string AllocatorConfig::to_string() const {
  const AllocatorConfig defaults;
  std::vector<std::string> items;
  if (max_split_size != defaults.max_split_size)
    items.push_back("max_split_mb:" + std::to_string(max_split_size / kMiB));
  if (max_non_split_rounding != defaults.max_non_split_rounding)
    items.push_back("max_non_split_rounding_mb:" + std::to_string(max_non_split_rounding / kMiB));
  if (roundup_power2_divisions != defaults.roundup_power2_divisions)
    items.push_back("roundup_power2_divisions:" + std::to_string(roundup_power2_divisions));
  if (memory_fraction != defaults.memory_fraction) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", memory_fraction);
    items.push_back(std::string("memory_fraction:") + text);
  }
  if (!snapshot_on_oom.empty()) items.push_back("snapshot_on_oom:" + snapshot_on_oom);
  std::string joined;
  for (const auto& item : items) joined += (joined.empty() ? "" : ",") + item;
  return joined;
}

}  // namespace galley::memory
