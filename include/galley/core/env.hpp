// The GALLEY_* environment variables: one table of names and meanings, read in one place.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace galley::env {

/// One documented environment variable (listed by `galley info --env`).
struct Variable {
  std::string_view name;
  std::string_view meaning;
  std::string_view default_value;
};

/// Every GALLEY_* variable Galley reads. Reading an unlisted name through get() is a bug.
const std::vector<Variable>& variables();

/// The value of a listed variable, or nullopt when unset. Empty counts as set.
std::optional<std::string> get(std::string_view name);

/// True when the variable is set to 1/true/yes/on; false when unset or 0/false/no/off.
/// Any other value throws Error(invalid_argument) naming the variable and the value.
bool get_flag(std::string_view name);

}  // namespace galley::env
