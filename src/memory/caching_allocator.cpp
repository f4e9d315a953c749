// CachingAllocator's public face over AllocatorState, and the process-wide allocator per device.
#include "galley/memory/caching_allocator.hpp"

#include <map>
#include <mutex>

#include "galley/core/error.hpp"
#include "memory/allocator_state.hpp"

namespace galley::memory {

CachingAllocator::CachingAllocator(const runtime::Device& device, AllocatorConfig config)
    : state_(std::make_unique<detail::AllocatorState>(device.impl(), device, config, device.name())) {}

CachingAllocator::CachingAllocator(runtime::DeviceImpl& impl, AllocatorConfig config, std::string name)
    : state_(std::make_unique<detail::AllocatorState>(impl, std::nullopt, config, std::move(name))) {}

CachingAllocator::~CachingAllocator() = default;

Buffer CachingAllocator::allocate(std::size_t bytes, runtime::StreamImpl* stream) {
  if (bytes == 0) return Buffer(this, nullptr, nullptr, 0);
  detail::Block* block = state_->allocate(bytes, stream);
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

void CachingAllocator::free(detail::Block* block) noexcept { state_->free(block); }

void CachingAllocator::record_stream(detail::Block* block, runtime::StreamImpl& stream) {
  state_->record_stream(block, stream);
}

CachingAllocator& allocator_for(const runtime::Device& device) {
  runtime::DeviceImpl* impl = &device.impl();
  // The hit path calls this for every allocation: remember the last device per thread.
  thread_local runtime::DeviceImpl* last_impl = nullptr;
  thread_local CachingAllocator* last_allocator = nullptr;
  if (impl == last_impl) return *last_allocator;

  struct Registry {
    std::mutex mutex;
    std::map<runtime::DeviceImpl*, std::unique_ptr<CachingAllocator>> allocators;
  };
  // Never destroyed on purpose: buffers held by static objects may be freed after static
  // destructors have run, and must still find their allocator.
  static Registry& registry = *std::make_unique<Registry>().release();
  std::lock_guard lock(registry.mutex);
  auto& slot = registry.allocators[impl];
  if (!slot) slot = std::make_unique<CachingAllocator>(device, AllocatorConfig::from_env());
  last_impl = impl;
  last_allocator = slot.get();
  return *slot;
}

}  // namespace galley::memory
