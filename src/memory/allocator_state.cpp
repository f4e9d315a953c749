// The caching allocator's algorithm: rounding, best fit, split and merge, stream-ordered reuse,
// events for record_stream, and the release-and-retry path on out-of-memory.
#include "memory/allocator_state.hpp"

#include <bit>
#include <new>
#include <string>
#include <utility>

#include "galley/core/error.hpp"
#include "galley/core/log.hpp"
#include "galley/core/units.hpp"

namespace galley::memory::detail {

AllocatorState::AllocatorState(runtime::DeviceImpl& impl_in, std::optional<runtime::Device> device_in,
                               AllocatorConfig config_in, std::string name_in)
    : impl(impl_in), device(std::move(device_in)), config(config_in), name(std::move(name_in)) {
  if (config.memory_fraction < 1.0) {
    const auto total = impl.memory_info().total;
    reserve_limit_ = static_cast<std::size_t>(static_cast<double>(total) * config.memory_fraction);
  }
  // Room for the usual number of free fragments, so the hit path never grows these vectors.
  spare_nodes_.reserve(256);
  spare_blocks_.reserve(256);
}

AllocatorState::~AllocatorState() {
  std::unique_lock lock(mutex);
  if (!private_pools_.empty()) {
    log::warn("caching allocator of " + name + " destroyed with " + std::to_string(private_pools_.size()) +
              " private pool(s) not released; their memory returns to the cache");
    routes_.clear();
    while (!private_pools_.empty()) release_pool_locked(*private_pools_.begin()->second);
  }
  if (stats.allocation.all.current > 0) {
    log::warn("caching allocator of " + name + " destroyed with " +
              std::to_string(stats.allocation.all.current) + " live buffer(s) (" +
              format_bytes(static_cast<std::size_t>(stats.allocated_bytes.all.current)) +
              "); their segments are leaked");
  }
  sync_and_release(lock);
}

std::size_t AllocatorState::round_size(std::size_t bytes) const {
  if (bytes <= kMinBlockSize) return kMinBlockSize;
  const std::size_t divisions = config.roundup_power2_divisions;
  if (divisions > 1 && bytes > kMinBlockSize * divisions) {
    // divisions is a power of two, so floor >= 512 * divisions and the step is a multiple of 512.
    const std::size_t floor = std::bit_floor(bytes);
    const std::size_t step = floor / divisions;
    return (bytes + step - 1) / step * step;
  }
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

std::size_t AllocatorState::segment_size(std::size_t rounded) const {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

Block* AllocatorState::allocate(std::size_t bytes, runtime::StreamImpl* stream) {
  if (bytes > kMaxRequest) {
    throw Error(Status::invalid_argument,
                "allocate on " + name + ": " + std::to_string(bytes) +
                    " bytes exceeds the largest request the allocator accepts (2^62 bytes)");
  }
  std::unique_lock lock(mutex);
  if (!pending_.empty()) process_events();
  // Pools are refused without caching (create_pool), so routed requests always take the cached path.
  PrivatePool* owner = routes_.empty() ? nullptr : routed_pool(stream);
  if (!config.caching) return allocate_uncached(bytes, stream, lock);

  const std::size_t size = round_size(bytes);
  const bool small = size <= kSmallSize;
  Block* block = find_cached(size, small, stream, owner);
  if (block != nullptr) {
    ++stats.cache_hits;
  } else {
    ++stats.cache_misses;
    const std::size_t segment_bytes = segment_size(size);
    bool over_fraction = false;
    std::string backend_message;
    block = try_new_segment(segment_bytes, small, stream, owner, over_fraction, backend_message);
    if (block == nullptr) {
      // As PyTorch: wait for the device, release the cache, and try once more. While a stream
      // allocates to a private pool it may be capturing, which a device-wide wait would break.
      ++stats.num_alloc_retries;
      if (routes_.empty()) {
        sync_and_release(lock);
      } else {
        release_without_sync();
      }
      owner = routes_.empty() ? nullptr : routed_pool(stream);
      block = find_cached(size, small, stream, owner);
      if (block == nullptr)
        block = try_new_segment(segment_bytes, small, stream, owner, over_fraction, backend_message);
      if (block == nullptr) {
        ++stats.num_ooms;
        throw Error(Status::out_of_memory,
                    oom_message_locked(bytes, segment_bytes, over_fraction, backend_message));
      }
    }
  }
  block = split_for(block, size);
  block->allocated = true;
  block->stream = stream;
  block->requested = bytes;
  stats.allocation.increase(small, 1);
  stats.allocated_bytes.increase(small, static_cast<std::int64_t>(block->size));
  stats.active.increase(small, 1);
  stats.active_bytes.increase(small, static_cast<std::int64_t>(block->size));
  stats.requested_bytes.increase(small, static_cast<std::int64_t>(bytes));
  return block;
}

PrivatePool* AllocatorState::routed_pool(const runtime::StreamImpl* stream) const {
  for (const auto& [routed, pool] : routes_) {
    if (routed == stream) return pool;
  }
  return nullptr;
}

Block* AllocatorState::find_cached(std::size_t size, bool small, runtime::StreamImpl* stream,
                                   PrivatePool* owner) {
  Pool& pool = pool_of(small, owner);
  Block* block = take_free_block(pool, stream, size);
  // Blocks free for any stream (no-stream frees, completed record_stream frees) come second, so a
  // stream keeps reusing its own recent memory first.
  if (block == nullptr && stream != nullptr) block = take_free_block(pool, nullptr, size);
  return block;
}

Block* AllocatorState::take_free_block(Pool& pool, runtime::StreamImpl* key, std::size_t size) {
  Block probe;
  probe.stream = key;
  probe.size = size;
  const auto it = pool.lower_bound(&probe);
  if (it == pool.end() || (*it)->stream != key) return nullptr;
  Block* block = *it;
  // PyTorch's max_split_size rules: small requests never carve up a big unsplittable block, and a
  // big request takes one only when little would be wasted.
  if (size < config.max_split_size && block->size >= config.max_split_size) return nullptr;
  if (size >= config.max_split_size && block->size - size >= config.max_non_split_rounding) return nullptr;
  pool_erase(pool, it);
  return block;
}

Block* AllocatorState::try_new_segment(std::size_t segment_bytes, bool small, runtime::StreamImpl* stream,
                                       PrivatePool* owner, bool& over_fraction,
                                       std::string& backend_message) {
  const auto reserved = static_cast<std::size_t>(stats.reserved_bytes.all.current);
  if (reserve_limit_ != SIZE_MAX &&
      (segment_bytes > reserve_limit_ || reserved > reserve_limit_ - segment_bytes)) {
    over_fraction = true;
    return nullptr;
  }
  Block* block = new_block();  // before raw_alloc, so a host allocation failure leaks no device memory
  void* ptr = nullptr;
  try {
    ptr = impl.raw_alloc(segment_bytes);
  } catch (const Error& e) {
    recycle_block(block);
    if (e.status() != Status::out_of_memory) throw;
    backend_message = e.what();
    return nullptr;
  } catch (...) {
    recycle_block(block);
    throw;
  }
  if (ptr == nullptr) {
    recycle_block(block);
    backend_message = "raw_alloc returned null";
    return nullptr;
  }
  adopt_segment(block, ptr, segment_bytes, small, stream, owner);
  return block;
}

void AllocatorState::adopt_segment(Block* block, void* ptr, std::size_t bytes, bool small,
                                   runtime::StreamImpl* stream, PrivatePool* owner) {
  block->ptr = static_cast<char*>(ptr);
  block->size = bytes;
  block->small = small;
  block->stream = stream;
  block->pool = owner;
  try {
    segments_.emplace(block->ptr, Segment{block, bytes, small, stream});
  } catch (...) {
    impl.raw_free(ptr);
    recycle_block(block);
    throw;
  }
  if (owner != nullptr) owner->reserved_bytes += bytes;
  ++stats.num_device_alloc;
  stats.segment.increase(small, 1);
  stats.reserved_bytes.increase(small, static_cast<std::int64_t>(bytes));
}

Block* AllocatorState::split_for(Block* block, std::size_t size) {
  const std::size_t remaining = block->size - size;
  const bool split =
      block->small ? remaining >= kMinBlockSize : (size < config.max_split_size && remaining > kSmallSize);
  if (!split) return block;
  // The allocated part keeps the lower address and the Block object, so a segment's head is stable.
  Block* rest = new_block();
  rest->ptr = block->ptr + size;
  rest->size = remaining;
  rest->small = block->small;
  rest->pool = block->pool;
  rest->stream = block->stream;
  rest->prev = block;
  rest->next = block->next;
  if (block->next != nullptr) block->next->prev = rest;
  block->next = rest;
  block->size = size;
  pool_insert(rest);
  return block;
}

Block* AllocatorState::allocate_uncached(std::size_t bytes, runtime::StreamImpl* stream,
                                         std::unique_lock<std::mutex>& lock) {
  ++stats.cache_misses;
  const bool small = bytes <= kSmallSize;
  std::string backend_message;
  const auto try_raw = [&]() -> void* {
    try {
      void* ptr = impl.raw_alloc(bytes);
      if (ptr == nullptr) backend_message = "raw_alloc returned null";
      return ptr;
    } catch (const Error& e) {
      if (e.status() != Status::out_of_memory) throw;
      backend_message = e.what();
      return nullptr;
    }
  };
  void* ptr = try_raw();
  if (ptr == nullptr && !pending_.empty()) {
    // Freed buffers whose stream work is still pending hold memory: wait for them once.
    ++stats.num_alloc_retries;
    sync_and_release(lock);
    ptr = try_raw();
  }
  if (ptr == nullptr) {
    ++stats.num_ooms;
    throw Error(Status::out_of_memory, oom_message_locked(bytes, bytes, false, backend_message));
  }
  Block* block;
  try {
    block = new_block();
  } catch (...) {
    impl.raw_free(ptr);
    throw;
  }
  adopt_segment(block, ptr, bytes, small, stream, nullptr);
  block->allocated = true;
  block->requested = bytes;
  stats.allocation.increase(small, 1);
  stats.allocated_bytes.increase(small, static_cast<std::int64_t>(bytes));
  stats.active.increase(small, 1);
  stats.active_bytes.increase(small, static_cast<std::int64_t>(bytes));
  stats.requested_bytes.increase(small, static_cast<std::int64_t>(bytes));
  return block;
}

void AllocatorState::free(Block* block) noexcept {
  std::lock_guard lock(mutex);
  stats.allocation.decrease(block->small, 1);
  stats.allocated_bytes.decrease(block->small, static_cast<std::int64_t>(block->size));
  stats.requested_bytes.decrease(block->small, static_cast<std::int64_t>(block->requested));
  block->allocated = false;
  block->requested = 0;
  if (block->pool != nullptr && !block->stream_uses.empty()) {
    // Inside a private pool no event may be recorded (its stream may be capturing): the block
    // stays out of reach until the pool is released.
    block->stream_uses.clear();
    block->pending_events = 1;
    try {
      block->pool->deferred.push_back(block);
    } catch (const std::bad_alloc&) {
      log::error("caching allocator of " + name +
                 ": no host memory to defer a freed block of a private pool; " + format_bytes(block->size) +
                 " stay reserved");
    }
    return;
  }
  // Without a cache the memory goes back to the backend, which on an asynchronous device must
  // wait for the stream's work: the same events as record_stream do that without blocking.
  const bool needs_events = !block->stream_uses.empty() || (!config.caching && block->stream != nullptr);
  if (needs_events) {
    insert_free_events(block);
    if (block->pending_events > 0) return;
    block->stream = nullptr;
  }
  finish_free(block);
}

void AllocatorState::finish_free(Block* block) {
  stats.active.decrease(block->small, 1);
  stats.active_bytes.decrease(block->small, static_cast<std::int64_t>(block->size));
  if (!config.caching) {
    release_segment(block);
    return;
  }
  free_block(block);
}

namespace {
// A free block keyed to stream S may merge with one free for any stream (key nullptr); the result
// belongs to S. Blocks of two different streams stay apart.
bool compatible(const runtime::StreamImpl* a, const runtime::StreamImpl* b) {
  return a == b || a == nullptr || b == nullptr;
}
}  // namespace

void AllocatorState::free_block(Block* block) {
  if (Block* prev = block->prev;
      prev != nullptr && prev->in_pool && compatible(prev->stream, block->stream)) {
    pool_erase(prev);
    if (prev->stream == nullptr) prev->stream = block->stream;
    prev->size += block->size;
    prev->next = block->next;
    if (block->next != nullptr) block->next->prev = prev;
    recycle_block(block);
    block = prev;
  }
  if (Block* next = block->next;
      next != nullptr && next->in_pool && compatible(next->stream, block->stream)) {
    pool_erase(next);
    if (block->stream == nullptr) block->stream = next->stream;
    block->size += next->size;
    block->next = next->next;
    if (next->next != nullptr) next->next->prev = block;
    recycle_block(next);
  }
  pool_insert(block);
}

void AllocatorState::record_stream(Block* block, runtime::StreamImpl& stream) {
  std::lock_guard lock(mutex);
  if (!block->allocated) throw Error(Status::invalid_argument, "record_stream on a freed buffer");
  if (&stream == block->stream) return;
  for (const auto* used : block->stream_uses) {
    if (used == &stream) return;
  }
  block->stream_uses.push_back(&stream);
}

void AllocatorState::insert_free_events(Block* block) noexcept {
  // Events on the owning stream too: once all complete no stream has work on the block left, so
  // it is reused by any stream.
  const auto record_on = [&](runtime::StreamImpl* stream) {
    try {
      auto event = take_event();
      stream->record(*event);
      pending_.push_back({std::move(event), block});
      ++block->pending_events;
    } catch (const std::exception& e) {
      // Without an event the only safe course is to wait now; if even that fails the block is
      // kept out of the pools for good rather than risk handing out memory still in use.
      try {
        stream->synchronize();
        log::warn("caching allocator of " + name + ": recording a free event failed (" + e.what() +
                  "); synchronised the stream instead");
      } catch (const std::exception& e2) {
        ++block->pending_events;
        log::error("caching allocator of " + name + ": cannot record or wait for a free event (" + e2.what() +
                   "); a block of " + format_bytes(block->size) + " is leaked");
      }
    }
  };
  if (block->stream != nullptr) record_on(block->stream);
  for (auto* used : block->stream_uses) record_on(used);
  block->stream_uses.clear();
}

void AllocatorState::process_events() {
  for (std::size_t i = 0; i < pending_.size();) {
    bool done = false;
    try {
      done = pending_[i].event->query();
    } catch (const std::exception& e) {
      log::warn_once("alloc-event-query", "caching allocator of " + name + ": event query failed (" +
                                              e.what() + "); the block stays reserved");
    }
    if (!done) {
      ++i;
      continue;
    }
    Block* block = pending_[i].block;
    spare_events_.push_back(std::move(pending_[i].event));
    if (i + 1 != pending_.size()) pending_[i] = std::move(pending_.back());
    pending_.pop_back();
    if (--block->pending_events == 0) {
      block->stream = nullptr;
      finish_free(block);
    }
  }
}

void AllocatorState::empty_cache() {
  std::unique_lock lock(mutex);
  if (routes_.empty()) {
    sync_and_release(lock);
  } else {
    release_without_sync();
  }
}

void AllocatorState::sync_and_release(std::unique_lock<std::mutex>& lock) {
  // Unlocked while waiting: work on a stream may free buffers (a host task owning one), which
  // needs this lock.
  lock.unlock();
  bool synced = true;
  try {
    impl.synchronize();
  } catch (const std::exception& e) {
    synced = false;
    log::warn("caching allocator of " + name + ": device synchronize failed (" + e.what() +
              "); only memory free for every stream is released");
  }
  lock.lock();
  ++stats.num_sync_all_streams;
  process_events();
  if (synced && config.caching) make_free_blocks_shared();
  release_free_segments(synced);
}

void AllocatorState::make_free_blocks_shared() {
  // After a device-wide synchronize no stream has work on a free block, so each becomes free for
  // every stream and neighbours that stayed apart because of their streams merge now.
  for (auto& entry : segments_) {
    for (Block* block = entry.second.head; block != nullptr; block = block->next) {
      if (!block->in_pool) continue;
      pool_erase(block);
      block->stream = nullptr;
      while (block->next != nullptr && block->next->in_pool) {
        Block* next = block->next;
        pool_erase(next);
        block->size += next->size;
        block->next = next->next;
        if (next->next != nullptr) next->next->prev = block;
        recycle_block(next);
      }
      pool_insert(block);
    }
  }
}

void AllocatorState::release_free_segments(bool synced) {
  for (auto it = segments_.begin(); it != segments_.end();) {
    Block* head = it->second.head;
    ++it;  // release_segment erases the current entry
    // A private pool's segments stay while it lives: its graph may replay into them.
    if (head->pool != nullptr) continue;
    if (head->in_pool && !head->is_split() && (synced || head->stream == nullptr)) release_segment(head);
  }
}

void AllocatorState::release_without_sync() {
  process_events();
  release_free_segments(false);
}

// ---- private pools ---------------------------------------------------------------------------

std::uint64_t AllocatorState::create_pool() {
  std::lock_guard lock(mutex);
  if (!config.caching) {
    throw Error(Status::unsupported, "caching allocator of " + name +
                                         ": private pools (graph capture) need the cache, which "
                                         "GALLEY_NO_CACHING=1 turns off");
  }
  const std::uint64_t id = next_pool_id_++;
  auto pool = std::make_unique<PrivatePool>();
  pool->id = id;
  private_pools_.emplace(id, std::move(pool));
  return id;
}

PrivatePool& AllocatorState::find_pool(std::uint64_t id, const char* op) {
  const auto it = private_pools_.find(id);
  if (it == private_pools_.end()) {
    throw Error(Status::invalid_argument, std::string(op) + ": private pool " + std::to_string(id) +
                                              " does not exist in the allocator of " + name +
                                              " (never created, or released)");
  }
  return *it->second;
}

void AllocatorState::begin_allocate_to_pool(std::uint64_t id, runtime::StreamImpl* stream) {
  std::lock_guard lock(mutex);
  PrivatePool& pool = find_pool(id, "begin_allocate_to_pool");
  if (stream == nullptr) {
    throw Error(Status::invalid_argument, "begin_allocate_to_pool: private pool " + std::to_string(id) +
                                              " needs a stream (allocations without one are never routed)");
  }
  if (const PrivatePool* current = routed_pool(stream)) {
    throw Error(Status::invalid_argument,
                "begin_allocate_to_pool: the stream already allocates to private pool " +
                    std::to_string(current->id) + " of " + name +
                    "; pools do not nest, end_allocate_to_pool first");
  }
  routes_.emplace_back(stream, &pool);
  ++pool.routed_streams;
}

void AllocatorState::end_allocate_to_pool(std::uint64_t id, runtime::StreamImpl* stream) {
  std::lock_guard lock(mutex);
  for (auto it = routes_.begin(); it != routes_.end(); ++it) {
    if (it->first != stream) continue;
    if (it->second->id != id) {
      throw Error(Status::invalid_argument, "end_allocate_to_pool: the stream allocates to private pool " +
                                                std::to_string(it->second->id) + " of " + name +
                                                ", not to pool " + std::to_string(id));
    }
    --it->second->routed_streams;
    routes_.erase(it);
    return;
  }
  throw Error(Status::invalid_argument,
              "end_allocate_to_pool: the stream does not allocate to private pool " + std::to_string(id) +
                  " of " + name + " (no begin_allocate_to_pool)");
}

void AllocatorState::release_pool(std::uint64_t id) {
  std::lock_guard lock(mutex);
  PrivatePool& pool = find_pool(id, "release_pool");
  if (pool.routed_streams > 0) {
    throw Error(Status::invalid_argument, "release_pool: " + std::to_string(pool.routed_streams) +
                                              " stream(s) still allocate to private pool " +
                                              std::to_string(id) + " of " + name +
                                              "; end_allocate_to_pool first");
  }
  release_pool_locked(pool);
}

void AllocatorState::release_pool_locked(PrivatePool& pool) {
  // Every block of the pool's segments joins the general cache: free ones keep their stream key
  // (stream-ordered reuse after the graph's last replay on it), live ones go there when freed.
  for (auto& entry : segments_) {
    Block* head = entry.second.head;
    if (head->pool != &pool) continue;
    for (Block* block = head; block != nullptr; block = block->next) {
      if (block->in_pool) {
        pool_erase(block);
        block->pool = nullptr;
        pool_insert(block);
      } else {
        block->pool = nullptr;
      }
    }
  }
  for (Block* block : pool.deferred) {
    block->pending_events = 0;
    finish_free(block);
  }
  private_pools_.erase(pool.id);
}

std::size_t AllocatorState::pool_reserved_bytes(std::uint64_t id) {
  std::lock_guard lock(mutex);
  return find_pool(id, "pool_reserved_bytes").reserved_bytes;
}

std::size_t AllocatorState::private_reserved_locked() const {
  std::size_t bytes = 0;
  for (const auto& [id, pool] : private_pools_) bytes += pool->reserved_bytes;
  return bytes;
}

void AllocatorState::release_segment(Block* head) {
  if (head->in_pool) pool_erase(head);
  impl.raw_free(head->ptr);
  ++stats.num_device_free;
  stats.segment.decrease(head->small, 1);
  stats.reserved_bytes.decrease(head->small, static_cast<std::int64_t>(head->size));
  segments_.erase(head->ptr);
  recycle_block(head);
}

void AllocatorState::pool_insert(Block* block) {
  block->in_pool = true;
  if (block->is_split()) {
    stats.inactive_split.increase(block->small, 1);
    stats.inactive_split_bytes.increase(block->small, static_cast<std::int64_t>(block->size));
  }
  Pool& pool = pool_of(block);
  if (!spare_nodes_.empty()) {
    auto node = std::move(spare_nodes_.back());
    spare_nodes_.pop_back();
    node.value() = block;
    pool.insert(std::move(node));
  } else {
    pool.insert(block);
  }
}

void AllocatorState::pool_erase(Block* block) {
  Pool& pool = pool_of(block);
  pool_erase(pool, pool.find(block));
}

void AllocatorState::pool_erase(Pool& pool, Pool::iterator it) {
  Block* block = *it;
  spare_nodes_.push_back(pool.extract(it));
  block->in_pool = false;
  // A free block's neighbours change only while it is out of the pool, so this matches its insert.
  if (block->is_split()) {
    stats.inactive_split.decrease(block->small, 1);
    stats.inactive_split_bytes.decrease(block->small, static_cast<std::int64_t>(block->size));
  }
}

Block* AllocatorState::new_block() {
  Block* block;
  if (!spare_blocks_.empty()) {
    block = spare_blocks_.back();
    spare_blocks_.pop_back();
  } else {
    block = &block_storage_.emplace_back();
  }
  block->ptr = nullptr;
  block->size = 0;
  block->requested = 0;
  block->stream = nullptr;
  block->pool = nullptr;
  block->prev = block->next = nullptr;
  block->small = block->allocated = block->in_pool = false;
  block->pending_events = 0;
  block->stream_uses.clear();
  return block;
}

void AllocatorState::recycle_block(Block* block) { spare_blocks_.push_back(block); }

std::unique_ptr<runtime::EventImpl> AllocatorState::take_event() {
  if (!spare_events_.empty()) {
    auto event = std::move(spare_events_.back());
    spare_events_.pop_back();
    return event;
  }
  return impl.create_event(false);
}

}  // namespace galley::memory::detail
