#include "galley/core/version.hpp"

namespace galley {

const char* version_string() noexcept { return GALLEY_VERSION; }

}  // namespace galley
