// Galley's own version, stored in find-db rows and printed by `galley info`.
#pragma once

namespace galley {

/// "MAJOR.MINOR.PATCH".
const char* version_string() noexcept;

}  // namespace galley
