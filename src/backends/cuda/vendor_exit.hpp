// Vendor handles (cuBLAS, cuDNN) destroyed when the process exits, before the CUDA runtime tears its
// context down: a handle's own device memory (cuBLAS keeps a workspace per handle) is then freed
// by its library instead of being reported by a leak checker as held at exit.
#pragma once

#include <functional>

namespace galley::backends::cuda {

/// Runs `release` at process exit. The first call registers one exit handler; as it is registered
/// after the CUDA runtime started (a handle is made on an initialised device), it runs before the
/// runtime's own teardown. Releases run in reverse order of registration. Thread-safe.
void release_at_exit(std::function<void()> release);

}  // namespace galley::backends::cuda
