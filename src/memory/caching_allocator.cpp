// CachingAllocator's public face over AllocatorState, and the process-wide allocator per device.
#include "memory/caching_allocator.hpp"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "galley/core/error.hpp"
#include "galley/core/log.hpp"
#include "memory/allocator_state.hpp"
#include "memory/cache_release.hpp"
#include "profile/output_file.hpp"
#include "profile/tracer.hpp"

namespace galley::memory {
namespace {

// An alloc or free with the device's memory after it (the trace's memory counter). Called only
// while tracing.
void trace_allocator(profile::Kind kind, detail::AllocatorState& state, std::size_t bytes) noexcept {
  // The device name as the tracer keeps it, looked up once per allocator and thread.
  thread_local const detail::AllocatorState* named = nullptr;
  thread_local const char* device = "";
  if (named != &state || state.name != device) {
    const char* interned = profile::intern(state.name);
    if (interned == nullptr) return;  // out of memory: an allocation never fails for its trace
    named = &state;
    device = interned;
  }
  profile::MemoryEvent event;
  event.kind = kind;
  event.start_ns = profile::now_ns();
  event.device = device;
  event.bytes = bytes;
  {
    std::lock_guard lock(state.mutex);
    event.allocated = state.stats.allocated_bytes.all.current;
    event.reserved = state.stats.reserved_bytes.all.current;
  }
  profile::record_memory(event);
}

// GALLEY_ALLOC_CONF=snapshot_on_oom:PATH: the state that could not serve a request, written before
// the error leaves the allocator; the error says where it went (or why it could not be written).
Error with_oom_snapshot(const Error& oom, const std::string& snapshot_json, const std::string& path) {
  try {
    profile::write_file_atomically(path, snapshot_json, "the memory snapshot");
    return Error(oom.status(), std::string(oom.what()) + "\nmemory snapshot written to " + path);
  } catch (const Error& e) {
    return Error(oom.status(), std::string(oom.what()) + "\n" + e.what());
  }
}

}  // namespace

CachingAllocator::CachingAllocator(const runtime::Device& device, AllocatorConfig config)
    : state_(std::make_unique<detail::AllocatorState>(device.impl(), device, config, device.name())) {}

CachingAllocator::CachingAllocator(runtime::DeviceImpl& impl, AllocatorConfig config, std::string name)
    : state_(std::make_unique<detail::AllocatorState>(impl, std::nullopt, config, std::move(name))) {}

CachingAllocator::~CachingAllocator() = default;

Buffer CachingAllocator::allocate(std::size_t bytes, runtime::StreamImpl* stream) {
  if (bytes == 0) return Buffer(this, nullptr, nullptr, 0);
  detail::Block* block = nullptr;
  try {
    block = state_->allocate(bytes, stream);
  } catch (const Error& e) {
    if (e.status() != Status::out_of_memory || state_->config.snapshot_on_oom.empty()) throw;
    throw with_oom_snapshot(e, snapshot_json(), state_->config.snapshot_on_oom);
  }
  if (profile::enabled()) trace_allocator(profile::Kind::alloc, *state_, bytes);
  return Buffer(this, block, block->ptr, bytes);
}

Buffer CachingAllocator::allocate(std::size_t bytes, runtime::Stream& stream) {
  if (&stream.device().impl() != &state_->impl) {
    throw Error(Status::invalid_argument, "allocate: the stream is on " + stream.device().name() +
                                              " but this allocator serves " + state_->name);
  }
  return allocate(bytes, &stream.impl());
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(state_->mutex);
  auto& s = state_->stats;
  for (StatByPool* stat : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
                           &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
    stat->reset_peak();
  }
}

void CachingAllocator::empty_cache() { state_->empty_cache(); }

std::string CachingAllocator::snapshot_json() const {
  std::lock_guard lock(state_->mutex);
  return state_->snapshot_json_locked();
}

const AllocatorConfig& CachingAllocator::config() const { return state_->config; }

const std::string& CachingAllocator::device_name() const { return state_->name; }

const runtime::Device& CachingAllocator::device() const {
  if (!state_->device) {
    throw Error(Status::unsupported, "the allocator of '" + state_->name +
                                         "' was built over a bare DeviceImpl and has no registry device");
  }
  return *state_->device;
}

runtime::DeviceImpl& CachingAllocator::device_impl() const { return state_->impl; }

void CachingAllocator::check_invariants() const {
  std::lock_guard lock(state_->mutex);
  state_->check_invariants_locked();
}

void CachingAllocator::free(detail::Block* block) noexcept {
  const std::size_t bytes = block->requested;
  state_->free(block);
  if (profile::enabled()) trace_allocator(profile::Kind::free, *state_, bytes);
}

void CachingAllocator::record_stream(Buffer& buffer, runtime::StreamImpl& stream) {
  if (buffer.allocator_ != this) {
    throw Error(Status::invalid_argument, "record_stream: the buffer is not from the allocator of " +
                                              state_->name);
  }
  if (buffer.block_ == nullptr) return;  // zero bytes or already freed: nothing to protect
  state_->record_stream(buffer.block_, stream);
}

std::uint64_t CachingAllocator::create_pool() { return state_->create_pool(); }

void CachingAllocator::begin_allocate_to_pool(std::uint64_t id, runtime::StreamImpl& stream) {
  state_->begin_allocate_to_pool(id, &stream);
}

void CachingAllocator::end_allocate_to_pool(std::uint64_t id, runtime::StreamImpl& stream) {
  state_->end_allocate_to_pool(id, &stream);
}

void CachingAllocator::release_pool(std::uint64_t id) { state_->release_pool(id); }

std::size_t CachingAllocator::pool_reserved_bytes(std::uint64_t id) const { return state_->pool_reserved_bytes(id); }

PrivatePool::PrivatePool(CachingAllocator& allocator) : allocator_(&allocator), id_(allocator.create_pool()) {}

namespace {
void release_logged(PrivatePool& pool) noexcept {
  try {
    pool.release();
  } catch (const std::exception& e) {
    log::error(std::string("private pool not released, its memory stays reserved: ") + e.what());
  }
}
}  // namespace

PrivatePool::~PrivatePool() { release_logged(*this); }

PrivatePool::PrivatePool(PrivatePool&& other) noexcept
    : allocator_(std::exchange(other.allocator_, nullptr)), id_(std::exchange(other.id_, 0)) {}

PrivatePool& PrivatePool::operator=(PrivatePool&& other) noexcept {
  if (this != &other) {
    release_logged(*this);
    allocator_ = std::exchange(other.allocator_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void PrivatePool::release() {
  if (allocator_ == nullptr) return;
  allocator_->release_pool(id_);
  allocator_ = nullptr;
  id_ = 0;
}

std::size_t PrivatePool::reserved_bytes() const {
  return allocator_ == nullptr ? 0 : allocator_->pool_reserved_bytes(id_);
}

namespace {
CachingAllocator& allocator_of(PrivatePool& pool) {
  if (!pool) throw Error(Status::invalid_argument, "PrivatePoolScope: the PrivatePool is empty (moved from or released)");
  return *pool.allocator();
}
}  // namespace

PrivatePoolScope::PrivatePoolScope(PrivatePool& pool, runtime::Stream& stream)
    : allocator_(allocator_of(pool)), id_(pool.id()), stream_(stream.impl()) {
  if (&stream.device().impl() != &allocator_.device_impl()) {
    throw Error(Status::invalid_argument, "PrivatePoolScope: the stream is on " + stream.device().name() +
                                              " but the pool belongs to the allocator of " + allocator_.device_name());
  }
  allocator_.begin_allocate_to_pool(id_, stream_);
}

PrivatePoolScope::PrivatePoolScope(PrivatePool& pool, runtime::StreamImpl& stream)
    : allocator_(allocator_of(pool)), id_(pool.id()), stream_(stream) {
  allocator_.begin_allocate_to_pool(id_, stream_);
}

PrivatePoolScope::~PrivatePoolScope() {
  try {
    allocator_.end_allocate_to_pool(id_, stream_);
  } catch (const std::exception& e) {
    log::error(std::string("PrivatePoolScope: ") + e.what());
  }
}

namespace {

struct Registry {
  std::mutex mutex;
  std::map<runtime::DeviceImpl*, std::unique_ptr<CachingAllocator>> allocators;
};

Registry& registry() {
  // Never destroyed on purpose: buffers held by static objects may be freed after static
  // destructors have run, and must still find their allocator.
  static Registry& instance = *std::make_unique<Registry>().release();
  return instance;
}

void release_cached_memory_at_exit() { release_all_cached_memory(); }

}  // namespace

void release_all_cached_memory() noexcept {
  // Unlocked while releasing: empty_cache() waits for the device, whose tasks may need the lock
  // (a first allocation on a stream's worker thread). Allocators are never destroyed.
  std::vector<CachingAllocator*> allocators;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    for (auto& entry : r.allocators) allocators.push_back(entry.second.get());
  }
  for (CachingAllocator* allocator : allocators) {
    try {
      const auto before = allocator->stats().reserved_bytes.all.current;
      allocator->empty_cache();
      const auto after = allocator->stats().reserved_bytes.all.current;
      if (log::enabled(log::Level::debug)) {
        log::debug("caching allocator of " + allocator->device_name() + ": released " +
                   std::to_string(before - after) + " cached bytes; " + std::to_string(after) +
                   " bytes still held by live buffers");
      }
    } catch (const std::exception& e) {
      log::warn("caching allocator of " + allocator->device_name() +
                ": releasing the cache failed: " + e.what());
    }
  }
}

CachingAllocator& allocator_for(const runtime::Device& device) {
  runtime::DeviceImpl* impl = &device.impl();
  // The hit path calls this for every allocation: remember the last device per thread.
  thread_local runtime::DeviceImpl* last_impl = nullptr;
  thread_local CachingAllocator* last_allocator = nullptr;
  if (impl == last_impl) return *last_allocator;

  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto& slot = r.allocators[impl];
  if (!slot) {
    slot = std::make_unique<CachingAllocator>(device, AllocatorConfig::from_env());
    // Cached segments go back to the backend at exit, so a leak checker sees only memory that
    // live buffers hold. Registered after the device's backend (and its vendor runtime) started,
    // the handler runs before their teardown: exit runs handlers and static destructors in
    // reverse order of registration.
    static std::once_flag at_exit;
    std::call_once(at_exit, [] { std::atexit(release_cached_memory_at_exit); });
  }
  last_impl = impl;
  last_allocator = slot.get();
  return *slot;
}

}  // namespace galley::memory
