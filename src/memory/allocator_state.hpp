// Internals of the caching allocator: blocks, pools and the state behind one CachingAllocator.
// Every member is guarded by `mutex` unless noted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "galley/memory/allocator_config.hpp"
#include "galley/memory/allocator_stats.hpp"
#include "galley/runtime/device.hpp"
#include "runtime/backend.hpp"

namespace galley::memory::detail {

// PyTorch's constants (CUDACachingAllocator.cpp), kept so figures and advice carry over.
constexpr std::size_t kMinBlockSize = 512;                   // every size is a multiple of this
constexpr std::size_t kSmallSize = std::size_t{1} << 20;     // requests up to this use the small pool
constexpr std::size_t kSmallBuffer = std::size_t{2} << 20;   // small-pool segment size
constexpr std::size_t kLargeBuffer = std::size_t{20} << 20;  // segment for 1-10 MiB requests
constexpr std::size_t kMinLargeAlloc = std::size_t{10} << 20;
constexpr std::size_t kRoundLarge = std::size_t{2} << 20;  // larger segments round to this
// Above this no rounding arithmetic can overflow and no device could serve the request anyway.
constexpr std::size_t kMaxRequest = std::size_t{1} << 62;

struct PrivatePool;

/// A contiguous piece of a segment: allocated, free in a pool, or freed and awaiting events.
struct Block {
  char* ptr = nullptr;
  std::size_t size = 0;       // rounded; blocks of a segment add up to the segment
  std::size_t requested = 0;  // caller's size while allocated
  // Allocated: the owning stream. Free: the pool key, i.e. the only stream that may reuse the
  // block at once; nullptr means any stream may.
  runtime::StreamImpl* stream = nullptr;
  Block* prev = nullptr;  // neighbours in the segment, by address
  Block* next = nullptr;
  // The capture-private pool owning the block's segment (every block of a segment shares it);
  // nullptr for the general cache.
  PrivatePool* pool = nullptr;
  bool small = false;
  bool allocated = false;
  bool in_pool = false;
  int pending_events = 0;  // events still to complete before the freed block returns to a pool
  std::vector<runtime::StreamImpl*> stream_uses;  // record_stream; empty (no heap) in the common case

  bool is_split() const { return prev != nullptr || next != nullptr; }
};

/// Orders free blocks by (stream, size, address): lower_bound gives the best fit on one stream.
struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return std::less<const runtime::StreamImpl*>()(a->stream, b->stream);
    if (a->size != b->size) return a->size < b->size;
    return std::less<const char*>()(a->ptr, b->ptr);
  }
};
using Pool = std::set<Block*, BlockLess>;

/// Memory private to captured graphs (PyTorch's PrivatePool): the free blocks of segments created
/// while a stream allocated to it. Only allocations routed to the pool take them, so a graph that
/// replays into its blocks never finds another user's data there, and nobody finds the graph's.
struct PrivatePool {
  std::uint64_t id = 0;
  Pool small_blocks, large_blocks;
  int routed_streams = 0;          // streams allocating to it now
  std::size_t reserved_bytes = 0;  // its segments
  // Freed after use on other streams (record_stream) inside the pool: no stream order covers
  // them and no event may be recorded in a capture, so they wait for the pool's release.
  std::vector<Block*> deferred;
};

/// One raw_alloc. `head` is the lowest block; merges always keep the lower block, so it never changes.
struct Segment {
  Block* head = nullptr;
  std::size_t size = 0;
  bool small = false;
  runtime::StreamImpl* stream = nullptr;  // stream of the request that created it
};

struct PendingEvent {
  std::unique_ptr<runtime::EventImpl> event;
  Block* block = nullptr;
};

class AllocatorState {
 public:
  AllocatorState(runtime::DeviceImpl& impl, std::optional<runtime::Device> device, AllocatorConfig config,
                 std::string name);

