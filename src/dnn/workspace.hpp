// Stream-ordered scratch memory for one op (solver workspace, bench and test buffers).
//
// Interim: until the caching allocator (galley/memory, memory::allocate) lands, this takes memory
// straight from the backend and, because a raw free is not stream-ordered, synchronises the
// stream before giving it back. Swap the body for memory::allocate(stream, bytes) then; the
// interface stays.
#pragma once

#include <cstddef>

#include "galley/runtime/stream.hpp"

namespace galley::dnn {

class Workspace {
 public:
  /// `bytes` of memory of stream.device(), usable by work enqueued on `stream`. 0 bytes: data() is null.
  Workspace(runtime::Stream& stream, std::size_t bytes) : stream_(&stream), bytes_(bytes) {
    if (bytes_ > 0) ptr_ = stream.device().impl().raw_alloc(bytes_);
  }
  ~Workspace() { release(); }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  void* data() const { return ptr_; }
  std::size_t size() const { return bytes_; }

 private:
  void release() noexcept {
    if (ptr_ == nullptr) return;
    try {
      stream_->synchronize();  // work using the memory may still be in flight
    } catch (...) {
      // The stream's error is reported by the caller's own synchronize; the memory is freed anyway.
    }
    stream_->device().impl().raw_free(ptr_);
    ptr_ = nullptr;
  }

  runtime::Stream* stream_;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace galley::dnn
