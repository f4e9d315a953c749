// `galley prof --memory SNAPSHOT.json`: a caching-allocator snapshot (memory_snapshot_json, or the
// file GALLEY_ALLOC_CONF=snapshot_on_oom:PATH writes) as text: the totals, and per segment its
// blocks drawn as a bar of their states, so fragmentation is visible at a glance.
#pragma once

#include <string>

namespace galley::profile {

/// Throws Error(corrupt_data) naming what is missing when `json_text` is not such a snapshot.
std::string format_memory_snapshot(const std::string& json_text);

}  // namespace galley::profile
