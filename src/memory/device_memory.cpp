// The public per-device view of the caching allocator: each call forwards to allocator_for(device).
#include "galley/memory/device_memory.hpp"

#include "memory/caching_allocator.hpp"

namespace galley::memory {

AllocatorStats memory_stats(const runtime::Device& device) { return allocator_for(device).stats(); }

void reset_peak_memory_stats(const runtime::Device& device) { allocator_for(device).reset_peak(); }

void empty_cache(const runtime::Device& device) { allocator_for(device).empty_cache(); }

std::string memory_snapshot_json(const runtime::Device& device) {
  return allocator_for(device).snapshot_json();
}

AllocatorConfig allocator_config(const runtime::Device& device) { return allocator_for(device).config(); }

}  // namespace galley::memory
