// Counters of a caching allocator, named and defined as in PyTorch's torch.cuda.memory_stats().
#pragma once

#include <cstdint>
#include <string>

namespace galley::memory {

/// One quantity: its value now, its peak since the last reset_peak(), and the running totals of
/// increases and decreases (so current == allocated - freed).
struct Stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t freed = 0;

  void increase(std::int64_t amount) {
    current += amount;
    allocated += amount;
    if (current > peak) peak = current;
  }
  void decrease(std::int64_t amount) {
    current -= amount;
    freed += amount;
  }
  void reset_peak() { peak = current; }
};

/// A quantity for all memory and split by pool (small: requests <= 1 MiB in 2 MiB segments).
struct StatByPool {
  Stat all, small_pool, large_pool;

  void increase(bool small, std::int64_t amount) {
    all.increase(amount);
    (small ? small_pool : large_pool).increase(amount);
  }
  void decrease(bool small, std::int64_t amount) {
    all.decrease(amount);
    (small ? small_pool : large_pool).decrease(amount);
  }
  void reset_peak() {
    all.reset_peak();
    small_pool.reset_peak();
    large_pool.reset_peak();
  }
};

/// Everything a CachingAllocator counts. Bytes are rounded block sizes unless named "requested".
struct AllocatorStats {
  StatByPool allocation;            ///< live allocations (blocks handed out)
  StatByPool segment;               ///< backend allocations (raw_alloc) held
  StatByPool active;                ///< allocated blocks plus freed blocks still awaiting stream events
  StatByPool inactive_split;        ///< free blocks inside segments that are split (fragments)
  StatByPool allocated_bytes;       ///< bytes in live allocations
  StatByPool reserved_bytes;        ///< bytes held from the backend, allocated or cached
  StatByPool active_bytes;          ///< bytes in active blocks
  StatByPool inactive_split_bytes;  ///< bytes in free fragments of split segments
  StatByPool requested_bytes;       ///< bytes the callers asked for (before rounding)

  std::uint64_t cache_hits = 0;            ///< allocations served from cached memory
  std::uint64_t cache_misses = 0;          ///< allocations that needed a backend raw_alloc
  std::uint64_t num_alloc_retries = 0;     ///< raw_alloc failures retried after releasing the cache
  std::uint64_t num_ooms = 0;              ///< out-of-memory errors thrown
  std::uint64_t num_device_alloc = 0;      ///< raw_alloc calls that succeeded
  std::uint64_t num_device_free = 0;       ///< raw_free calls
  std::uint64_t num_sync_all_streams = 0;  ///< device-wide synchronisations (empty_cache, OOM retry)

  /// HR = H / (H + M); 0 before the first allocation.
  double hit_rate() const {
    const auto total = cache_hits + cache_misses;
    return total == 0 ? 0.0 : static_cast<double>(cache_hits) / static_cast<double>(total);
  }
  /// Flat JSON object with PyTorch-style keys ("allocated_bytes.all.current": N, ...).
  std::string to_json() const;
};

}  // namespace galley::memory
