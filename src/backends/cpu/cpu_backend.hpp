// The built-in cpu backend: always present, device "cpu".
#pragma once

#include <memory>

#include "runtime/backend.hpp"

namespace galley::backends::cpu {

/// Creates the cpu backend; the registry registers it before looking for plugins.
std::unique_ptr<runtime::Backend> make_backend();

/// "avx512f", "avx2", "sse4.2" or "x86-64": the best ISA level this CPU runs.
const char* best_isa();

}  // namespace galley::backends::cpu
