// Buffer, the allocate() entry points and the copies that check devices and sizes before any
// backend sees a pointer.
#include "galley/memory/buffer.hpp"

#include <string>

#include "galley/core/error.hpp"
#include "memory/caching_allocator.hpp"

namespace galley::memory {

void Buffer::release() noexcept {
  allocator_->free(block_);
  block_ = nullptr;
}

const runtime::Device& Buffer::device() const {
  if (allocator_ == nullptr) throw Error(Status::invalid_argument, "an empty Buffer has no device");
  return allocator_->device();
}

void Buffer::record_stream(runtime::Stream& stream) {
  if (allocator_ == nullptr) throw Error(Status::invalid_argument, "record_stream on an empty Buffer");
  if (&stream.device().impl() != &allocator_->device_impl()) {
    throw Error(Status::invalid_argument, "record_stream: the buffer is on " + allocator_->device_name() +
                                              " but the stream is on " + stream.device().name());
  }
  allocator_->record_stream(*this, stream.impl());
}

Buffer allocate(runtime::Stream& stream, std::size_t bytes) {
  return allocator_for(stream.device()).allocate(bytes, &stream.impl());
}

Buffer allocate(const runtime::Device& device, std::size_t bytes) {
  return allocator_for(device).allocate(bytes);
}

namespace {

// A buffer used on `stream` must live on the stream's device and hold at least `bytes`.
void check_buffer(const char* op, const char* which, runtime::Stream& stream, const Buffer& buffer,
                  std::size_t bytes) {
  if (buffer.allocator() == nullptr) {
    if (bytes == 0) return;
    throw Error(Status::invalid_argument, std::string(op) + ": " + which + " is an empty Buffer but " +
                                              std::to_string(bytes) + " bytes were asked");
  }
  if (&buffer.allocator()->device_impl() != &stream.device().impl()) {
    throw Error(Status::invalid_argument, std::string(op) + ": " + which + " buffer is on " +
                                              buffer.allocator()->device_name() + " but the stream is on " +
                                              stream.device().name());
  }
  if (bytes > buffer.size()) {
    throw Error(Status::invalid_argument, std::string(op) + ": " + std::to_string(bytes) +
                                              " bytes exceed the " + which + " buffer's " +
                                              std::to_string(buffer.size()) + " bytes");
  }
}

}  // namespace

void copy(runtime::Stream& stream, Buffer& dst, const Buffer& src, std::size_t bytes) {
  check_buffer("copy", "dst", stream, dst, bytes);
  check_buffer("copy", "src", stream, src, bytes);
  stream.copy_d2d(dst.data(), src.data(), bytes);
}

void copy_from_host(runtime::Stream& stream, Buffer& dst, const void* src, std::size_t bytes) {
  check_buffer("copy_from_host", "dst", stream, dst, bytes);
  stream.copy_h2d(dst.data(), src, bytes);
}

void copy_to_host(runtime::Stream& stream, void* dst, const Buffer& src, std::size_t bytes) {
  check_buffer("copy_to_host", "src", stream, src, bytes);
  stream.copy_d2h(dst, src.data(), bytes);
}

void memset(runtime::Stream& stream, Buffer& dst, int value, std::size_t bytes) {
  check_buffer("memset", "dst", stream, dst, bytes);
  stream.memset(dst.data(), value, bytes);
}

}  // namespace galley::memory
