#include "bench_stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"
#include "galley/core/units.hpp"

namespace galley::cli {
namespace {

constexpr std::size_t kMaxSizeChars = 32;

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::string fixed(double value, int digits) {
  if (std::isnan(value)) return "-";
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::vector<std::size_t> parse_size_list(const std::string& text, const std::string& option) {
  std::vector<std::size_t> sizes;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    if (item.empty()) continue;
    // A byte size is a few characters; parse_bytes quotes its text whole.
    if (item.size() > kMaxSizeChars) {
      throw Error(Status::invalid_argument,
                  option + ": " + quoted_input(item) + " is not a byte size (examples: 4096, 4K, 64M, 1G)");
    }
    const std::size_t bytes = parse_bytes(item);
    if (bytes == 0)
      throw Error(Status::invalid_argument, option + ": " + quoted_input(item) + " is zero bytes");
    sizes.push_back(bytes);
  }
  if (sizes.empty()) {
    throw Error(Status::invalid_argument,
                option + " " + quoted_input(text) + " names no size (example: 64M,256M,1G)");
  }
  return sizes;
}

int batch_for(double one_call_ms) {
  return std::clamp(static_cast<int>(std::ceil(1.0 / std::max(one_call_ms, 1e-4))), 1, 200);
}

}  // namespace galley::cli
