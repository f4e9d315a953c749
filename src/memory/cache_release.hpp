// Returning the caching allocators' cached memory to the backends (internal: the exit handler
// and tests use it).
#pragma once

namespace galley::memory {

/// Waits for each device with an allocator_for() allocator, then returns every wholly free cached
/// segment to its backend, as empty_cache() does, logging at debug level what was released and
/// what live buffers still hold. Errors are logged, never thrown. Runs at process exit (registered
/// when the first allocator is created), before the vendor runtimes tear down their contexts, so
/// `compute-sanitizer --leak-check full` reports only memory that is really still held.
void release_all_cached_memory() noexcept;

}  // namespace galley::memory
