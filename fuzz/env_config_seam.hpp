// The seam between the environment fuzz target and Galley's GALLEY_* parsing: (name, value)
// pairs in, every parse entry point of the library run over them. Only this file's body knows
// which entry points exist, so the target and its corpus stay the same when they change.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace galley::fuzz {

using EnvAssignments = std::vector<std::pair<std::string, std::string>>;

/// Sets each listed GALLEY_* variable (names outside env::variables() are skipped; later pairs of
/// a name win), runs every parser of the configuration over the result, then unsets them again.
/// Aborts when a parser lets anything but galley::Error escape, or when its Error names none of
/// the variables set.
void parse_environment(const EnvAssignments& assignments);

}  // namespace galley::fuzz
