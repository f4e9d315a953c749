// The interface every backend implements (cpu built in; cuda and hip as dlopen'ed plugins).
// Neutral code talks only to these classes; it never includes a vendor header.
//
// Ownership: a Backend owns its DeviceImpls for the life of the process. Streams, events and graphs
// are created by a DeviceImpl and owned (RAII) by the neutral wrappers in stream.hpp.
// Every method reports failure by throwing galley::Error with context (vendor call, code, message).
//
// Internal: plugins are built in-tree with src/ on their include path; the installed headers only
// forward-declare these classes, so users never compile against the ABI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "galley/runtime/device_properties.hpp"

namespace galley::runtime {

/// A device-side event. Created by DeviceImpl::create_event.
class EventImpl {
 public:
  virtual ~EventImpl() = default;
  /// True when all work captured by the last record has completed (true if never recorded).
  virtual bool query() = 0;
  /// Blocks the host until the recorded work completes.
  virtual void synchronize() = 0;
  /// Milliseconds between `start` (earlier) and this event; both recorded with timing enabled.
  virtual float elapsed_ms_since(EventImpl& start) = 0;
};

/// A recorded sequence of a stream's work, replayable on a stream of the same device.
class GraphImpl {
 public:
  virtual ~GraphImpl() = default;
  virtual void replay(class StreamImpl& stream) = 0;
  /// Number of recorded operations (nodes), for tests and `galley prof`.
  virtual std::size_t node_count() const = 0;
};

/// An ordered, asynchronous queue of work on one device. Enqueue calls return at once.
/// Pointers given to copy/memset are raw; the neutral Stream wrapper validates them first.
class StreamImpl {
 public:
  virtual ~StreamImpl() = default;
  /// Host memory -> device memory. `src` may be pageable or pinned; pageable memory may be
  /// consumed before return (as cudaMemcpyAsync does), pinned memory must stay valid until done.
  virtual void copy_h2d(void* dst, const void* src, std::size_t bytes) = 0;
  /// Device -> host. Into pageable memory this may block until the data has arrived.
  virtual void copy_d2h(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void copy_d2d(void* dst, const void* src, std::size_t bytes) = 0;
  /// Host -> host, ordered with the stream's other work.
  virtual void copy_h2h(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void memset(void* dst, int value, std::size_t bytes) = 0;
  /// Runs `fn` on a host thread once all earlier work on this stream has completed; later work
  /// waits for it. This is the cpu launch path and a portable fallback everywhere.
  virtual void host_task(std::function<void()> fn) = 0;
  virtual void record(EventImpl& event) = 0;
  /// Later work on this stream waits until `event` (maybe from another stream) completes.
  virtual void wait(EventImpl& event) = 0;
  /// Blocks the host until all enqueued work completes; rethrows an error raised by that work.
  virtual void synchronize() = 0;
  /// True when no enqueued work is pending.
  virtual bool query() = 0;
  /// Starts recording instead of executing (cudaStreamBeginCapture semantics).
  virtual void begin_capture() = 0;
  /// Stops recording and returns the graph.
  virtual std::unique_ptr<GraphImpl> end_capture() = 0;
  virtual bool capturing() const = 0;
  /// cudaStream_t / hipStream_t, or nullptr on cpu. Solvers of that backend cast it back.
  virtual void* native_handle() = 0;
};

/// One physical device of a backend.
class DeviceImpl {
 public:
  virtual ~DeviceImpl() = default;
  virtual DeviceProperties properties() = 0;
  virtual MemoryInfo memory_info() = 0;
  /// Raw device allocation (cudaMalloc). Throws Error(out_of_memory) when it fails.
  virtual void* raw_alloc(std::size_t bytes) = 0;
  virtual void raw_free(void* ptr) noexcept = 0;
  /// Page-locked host memory usable for async copies with this device.
  virtual void* pinned_alloc(std::size_t bytes) = 0;
  virtual void pinned_free(void* ptr) noexcept = 0;
  virtual std::unique_ptr<StreamImpl> create_stream() = 0;
  virtual std::unique_ptr<EventImpl> create_event(bool enable_timing) = 0;
  /// Blocks until all work on all of this device's streams completes.
  virtual void synchronize() = 0;
  /// Readiness checks for `galley info`: e.g. "built for sm_90, device sm_90: ok".
  /// Each line ends in ": ok" or ": FAIL (<why>)".
  virtual std::vector<std::string> readiness() = 0;
};

/// A backend: a family of devices with one runtime (cpu, cuda, hip).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  /// Devices found. 0 is valid (no GPU, no driver); then unavailable_reason() says why.
  virtual int device_count() = 0;
  virtual std::string unavailable_reason() = 0;
  /// The device with this backend-local index, 0 <= index < device_count().
  virtual DeviceImpl& device(int index) = 0;
};

/// Version of this interface; a plugin built against another version is refused at load.
inline constexpr int kBackendAbiVersion = 1;

/// Registers a backend with the process-wide registry (called by libgalley for cpu and by a
/// plugin's entry point). Registering a name twice throws Error(invalid_argument).
void register_backend(std::unique_ptr<Backend> backend);

}  // namespace galley::runtime

/// Every plugin exports this symbol. It checks `abi_version == kBackendAbiVersion`, registers its
/// backend (and its solvers), and returns 0; on failure it returns non-zero and writes why into
/// `error` (error_capacity bytes, NUL-terminated). It must not throw.
extern "C" int galley_plugin_register(int abi_version, char* error, std::size_t error_capacity);
