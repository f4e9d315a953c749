// Internal: users reach the allocator through buffer.hpp (allocate, Buffer) and device_memory.hpp
// (statistics, empty_cache); tests, tools and backend code include this header from src/.
//
// The backend-neutral caching allocator: one per device, thread-safe, over DeviceImpl::raw_alloc
// and raw_free. It follows PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp):
//
// - Requests are rounded up to 512 B (or to power-of-two divisions, see AllocatorConfig).
// - Requests <= 1 MiB come from a small pool of 2 MiB segments; larger ones from a large pool:
//   1-10 MiB requests get a 20 MiB segment, larger ones a segment rounded up to 2 MiB.
// - A request takes the best-fitting free block (smallest, then lowest address) and splits off
//   the rest when enough remains; a freed block merges with free neighbours of its segment.
// - Free blocks are keyed by the stream they were freed on: a block freed on S is reused at once
//   by requests on S, in stream order. A block used on other streams (Buffer::record_stream) gets
//   an event recorded at the free on each of those streams and on S; it is reused only when all
//   have completed, and then by any stream. Blocks allocated without a stream are reusable by any
//   stream as soon as they are freed. A block free for any stream that merges with a neighbour
//   free on S belongs to S (PyTorch keeps such blocks on S too; merging beats fragmentation).
//   Events are created only for record_stream blocks and pooled, so the common alloc/free pair
//   performs no backend call and no heap allocation.
// - On a failed raw_alloc the allocator synchronises the device, makes every cached block
//   available to every stream, releases the cached segments that are wholly free and retries once;
//   then it throws Error(out_of_memory) with the sizes that explain the failure.
//
// Streams are identified by runtime::StreamImpl*. The allocator touches a stream only while a
// buffer of it is being freed, so a stream need only outlive its buffers (buffer.hpp). Cached blocks
// keep the key of a destroyed stream; a later stream created at the same address inherits them,
// which is safe because a StreamImpl's destructor completes its work (cpu joins its worker; GPU
// backends synchronise before destroying the native stream).
//
// Releasing cached memory (empty_cache, OOM retry) relies on DeviceImpl::synchronize() covering
// every stream of the device.
//
// Graph capture: private pools, as PyTorch gives its CUDA graphs (beginAllocateToPool,
// endAllocateToPool, releasePool). While a stream allocates to a pool (PrivatePoolScope), every
// request made for that stream is served from segments the pool owns, created for it; a block of
// the pool freed at any time goes back to the pool only, and is reused only by requests routed to
// the pool, in the stream order the capture preserves. So a graph that replays into the blocks its
// capture used never shares them with anyone while its pool lives, and empty_cache() keeps them.
// Releasing the pool (its owner, the graph holder, does it after the last replay has completed)
// hands its free blocks to the general cache, keyed to the stream they were freed on; blocks still
// allocated follow when freed. Pools do not nest on a stream; requests without a stream are never
// routed. While any stream allocates to a pool, an out-of-memory retry and empty_cache() do not
// wait for the device (a capture would break): they release only what is free for every stream.
// Private pools need caching on (GALLEY_NO_CACHING=1 refuses them). Statistics count pool memory
// like any other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "galley/memory/allocator_config.hpp"
#include "galley/memory/allocator_stats.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "runtime/backend.hpp"

namespace galley::memory {

namespace detail {
class AllocatorState;
}

/// A caching allocator over one device. Use allocator_for(device) for the process-wide one.
class CachingAllocator {
 public:
  /// Over a registry device (what allocator_for creates).
  CachingAllocator(const runtime::Device& device, AllocatorConfig config);
  /// Over any backend device, e.g. a fake with a capacity limit in tests. `name` is used in
  /// messages; Buffer::device() of its buffers throws Error(unsupported).
  CachingAllocator(runtime::DeviceImpl& impl, AllocatorConfig config, std::string name);
  /// Releases the cached memory. Buffers still alive are reported and their segments leaked, as
  /// their memory may still be in use; the allocator must outlive its buffers.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// Stream-ordered memory belonging to `stream` (nullptr: no stream, see buffer.hpp).
  /// Throws Error(invalid_argument) for sizes above 2^62 and Error(out_of_memory) when the device
  /// cannot provide the memory even after releasing the cache; the allocator stays consistent.
  Buffer allocate(std::size_t bytes, runtime::StreamImpl* stream);
  /// The same for a runtime stream; Error(invalid_argument) if it is on another device.
  Buffer allocate(std::size_t bytes, runtime::Stream& stream);
  /// Memory not tied to any stream.
  Buffer allocate(std::size_t bytes) { return allocate(bytes, static_cast<runtime::StreamImpl*>(nullptr)); }

