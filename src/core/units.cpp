#include "galley/core/units.hpp"

#include <cctype>
#include <cstdio>
#include <limits>
#include <string>

#include "galley/core/error.hpp"

namespace galley {

std::string format_bytes(std::size_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof text, "%zu B", bytes);
  } else {
    std::snprintf(text, sizeof text, "%.2f %s", value, kUnits[unit]);
  }
  return text;
}

std::size_t parse_bytes(std::string_view text) {
  const auto bad = [&](const char* why) {
    return Error(Status::invalid_argument,
                 "bad byte size '" + std::string(text) + "': " + why + " (examples: 4096, 4K, 64M, 1G)");
  };
  std::size_t i = 0;
  std::size_t value = 0;
  if (text.empty()) throw bad("empty");
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const std::size_t digit = static_cast<std::size_t>(text[i] - '0');
    if (value > (std::numeric_limits<std::size_t>::max() - digit) / 10) throw bad("too large");
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) throw bad("no digits");
  std::string suffix;
  for (; i < text.size(); ++i) suffix += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
  int shift = 0;
  if (suffix.empty() || suffix == "B") {
    shift = 0;
  } else if (suffix == "K" || suffix == "KB" || suffix == "KIB") {
    shift = 10;
  } else if (suffix == "M" || suffix == "MB" || suffix == "MIB") {
    shift = 20;
  } else if (suffix == "G" || suffix == "GB" || suffix == "GIB") {
    shift = 30;
  } else if (suffix == "T" || suffix == "TB" || suffix == "TIB") {
    shift = 40;
  } else {
    throw bad("unknown unit");
  }
  if (shift > 0 && value > (std::numeric_limits<std::size_t>::max() >> shift)) throw bad("too large");
  return value << shift;
}

}  // namespace galley
