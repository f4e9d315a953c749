#include "galley/tuning/find_mode.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "galley/core/env.hpp"
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
  if (const auto mode = env::get("GALLEY_FIND_MODE"); mode && !mode->empty()) {
    options.mode = parse_find_mode(*mode);
  }
  if (const auto enforce = env::get("GALLEY_FIND_ENFORCE"); enforce) {
    const std::string value = lower(trimmed(*enforce));
    if (value == "search") {
      options.enforce_search = true;
    } else if (!value.empty() && value != "none") {
      throw Error(Status::invalid_argument,
                  "GALLEY_FIND_ENFORCE='" + *enforce + "' is not valid (valid: none, search)");
    }
  }
  if (const auto time = env::get("GALLEY_FIND_TIME_MS"); time && !time->empty()) {
    const std::string value = trimmed(*time);
    double ms = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
    if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(ms) || ms <= 0) {
      throw Error(Status::invalid_argument,
                  "GALLEY_FIND_TIME_MS='" + *time + "' is not a positive number of milliseconds");
    }
    options.time_box_ms = ms;
  }
  return options;
}

}  // namespace galley::tuning
