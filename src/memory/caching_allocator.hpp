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
// Graph capture: the allocator does not know about captures (PyTorch gives them private pools).
// Memory used by a captured graph must stay allocated while the graph may replay.
#pragma once

#include <cstddef>
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
  /// {"device", "config", "segments": [{address, total_size, stream, pool, allocated_size,
  /// active_size, requested_size, blocks: [{address, size, requested_size, state, stream}]}],
  /// "stats"}. state is active_allocated, active_awaiting_free (freed, events pending) or inactive.
  /// stream is the StreamImpl address as an integer, 0 for none.
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

  /// Buffer::record_stream over a backend stream, without the device check (backend code, fake
  /// devices in tests). Error(invalid_argument) for a buffer of another allocator (an empty one
  /// included); a zero-byte or reset buffer needs nothing.
  void record_stream(Buffer& buffer, runtime::StreamImpl& stream);

 private:
  friend class Buffer;
  void free(detail::Block* block) noexcept;

  std::unique_ptr<detail::AllocatorState> state_;
};

/// The process-wide allocator of `device`, created on first use with AllocatorConfig::from_env()
/// (a malformed GALLEY_ALLOC_CONF throws here). It lives until the process ends.
CachingAllocator& allocator_for(const runtime::Device& device);

}  // namespace galley::memory
