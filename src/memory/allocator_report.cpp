// What the caching allocator tells people: statistics as JSON, the memory snapshot, the
// out-of-memory message, and the invariant check the tests lean on.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "galley/core/error.hpp"
#include "galley/core/units.hpp"
#include "memory/allocator_state.hpp"

namespace galley::memory {
namespace {

void put(nlohmann::json& out, const std::string& name, const StatByPool& stat) {
  const auto one = [&](const std::string& pool, const Stat& s) {
    out[name + "." + pool + ".current"] = s.current;
    out[name + "." + pool + ".peak"] = s.peak;
    out[name + "." + pool + ".allocated"] = s.allocated;
    out[name + "." + pool + ".freed"] = s.freed;
  };
  one("all", stat.all);
  one("small_pool", stat.small_pool);
  one("large_pool", stat.large_pool);
}

nlohmann::json stats_object(const AllocatorStats& s) {
  nlohmann::json out = nlohmann::json::object();
  put(out, "allocation", s.allocation);
  put(out, "segment", s.segment);
  put(out, "active", s.active);
  put(out, "inactive_split", s.inactive_split);
  put(out, "allocated_bytes", s.allocated_bytes);
  put(out, "reserved_bytes", s.reserved_bytes);
  put(out, "active_bytes", s.active_bytes);
  put(out, "inactive_split_bytes", s.inactive_split_bytes);
  put(out, "requested_bytes", s.requested_bytes);
  out["cache_hits"] = s.cache_hits;
  out["cache_misses"] = s.cache_misses;
  out["hit_rate"] = s.hit_rate();
  out["num_alloc_retries"] = s.num_alloc_retries;
  out["num_ooms"] = s.num_ooms;
  out["num_device_alloc"] = s.num_device_alloc;
  out["num_device_free"] = s.num_device_free;
  out["num_sync_all_streams"] = s.num_sync_all_streams;
  return out;
}

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

std::string AllocatorStats::to_json() const { return stats_object(*this).dump(); }

namespace detail {

std::string AllocatorState::snapshot_json_locked() const {
  nlohmann::json segments = nlohmann::json::array();
  for (const auto& [base, segment] : segments_) {
    nlohmann::json blocks = nlohmann::json::array();
    std::size_t allocated = 0, active = 0, requested = 0;
    for (const Block* b = segment.head; b != nullptr; b = b->next) {
      const char* state = b->allocated            ? "active_allocated"
                          : b->pending_events > 0 ? "active_awaiting_free"
                                                  : "inactive";
      if (b->allocated) allocated += b->size;
      if (b->allocated || b->pending_events > 0) active += b->size;
      requested += b->requested;
      blocks.push_back({{"address", address(b->ptr)},
                        {"size", b->size},
                        {"requested_size", b->requested},
                        {"state", state},
                        {"stream", address(b->stream)}});
    }
    segments.push_back({{"address", address(base)},
                        {"total_size", segment.size},
                        {"stream", address(segment.stream)},
                        {"pool", segment.small ? "small" : "large"},
                        {"private_pool", segment.head->pool != nullptr ? segment.head->pool->id : 0},
                        {"allocated_size", allocated},
                        {"active_size", active},
                        {"requested_size", requested},
                        {"blocks", std::move(blocks)}});
  }
  nlohmann::json out = {{"device", name},
                        {"caching", config.caching},
                        {"config", config.to_string()},
                        {"segments", std::move(segments)},
                        {"stats", stats_object(stats)}};
  return out.dump();
}

std::size_t AllocatorState::largest_free_block_locked() const {
  std::size_t largest = 0;
  for (const Pool* pool : {&small_pool_, &large_pool_}) {
    for (const Block* b : *pool) largest = std::max(largest, b->size);
  }
  return largest;
}

std::string AllocatorState::oom_message_locked(std::size_t bytes, std::size_t segment_bytes,
                                               bool over_fraction, const std::string& backend_message) const {
  std::string total = "unknown", free = "unknown";
  try {
    const auto info = impl.memory_info();
    total = format_bytes(info.total);
    free = format_bytes(info.free);
  } catch (const std::exception&) {
    // The message matters more than the figures; keep "unknown".
  }
  const auto allocated = static_cast<std::size_t>(stats.allocated_bytes.all.current);
  const auto reserved = static_cast<std::size_t>(stats.reserved_bytes.all.current);
  std::string message = "out of memory on " + name + ": tried to allocate " + format_bytes(bytes) + " (" +
                        std::to_string(bytes) + " bytes";
  if (segment_bytes != bytes) message += ", as a " + format_bytes(segment_bytes) + " segment";
  message += "). Device total " + total + ", free " + free + ". Galley's allocator has " +
             format_bytes(allocated) + " allocated and " + format_bytes(reserved) + " reserved (" +
             format_bytes(reserved - allocated) + " reserved but unallocated; largest free block " +
             format_bytes(largest_free_block_locked()) + ").";
  if (const std::size_t private_bytes = private_reserved_locked(); private_bytes > 0) {
    message.append(" ").append(format_bytes(private_bytes));
    message.append(" of the reserved memory belongs to the private pools of ");
    message.append(std::to_string(private_pools_.size())).append(" captured graph(s).");
  }
  if (!backend_message.empty()) message += " Backend: " + backend_message + ".";

  const std::string current = config.to_string();
  const std::size_t mib = std::size_t{1} << 20;
  const std::size_t suggested_split_mb = std::max<std::size_t>(32, (bytes + mib - 1) / mib);
  if (over_fraction) {
    message += " The cap GALLEY_ALLOC_CONF=memory_fraction:" + std::to_string(config.memory_fraction) +
               " was reached; raise memory_fraction to let the allocator reserve more.";
  } else if (reserved - allocated >= bytes) {
    message +=
        " Reserved but unallocated memory exceeds the request, so it is fragmented: try GALLEY_ALLOC_CONF="
        "max_split_mb:" +
        std::to_string(suggested_split_mb) + " so that large cached blocks are not split.";
  } else {
    message += " Free memory or allocate less; if sizes vary a lot, GALLEY_ALLOC_CONF=max_split_mb:" +
               std::to_string(suggested_split_mb) + " reduces fragmentation.";
  }
  message += " (GALLEY_ALLOC_CONF now: " + (current.empty() ? std::string("defaults") : current) +
             (config.caching ? "" : "; GALLEY_NO_CACHING=1") + ")";
  return message;
}

void AllocatorState::check_invariants_locked() const {
  const auto fail = [&](const std::string& what) {
    throw Error(Status::internal, "caching allocator of " + name + " is inconsistent: " + what);
  };
  const auto live_pool = [&](const PrivatePool* pool) {
    for (const auto& entry : private_pools_) {
      if (entry.second.get() == pool) return true;
    }
    return false;
  };
  std::int64_t reserved = 0, allocated = 0, active = 0, requested = 0;
  std::int64_t allocations = 0, actives = 0, splits = 0, split_bytes = 0;
  std::size_t in_pool = 0;
  for (const auto& [base, segment] : segments_) {
    const Block* b = segment.head;
    if (b == nullptr || b->ptr != base || b->prev != nullptr) fail("segment head does not start its segment");
    const Block* prev = nullptr;
    const char* expected = base;
    std::size_t sum = 0;
    for (; b != nullptr; prev = b, b = b->next) {
      if (b->prev != prev) fail("broken prev link");
      if (b->ptr != expected) fail("blocks do not tile their segment");
      if (b->size == 0) fail("empty block");
      if (config.caching && b->size % kMinBlockSize != 0) fail("block size not a multiple of 512");
      if (b->small != segment.small) fail("block pool differs from its segment's");
      if (b->pool != segment.head->pool)
        fail("block belongs to another private pool than its segment's head");
      if (b->pool != nullptr && !live_pool(b->pool)) fail("block of a released private pool");
      const int states = int{b->allocated} + int{b->in_pool} + int{b->pending_events > 0};
      if (states != 1) fail("block is not exactly one of allocated, free, awaiting events");
      if (b->in_pool) {
        const Pool& pool = b->pool != nullptr ? (b->small ? b->pool->small_blocks : b->pool->large_blocks)
                                              : (b->small ? small_pool_ : large_pool_);
        if (pool.find(const_cast<Block*>(b)) == pool.end()) fail("free block missing from its pool");
        ++in_pool;
        if (b->is_split()) {
          ++splits;
          split_bytes += static_cast<std::int64_t>(b->size);
        }
        if (prev != nullptr && prev->in_pool &&
            (prev->stream == b->stream || prev->stream == nullptr || b->stream == nullptr)) {
          fail("two mergeable free neighbours were not merged");
        }
      } else {
        ++actives;
        active += static_cast<std::int64_t>(b->size);
      }
      if (b->allocated) {
        ++allocations;
        allocated += static_cast<std::int64_t>(b->size);
        requested += static_cast<std::int64_t>(b->requested);
      }
      sum += b->size;
      expected += b->size;
    }
    if (sum != segment.size)
      fail("blocks add up to " + std::to_string(sum) + ", not the segment's " + std::to_string(segment.size));
    reserved += static_cast<std::int64_t>(segment.size);
  }
  std::size_t pooled = small_pool_.size() + large_pool_.size();
  for (const auto& [id, pool] : private_pools_) {
    pooled += pool->small_blocks.size() + pool->large_blocks.size();
    std::size_t owned = 0;
    for (const auto& [base, segment] : segments_)
      owned += segment.head->pool == pool.get() ? segment.size : 0;
    if (owned != pool->reserved_bytes)
      fail("private pool " + std::to_string(id) + " counts " + std::to_string(pool->reserved_bytes) +
           " reserved bytes, its segments " + std::to_string(owned));
  }
  if (in_pool != pooled) fail("pools hold blocks that are not free blocks of a segment");
  const auto expect = [&](const char* what, std::int64_t counted, std::int64_t stat) {
    if (counted != stat)
      fail(std::string(what) + " counter is " + std::to_string(stat) + ", blocks say " +
           std::to_string(counted));
  };
  expect("reserved_bytes", reserved, stats.reserved_bytes.all.current);
  expect("segment", static_cast<std::int64_t>(segments_.size()), stats.segment.all.current);
  expect("allocated_bytes", allocated, stats.allocated_bytes.all.current);
  expect("allocation", allocations, stats.allocation.all.current);
  expect("requested_bytes", requested, stats.requested_bytes.all.current);
  expect("active", actives, stats.active.all.current);
  expect("active_bytes", active, stats.active_bytes.all.current);
  expect("inactive_split", splits, stats.inactive_split.all.current);
  expect("inactive_split_bytes", split_bytes, stats.inactive_split_bytes.all.current);
  if (stats.allocated_bytes.all.current > stats.reserved_bytes.all.current)
    fail("allocated exceeds reserved");
  for (const StatByPool* s :
       {&stats.allocated_bytes, &stats.reserved_bytes, &stats.segment, &stats.allocation}) {
    if (s->small_pool.current + s->large_pool.current != s->all.current) fail("pool counters do not add up");
  }
}

}  // namespace detail
}  // namespace galley::memory
