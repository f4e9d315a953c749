#include "galley/runtime/stream.hpp"

#include <atomic>
#include <cstdint>
#include <string>

#include "galley/core/env.hpp"
#include "galley/core/error.hpp"

namespace galley::runtime {
namespace {

// Read on every launch (a getenv, tens of nanoseconds) so a test or tool can toggle it at run time.
bool launch_blocking() { return env::get_flag("GALLEY_LAUNCH_BLOCKING"); }

std::string pointer_text(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

// Rejects null pointers and ranges that wrap the address space (SIZE_MAX sizes) before any
// backend sees them, so a bad argument is an Error, not a segfault on a worker thread.
void check_range(const char* op, const char* which, const void* ptr, std::size_t bytes) {
  if (bytes == 0) return;
  if (ptr == nullptr) {
    throw Error(Status::invalid_argument,
                std::string(op) + ": " + which + " is null with " + std::to_string(bytes) + " bytes to copy");
  }
  const auto start = reinterpret_cast<std::uintptr_t>(ptr);
  if (bytes > UINTPTR_MAX - start) {
    throw Error(Status::invalid_argument, std::string(op) + ": " + which + " range [" + pointer_text(ptr) + ", +" +
                                              std::to_string(bytes) + ") overflows the address space");
  }
}

}  // namespace

Event::Event(const Device& device, bool enable_timing)
    : device_(device), impl_(device.impl().create_event(enable_timing)) {}

void Event::record(Stream& stream) {
  if (!(stream.device() == device_)) {
    throw Error(Status::invalid_argument, "event of " + device_.name() + " recorded on a stream of " +
                                              stream.device().name());
  }
  stream.impl().record(*impl_);
  recorded_ = true;
}

bool Event::query() { return impl_->query(); }

void Event::synchronize() { impl_->synchronize(); }

float Event::elapsed_ms_since(Event& start) {
  if (!recorded_ || !start.recorded_) {
    throw Error(Status::invalid_argument, "elapsed_ms_since: both events must be recorded first");
  }
  return impl_->elapsed_ms_since(*start.impl_);
}

Graph::Graph(Device device, std::unique_ptr<GraphImpl> impl) : device_(std::move(device)), impl_(std::move(impl)) {}

void Graph::replay(Stream& stream) {
  if (!(stream.device() == device_)) {
    throw Error(Status::invalid_argument, "graph captured on " + device_.name() + " replayed on a stream of " +
                                              stream.device().name());
  }
  impl_->replay(stream.impl());
}

namespace {
std::uint64_t next_stream_id() {
  static std::atomic<std::uint64_t> last{0};
  return ++last;
}
}  // namespace

Stream::Stream(const Device& device)
    : device_(device), impl_(device.impl().create_stream()), id_(next_stream_id()) {}

void Stream::copy_h2d(void* dst, const void* src, std::size_t bytes) {
  check_range("copy_h2d", "dst", dst, bytes);
  check_range("copy_h2d", "src", src, bytes);
  if (bytes != 0) launch("copy_h2d", [&] { impl_->copy_h2d(dst, src, bytes); });
}

void Stream::copy_d2h(void* dst, const void* src, std::size_t bytes) {
  check_range("copy_d2h", "dst", dst, bytes);
  check_range("copy_d2h", "src", src, bytes);
  if (bytes != 0) launch("copy_d2h", [&] { impl_->copy_d2h(dst, src, bytes); });
}

void Stream::copy_d2d(void* dst, const void* src, std::size_t bytes) {
  check_range("copy_d2d", "dst", dst, bytes);
  check_range("copy_d2d", "src", src, bytes);
  if (bytes != 0) launch("copy_d2d", [&] { impl_->copy_d2d(dst, src, bytes); });
}

void Stream::copy_h2h(void* dst, const void* src, std::size_t bytes) {
  check_range("copy_h2h", "dst", dst, bytes);
  check_range("copy_h2h", "src", src, bytes);
  if (bytes != 0) launch("copy_h2h", [&] { impl_->copy_h2h(dst, src, bytes); });
}

void Stream::memset(void* dst, int value, std::size_t bytes) {
  check_range("memset", "dst", dst, bytes);
  if (bytes != 0) launch("memset", [&] { impl_->memset(dst, value, bytes); });
}

void Stream::launch(std::string_view op, const std::function<void()>& enqueue) {
  try {
    enqueue();
  } catch (const Error& e) {
    throw Error(e.status(), std::string(op) + " on " + device_.name() + ": " + e.what());
  }
  if (launch_blocking() && !impl_->capturing()) {
    try {
      impl_->synchronize();
    } catch (const Error& e) {
      throw Error(e.status(), "GALLEY_LAUNCH_BLOCKING: op '" + std::string(op) + "' on " + device_.name() +
                                  " failed: " + e.what());
    } catch (const std::exception& e) {
      throw Error(Status::internal, "GALLEY_LAUNCH_BLOCKING: op '" + std::string(op) + "' on " + device_.name() +
                                        " failed: " + e.what());
    }
  }
}

void Stream::host_task(std::function<void()> fn) {
  if (!fn) throw Error(Status::invalid_argument, "host_task: empty function");
  impl_->host_task(std::move(fn));
}

void Stream::wait(Event& event) {
  if (!(event.device() == device_)) {
    throw Error(Status::invalid_argument, "stream on " + device_.name() + " cannot wait on an event of " +
                                              event.device().name());
  }
  impl_->wait(event.impl());
}

void Stream::synchronize() { impl_->synchronize(); }

bool Stream::query() { return impl_->query(); }

void Stream::begin_capture() { impl_->begin_capture(); }

Graph Stream::end_capture() { return Graph(device_, impl_->end_capture()); }

PinnedBuffer::PinnedBuffer(const Device& device, std::size_t bytes)
    : device_(device), ptr_(device.impl().pinned_alloc(bytes)), bytes_(bytes) {}

PinnedBuffer::~PinnedBuffer() {
  if (ptr_ != nullptr) device_.impl().pinned_free(ptr_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : device_(other.device_), ptr_(other.ptr_), bytes_(other.bytes_) {
  other.ptr_ = nullptr;
  other.bytes_ = 0;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) device_.impl().pinned_free(ptr_);
    device_ = other.device_;
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    other.ptr_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

}  // namespace galley::runtime
