// The GALLEY_* environment variables: one table of names and meanings, parsed and validated once,
// before the library queues any work (the first device enumeration or stream creation).
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
  /// False for a variable reserved for a feature this build lacks: setting it is an Error rather
  /// than a request silently ignored.
  bool implemented = true;
};

/// Every GALLEY_* variable Galley reads, the GALLEY_DEBUG_* development knobs included.
const std::vector<Variable>& variables();

/// One variable as the environment of this process holds it.
struct Setting {
  std::string name;
  std::optional<std::string> value;  ///< nullopt when unset
  std::string problem;               ///< why the value is invalid; empty when it is valid or unset
  bool known = true;                 ///< false for a GALLEY_* name that no table entry declares
};

/// Every declared variable in table order, then any undeclared GALLEY_* name set in the
/// environment (which Galley ignores). Reads the environment now; never throws.
std::vector<Setting> settings();

/// Throws Error(invalid_argument) naming every declared variable set to an invalid value (the
/// variable, the value and the valid values) or set although this build does not implement it.
/// The library checks this itself before its first work; a program may call it earlier.
void check();

}  // namespace galley::env