  // Entry points; each takes the lock itself.
  Block* allocate(std::size_t bytes, runtime::StreamImpl* stream);
  void free(Block* block) noexcept;
  void record_stream(Block* block, runtime::StreamImpl& stream);
  void empty_cache();
  std::uint64_t create_pool();
  void begin_allocate_to_pool(std::uint64_t id, runtime::StreamImpl* stream);
  void end_allocate_to_pool(std::uint64_t id, runtime::StreamImpl* stream);
  void release_pool(std::uint64_t id);
  std::size_t pool_reserved_bytes(std::uint64_t id);
  ~AllocatorState();

  // Reports (allocator_report.cpp); callers hold the lock.
  std::string snapshot_json_locked() const;
  void check_invariants_locked() const;
  std::string oom_message_locked(std::size_t bytes, std::size_t segment_bytes, bool over_fraction,
                                 const std::string& backend_message) const;
  std::size_t largest_free_block_locked() const;
  std::size_t private_reserved_locked() const;

  runtime::DeviceImpl& impl;
  const std::optional<runtime::Device> device;
  const AllocatorConfig config;
  const std::string name;
  mutable std::mutex mutex;
  AllocatorStats stats;

 private:
  std::size_t round_size(std::size_t bytes) const;
  std::size_t segment_size(std::size_t rounded) const;
  Pool& pool_of(bool small, PrivatePool* owner) {
    if (owner != nullptr) return small ? owner->small_blocks : owner->large_blocks;
    return small ? small_pool_ : large_pool_;
  }
  Pool& pool_of(const Block* block) { return pool_of(block->small, block->pool); }
  /// The pool `stream` allocates to now, or nullptr for the general cache.
  PrivatePool* routed_pool(const runtime::StreamImpl* stream) const;
  PrivatePool& find_pool(std::uint64_t id, const char* op);
  void release_pool_locked(PrivatePool& pool);

  Block* find_cached(std::size_t size, bool small, runtime::StreamImpl* stream, PrivatePool* owner);
  Block* take_free_block(Pool& pool, runtime::StreamImpl* key, std::size_t size);
  Block* try_new_segment(std::size_t segment_bytes, bool small, runtime::StreamImpl* stream,
                         PrivatePool* owner, bool& over_fraction, std::string& backend_message);
  /// Makes `block` the head of a new segment over `ptr` (raw memory of `bytes` from the backend)
  /// and counts it. On failure the raw memory is given back and `block` recycled before rethrowing.
  void adopt_segment(Block* block, void* ptr, std::size_t bytes, bool small, runtime::StreamImpl* stream,
                     PrivatePool* owner);
  Block* split_for(Block* block, std::size_t size);
  void finish_free(Block* block);
  void free_block(Block* block);
  void insert_free_events(Block* block) noexcept;
  void process_events();
  void sync_and_release(std::unique_lock<std::mutex>& lock);
  /// Without waiting for the device: what is free for every stream (while a stream allocates to a
  /// private pool it may be capturing, and a device-wide wait would break the capture).
  void release_without_sync();
  void make_free_blocks_shared();
  void release_free_segments(bool synced);
  void release_segment(Block* head);
  Block* allocate_uncached(std::size_t bytes, runtime::StreamImpl* stream,
                           std::unique_lock<std::mutex>& lock);

  void pool_insert(Block* block);
  void pool_erase(Block* block);
  void pool_erase(Pool& pool, Pool::iterator it);
  Block* new_block();
  void recycle_block(Block* block);
  std::unique_ptr<runtime::EventImpl> take_event();

  Pool small_pool_, large_pool_;
  std::vector<Pool::node_type> spare_nodes_;  // set nodes kept for reuse: no heap traffic on hits
  std::deque<Block> block_storage_;           // stable addresses; recycled through spare_blocks_
  std::vector<Block*> spare_blocks_;
  std::map<const char*, Segment> segments_;
  std::vector<std::unique_ptr<runtime::EventImpl>> spare_events_;
  std::vector<PendingEvent> pending_;
  std::size_t reserve_limit_ = SIZE_MAX;  // memory_fraction x device total
  std::map<std::uint64_t, std::unique_ptr<PrivatePool>> private_pools_;
  std::vector<std::pair<const runtime::StreamImpl*, PrivatePool*>> routes_;  // stream -> pool it allocates to
  std::uint64_t next_pool_id_ = 1;
};

}  // namespace galley::memory::detail
