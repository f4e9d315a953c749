#include "galley/tuning/find_mode.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "core/config.hpp"
#include "galley/core/error.hpp"

namespace galley::tuning {
namespace {

constexpr FindMode kModes[] = {FindMode::normal, FindMode::fast, FindMode::hybrid, FindMode::off};

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return std::string(text);
}

}  // namespace

const char* to_string(FindMode mode) noexcept {
  switch (mode) {
    case FindMode::normal: return "normal";
    case FindMode::fast: return "fast";
    case FindMode::hybrid: return "hybrid";
    case FindMode::off: return "off";
  }
  return "?";
}

FindMode parse_find_mode(std::string_view text) {
  const std::string wanted = lower(trimmed(text));
  for (FindMode mode : kModes) {
    if (wanted == to_string(mode)) return mode;
  }
  throw Error(Status::invalid_argument,
              "GALLEY_FIND_MODE='" + std::string(text) + "' is not a find mode (valid: normal, fast, hybrid, off)");
}

FindOptions FindOptions::from_env() {
  FindOptions options;
  // Validated with every other GALLEY_* variable when the configuration was read.
  const env::Config& config = env::config();
  if (!config.find_mode.empty()) options.mode = parse_find_mode(config.find_mode);
  options.enforce_search = config.find_enforce_search;
  if (config.find_time_ms) options.time_box_ms = *config.find_time_ms;
  return options;
}

}  // namespace galley::tuning
