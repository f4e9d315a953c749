#include "galley/runtime/stream.hpp"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/config.hpp"
#include "galley/core/env.hpp"
#include "galley/core/error.hpp"
#include "profile/tracer.hpp"
#include "runtime/backend.hpp"
#include "runtime/launch_trace.hpp"

namespace galley::runtime {
namespace {

// The configuration snapshot, read once per process (a pointer load per launch).
bool launch_blocking() { return env::config().launch_blocking; }

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

// A copy or memset: a launch whose trace records its bytes.
void launch_bytes(Stream& stream, std::string_view op, std::size_t bytes,
                  const std::function<void()>& enqueue);
// A launch with its host and device spans (profiling on).
void launch_traced(Stream& stream, std::string_view op, std::size_t bytes,
                   const std::function<void()>& enqueue);

}  // namespace

Event::Event(const Device& device, bool enable_timing)
    : device_(device), impl_(device.impl().create_event(enable_timing)) {}

Event::~Event() = default;
Event::Event(Event&& other) noexcept = default;
Event& Event::operator=(Event&& other) noexcept = default;

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

Graph::~Graph() = default;
Graph::Graph(Graph&& other) noexcept = default;
Graph& Graph::operator=(Graph&& other) noexcept = default;

std::size_t Graph::node_count() const { return impl_->node_count(); }

void Graph::replay(Stream& stream) {
  if (!(stream.device() == device_)) {
    throw Error(Status::invalid_argument, "graph captured on " + device_.name() + " replayed on a stream of " +
                                              stream.device().name());
  }
  // Traced as one launch, so a replay is a device span on its stream (its kernels, seen by an
  // activity source, beneath it) and a captured run's gaps compare with an eager run's.
  if (profile::enabled()) {
    launch_traced(stream, profile::graph_replay_name(impl_->node_count()), 0,
                  [&] { impl_->replay(stream.impl()); });
    return;
  }
  impl_->replay(stream.impl());
}

namespace {
std::uint64_t next_stream_id() {
  static std::atomic<std::uint64_t> last{0};
  return ++last;
}
}  // namespace

namespace {
// A stream is where work starts: the configuration is validated before the first one exists.
std::unique_ptr<StreamImpl> create_checked_stream(const Device& device) {
  env::check();
  detail::start_tracing_once();
  auto impl = device.impl().create_stream();
  if (!impl)
    throw Error(Status::backend_error, "stream creation on " + device.name() + " returned no stream");
  return impl;
}
}  // namespace

Stream::Stream(const Device& device)
    : device_(device), impl_(create_checked_stream(device)), id_(next_stream_id()) {}

Stream::~Stream() {
  if (impl_) detail::end_launch_traces(id_);
}
Stream::Stream(Stream&& other) noexcept = default;
Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (impl_) detail::end_launch_traces(id_);  // the stream this one was is destroyed here
    device_ = std::move(other.device_);
    impl_ = std::move(other.impl_);
    id_ = other.id_;
  }
  return *this;
}

void* Stream::native_handle() { return impl_->native_handle(); }

SynchronizeOnExit::~SynchronizeOnExit() {
  // An event rather than stream.synchronize(): waiting must not consume the error of a failed
  // task, which the stream's next synchronize() still reports.
  try {
    Event done(stream_.device(), false);
    done.record(stream_);
    done.synchronize();
  } catch (const std::exception&) {
    // Recording failed: fall back to a device-wide wait, which also leaves errors in place.
    try {
      stream_.device().synchronize();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "galley: cannot wait for the stream on %s before freeing its memory: %s\n",
                   stream_.device().name().c_str(), e.what());
    }
  }
}

void Stream::copy_h2d(void* dst, const void* src, std::size_t bytes) {
  check_range("copy_h2d", "dst", dst, bytes);
  check_range("copy_h2d", "src", src, bytes);
  if (bytes != 0) launch_bytes(*this, "copy_h2d", bytes, [&] { impl_->copy_h2d(dst, src, bytes); });
}

void Stream::copy_d2h(void* dst, const void* src, std::size_t bytes) {
  check_range("copy_d2h", "dst", dst, bytes);
  check_range("copy_d2h", "src", src, bytes);
  if (bytes != 0) launch_bytes(*this, "copy_d2h", bytes, [&] { impl_->copy_d2h(dst, src, bytes); });
}

