#include "galley/core/version.hpp"

#include "galley_revision.h"

namespace galley {

const char* version_string() noexcept { return GALLEY_VERSION; }

}  // namespace galley
