// Galley's own version, stored in find-db rows and printed by `galley info`.
#pragma once

namespace galley {

/// "MAJOR.MINOR.PATCH", with "+g<revision>" (and ".dirty") when built from a git checkout.
const char* version_string() noexcept;

}  // namespace galley
