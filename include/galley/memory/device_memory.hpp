// A device's memory as its caching allocator sees it, after torch.cuda's memory_stats(),
// reset_peak_memory_stats(), empty_cache() and memory_snapshot(). Each call acts on the process-wide
// allocator of the device (created on first use, see buffer.hpp's allocate).
#pragma once

#include <string>

#include "galley/memory/allocator_config.hpp"
#include "galley/memory/allocator_stats.hpp"
#include "galley/runtime/device.hpp"

namespace galley::memory {

/// A copy of the counters of `device`'s allocator.
AllocatorStats memory_stats(const runtime::Device& device);

/// Sets every peak of `device`'s allocator to its current value.
void reset_peak_memory_stats(const runtime::Device& device);

/// Waits for the device, then returns every wholly free cached segment to the backend. Memory in
/// live buffers and free fragments of segments still in use stay.
void empty_cache(const runtime::Device& device);

/// The segments and blocks of `device`'s allocator as JSON: {"device", "config", "segments":
/// [{address, total_size, stream, pool, allocated_size, active_size, requested_size, blocks:
/// [{address, size, requested_size, state, stream}]}], "stats"}. state is active_allocated,
/// active_awaiting_free (freed, events pending) or inactive; stream identifies the stream a block
/// belongs to (0 for none).
std::string memory_snapshot_json(const runtime::Device& device);

/// The settings `device`'s allocator was created with (GALLEY_ALLOC_CONF when it was first used).
AllocatorConfig allocator_config(const runtime::Device& device);

}  // namespace galley::memory