void Stream::copy_d2d(void* dst, const void* src, std::size_t bytes) {
  check_range("copy_d2d", "dst", dst, bytes);
  check_range("copy_d2d", "src", src, bytes);
  if (bytes != 0) launch_bytes(*this, "copy_d2d", bytes, [&] { impl_->copy_d2d(dst, src, bytes); });
}

void Stream::copy_h2h(void* dst, const void* src, std::size_t bytes) {
  check_range("copy_h2h", "dst", dst, bytes);
  check_range("copy_h2h", "src", src, bytes);
  if (bytes != 0) launch_bytes(*this, "copy_h2h", bytes, [&] { impl_->copy_h2h(dst, src, bytes); });
}

void Stream::memset(void* dst, int value, std::size_t bytes) {
  check_range("memset", "dst", dst, bytes);
  if (bytes != 0) launch_bytes(*this, "memset", bytes, [&] { impl_->memset(dst, value, bytes); });
}

namespace {

void launch_now(Stream& stream, std::string_view op, const std::function<void()>& enqueue) {
  try {
    enqueue();
  } catch (const Error& e) {
    throw Error(e.status(), std::string(op) + " on " + stream.device().name() + ": " + e.what());
  }
  if (launch_blocking() && !stream.impl().capturing()) {
    try {
      stream.impl().synchronize();
    } catch (const Error& e) {
      throw Error(e.status(), "GALLEY_LAUNCH_BLOCKING: op '" + std::string(op) + "' on " +
                                  stream.device().name() + " failed: " + e.what());
    } catch (const std::exception& e) {
      throw Error(Status::internal, "GALLEY_LAUNCH_BLOCKING: op '" + std::string(op) + "' on " +
                                        stream.device().name() + " failed: " + e.what());
    }
  }
}

void launch_traced(Stream& stream, std::string_view op, std::size_t bytes,
                   const std::function<void()>& enqueue) {
  detail::LaunchTrace trace(stream, op, bytes);
  {
    // Vendor API calls made by the enqueue belong to this launch (activity_source.hpp).
    const profile::LaunchScope current(trace.record());
    launch_now(stream, op, enqueue);
  }
  trace.finish();
}

void launch_bytes(Stream& stream, std::string_view op, std::size_t bytes,
                  const std::function<void()>& enqueue) {
  if (profile::enabled()) return launch_traced(stream, op, bytes, enqueue);
  launch_now(stream, op, enqueue);
}

}  // namespace

void Stream::launch(std::string_view op, const std::function<void()>& enqueue) {
  if (profile::enabled()) return launch_traced(*this, op, 0, enqueue);
  launch_now(*this, op, enqueue);
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

void Stream::synchronize() {
  impl_->synchronize();
  if (profile::enabled()) detail::resolve_launch_traces(id_, false);
}

bool Stream::query() { return impl_->query(); }

void Stream::begin_capture() { impl_->begin_capture(); }

Graph Stream::end_capture() { return Graph(device_, impl_->end_capture()); }

namespace {
void* checked_pinned_alloc(const Device& device, std::size_t bytes) {
  void* ptr = device.impl().pinned_alloc(bytes);
  if (ptr == nullptr) {
    throw Error(Status::out_of_memory, "pinned_alloc of " + std::to_string(bytes) + " bytes on " +
                                           device.name() + " returned no memory");
  }
  return ptr;
}

// Work queued on any stream of the device may still read or write the block (a copy from it on
// an error path, say), so it is freed only once the device is idle, as cudaFreeHost does.
void free_pinned_after_device_work(const Device& device, void* ptr) noexcept {
  try {
    device.synchronize();
  } catch (const std::exception& e) {
    // The work failed, but it has finished: a failed synchronize still means nothing is pending
    // on cpu; a GPU backend's synchronize only fails once its context is unusable.
    std::fprintf(stderr, "galley: device synchronize before freeing pinned memory on %s failed: %s\n",
                 device.name().c_str(), e.what());
  }
  device.impl().pinned_free(ptr);
}
}  // namespace

PinnedBuffer::PinnedBuffer(const Device& device, std::size_t bytes)
    : device_(device), ptr_(checked_pinned_alloc(device, bytes)), bytes_(bytes) {}

PinnedBuffer::~PinnedBuffer() {
  if (ptr_ != nullptr) free_pinned_after_device_work(device_, ptr_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : device_(other.device_), ptr_(other.ptr_), bytes_(other.bytes_) {
  other.ptr_ = nullptr;
  other.bytes_ = 0;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) free_pinned_after_device_work(device_, ptr_);
    device_ = other.device_;
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    other.ptr_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

}  // namespace galley::runtime