  /// A copy of the counters.
  AllocatorStats stats() const;
  /// Sets every peak to its current value.
  void reset_peak();
  /// Waits for the device, then returns every wholly free cached segment to the backend. Memory
  /// in live buffers and free fragments of segments still in use stay.
  void empty_cache();
  /// {"device", "config", "segments": [{address, total_size, stream, pool, private_pool, allocated_size,
  /// active_size, requested_size, blocks: [{address, size, requested_size, state, stream}]}],
  /// "stats"}. state is active_allocated, active_awaiting_free (freed, events pending) or inactive.
  /// stream is the StreamImpl address as an integer, 0 for none; private_pool the id of the private
  /// pool owning the segment, 0 for the general cache.
  std::string snapshot_json() const;
  const AllocatorConfig& config() const;

  /// "cpu", "cuda:0", or the name given for a bare DeviceImpl.
  const std::string& device_name() const;
  /// The registry device; Error(unsupported) for an allocator over a bare DeviceImpl.
  const runtime::Device& device() const;
  runtime::DeviceImpl& device_impl() const;

  /// Walks every segment and pool and throws Error(internal) describing the first broken rule:
  /// blocks tile their segment, free neighbours are merged, pools hold exactly the free blocks,
  /// counters match the blocks. For tests; O(blocks).
  void check_invariants() const;

  /// A new private pool (see the top of this file); prefer the RAII PrivatePool below.
  /// Error(unsupported) when caching is off.
  std::uint64_t create_pool();
  /// Routes every allocation for `stream` to pool `id` until end_allocate_to_pool. Error
  /// (invalid_argument) for an unknown or released pool, and when the stream already allocates to
  /// a pool (pools do not nest).
  void begin_allocate_to_pool(std::uint64_t id, runtime::StreamImpl& stream);
  /// Ends the routing; Error(invalid_argument) when `stream` does not allocate to pool `id`.
  void end_allocate_to_pool(std::uint64_t id, runtime::StreamImpl& stream);
  /// Gives the pool's memory to the general cache. The caller must have waited for every replay
  /// using it. Error(invalid_argument) while a stream allocates to it, or for an unknown pool.
  void release_pool(std::uint64_t id);
  /// Bytes of the segments pool `id` owns.
  std::size_t pool_reserved_bytes(std::uint64_t id) const;

  /// Buffer::record_stream over a backend stream, without the device check (backend code, fake
  /// devices in tests). Error(invalid_argument) for a buffer of another allocator (an empty one
  /// included); a zero-byte or reset buffer needs nothing.
  void record_stream(Buffer& buffer, runtime::StreamImpl& stream);

 private:
  friend class Buffer;
  void free(detail::Block* block) noexcept;

  std::unique_ptr<detail::AllocatorState> state_;
};

/// Owns one private pool of an allocator: what a captured graph's holder keeps beside the graph.
/// Destroying it (or release()) returns the pool's memory to the general cache; destroy the graph's
/// own buffers and wait for its last replay first. Movable, not copyable.
class PrivatePool {
 public:
  /// No pool.
  PrivatePool() = default;
  explicit PrivatePool(CachingAllocator& allocator);
  /// Releases the pool; a release refused (a PrivatePoolScope still open) is logged, not thrown,
  /// and the pool's memory stays reserved.
  ~PrivatePool();
  PrivatePool(PrivatePool&& other) noexcept;
  PrivatePool& operator=(PrivatePool&& other) noexcept;
  PrivatePool(const PrivatePool&) = delete;
  PrivatePool& operator=(const PrivatePool&) = delete;

  /// Releases now (see CachingAllocator::release_pool); a no-op for no pool.
  void release();
  std::uint64_t id() const { return id_; }
  CachingAllocator* allocator() const { return allocator_; }
  explicit operator bool() const { return allocator_ != nullptr; }
  /// Bytes of the segments the pool owns; 0 for no pool.
  std::size_t reserved_bytes() const;

 private:
  CachingAllocator* allocator_ = nullptr;
  std::uint64_t id_ = 0;
};

/// While alive, every allocation for `stream` comes from `pool` (begin/end_allocate_to_pool).
/// Error(invalid_argument) when the stream is on another device than the pool's allocator, the
/// pool is empty, or the stream already allocates to a pool.
class PrivatePoolScope {
 public:
  PrivatePoolScope(PrivatePool& pool, runtime::Stream& stream);
  PrivatePoolScope(PrivatePool& pool, runtime::StreamImpl& stream);
  ~PrivatePoolScope();
  PrivatePoolScope(const PrivatePoolScope&) = delete;
  PrivatePoolScope& operator=(const PrivatePoolScope&) = delete;

 private:
  CachingAllocator& allocator_;
  std::uint64_t id_;
  runtime::StreamImpl& stream_;
};

/// The process-wide allocator of `device`, created on first use with AllocatorConfig::from_env()
/// (a malformed GALLEY_ALLOC_CONF throws here). It lives until the process ends.
CachingAllocator& allocator_for(const runtime::Device& device);

}  // namespace galley::memory
