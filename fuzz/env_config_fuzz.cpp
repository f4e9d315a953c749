// The GALLEY_* configuration: the input is an environment, one NAME=VALUE per line (a line
// without '=' is skipped), handed to the library's parsers through env_config_seam.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "env_config_seam.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  galley::fuzz::EnvAssignments assignments;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    const auto equals = line.find('=');
    // setenv cannot hold a NUL inside a value; the shell cannot pass one either.
    if (equals == std::string_view::npos || line.find('\0') != std::string_view::npos) continue;
    assignments.emplace_back(std::string(line.substr(0, equals)), std::string(line.substr(equals + 1)));
  }
  galley::fuzz::parse_environment(assignments);
  return 0;
}
