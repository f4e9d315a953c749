// Device memory handed out by the caching allocator, and the checked copies between buffers.
//
// Stream-ordered use: a buffer allocated on stream S may be used on S without further care; it is
// freed (returned to the cache) when the Buffer is destroyed or reset, and the memory may be handed
// out again at once for work on S, which runs after everything already enqueued on S. Using the
// buffer on another stream T requires buffer.record_stream(T) (as torch's Tensor.record_stream):
// then the memory is reused only after the work enqueued on T before the free has completed.
//
// Lifetime contract: the allocator identifies a stream by its backend object, so a Stream must
// outlive every Buffer allocated on it or recorded on it with record_stream.
#pragma once

#include <cstddef>

#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::memory {

class CachingAllocator;
namespace detail {
struct Block;
}

/// RAII device memory from a device's caching allocator. Movable, not copyable.
class Buffer {
 public:
  /// An empty buffer (no memory, no device).
  Buffer() = default;
  ~Buffer() { reset(); }
  Buffer(Buffer&& other) noexcept
      : allocator_(other.allocator_), block_(other.block_), ptr_(other.ptr_), size_(other.size_) {
    other.block_ = nullptr;
    other.ptr_ = nullptr;
    other.size_ = 0;
  }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      reset();
      allocator_ = other.allocator_;
      block_ = other.block_;
      ptr_ = other.ptr_;
      size_ = other.size_;
      other.block_ = nullptr;
      other.ptr_ = nullptr;
      other.size_ = 0;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  /// Device address; nullptr for an empty or zero-byte buffer.
  void* data() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  /// Bytes requested (the block behind it may be larger after rounding).
  std::size_t size() const { return size_; }
  /// The device the memory lives on. Throws Error(invalid_argument) for a default-constructed buffer,
  /// and Error(unsupported) for one from an allocator built over a bare backend device (tests).
  const runtime::Device& device() const;
  /// The allocator that owns the memory (nullptr for a default-constructed buffer).
  CachingAllocator* allocator() const { return allocator_; }
  /// True when the buffer holds memory (false when empty, reset or zero bytes).
  explicit operator bool() const { return ptr_ != nullptr; }

  /// Marks the memory as used by work on `stream` (same device): when freed, it is reused only after
  /// the work enqueued on `stream` up to the free has completed. The stream must outlive the buffer.
  void record_stream(runtime::Stream& stream);

  /// Returns the memory to the cache now (stream-ordered, see above). The buffer becomes empty but
  /// keeps its device.
  void reset() noexcept {
    if (block_ != nullptr) release();
    ptr_ = nullptr;
    size_ = 0;
  }

 private:
  friend class CachingAllocator;
  Buffer(CachingAllocator* allocator, detail::Block* block, void* ptr, std::size_t size)
      : allocator_(allocator), block_(block), ptr_(ptr), size_(size) {}
  void release() noexcept;

  CachingAllocator* allocator_ = nullptr;
  detail::Block* block_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
};

/// Stream-ordered memory on the stream's device; belongs to `stream` (see the top of this file).
/// 0 bytes gives a buffer with data() == nullptr. Too large: Error(out_of_memory) with the details.
Buffer allocate(runtime::Stream& stream, std::size_t bytes);
/// Memory not tied to a stream: once freed it may be reused by any stream at once, so the caller
/// must have synchronised all work using it before the free.
Buffer allocate(const runtime::Device& device, std::size_t bytes);

/// Device-to-device copy of `bytes` on `stream`. Both buffers must be on the stream's device and at
/// least `bytes` long; otherwise Error(invalid_argument) naming the devices or sizes.
void copy(runtime::Stream& stream, Buffer& dst, const Buffer& src, std::size_t bytes);
/// Host-to-device copy into `dst` (same checks; `src` may be pageable or pinned).
void copy_from_host(runtime::Stream& stream, Buffer& dst, const void* src, std::size_t bytes);
/// Device-to-host copy from `src` (same checks).
void copy_to_host(runtime::Stream& stream, void* dst, const Buffer& src, std::size_t bytes);
/// Sets the first `bytes` bytes of `dst` to `value` (same checks).
void memset(runtime::Stream& stream, Buffer& dst, int value, std::size_t bytes);

}  // namespace galley::memory
