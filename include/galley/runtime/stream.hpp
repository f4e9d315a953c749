// Streams, events and graphs: RAII wrappers over a backend's objects with argument checks,
// op naming and GALLEY_LAUNCH_BLOCKING.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "galley/runtime/device.hpp"

namespace galley::runtime {

// The backend's objects (plugin ABI, internal: src/runtime/backend.hpp). The wrappers below hold
// them by unique_ptr, so everything that must see them complete is defined in stream.cpp.
class EventImpl;
class GraphImpl;
class StreamImpl;
class Stream;

/// A marker in a stream's work. Timing is enabled by default.
class Event {
 public:
  explicit Event(const Device& device, bool enable_timing = true);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  const Device& device() const { return device_; }
  void record(Stream& stream);
  bool query();
  void synchronize();
  /// Milliseconds from `start` to this event. Both must be recorded and complete.
  float elapsed_ms_since(Event& start);
  EventImpl& impl() { return *impl_; }

 private:
  Device device_;
  std::unique_ptr<EventImpl> impl_;
  bool recorded_ = false;
};

/// A replayable recording of a stream's work.
class Graph {
 public:
  ~Graph();
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  void replay(Stream& stream);
  std::size_t node_count() const;

 private:
  friend class Stream;  // end_capture() makes graphs
  Graph(Device device, std::unique_ptr<GraphImpl> impl);
  Device device_;
  std::unique_ptr<GraphImpl> impl_;
};

/// An ordered asynchronous work queue on one device. Not copyable; movable.
class Stream {
 public:
  /// Validates the GALLEY_* configuration first (env::check()); Error when the backend cannot
  /// create the stream.
  explicit Stream(const Device& device);
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  const Device& device() const { return device_; }

  /// Copies. Null pointers with bytes > 0, or ranges whose end overflows, throw
  /// Error(invalid_argument) naming the argument. bytes == 0 is a no-op.
  void copy_h2d(void* dst, const void* src, std::size_t bytes);
  void copy_d2h(void* dst, const void* src, std::size_t bytes);
  void copy_d2d(void* dst, const void* src, std::size_t bytes);
  void copy_h2h(void* dst, const void* src, std::size_t bytes);
  void memset(void* dst, int value, std::size_t bytes);

  /// The launch path every solver uses: `enqueue` puts the op's work on this stream (a kernel
  /// launch on GPU, a host_task on cpu). Errors raised while enqueueing name `op`. With
  /// GALLEY_LAUNCH_BLOCKING=1 the stream is synchronised after the op and a failure names it.
  void launch(std::string_view op, const std::function<void()>& enqueue);
  /// Runs `fn` on a host thread once all earlier work on this stream has completed; later work
  /// waits for it.
  void host_task(std::function<void()> fn);

  void wait(Event& event);
  /// Waits for all enqueued work. A task that failed since the last synchronize() is rethrown
  /// here, once (the first failure); the stream stays usable and later work runs normally.
  void synchronize();
  bool query();

  void begin_capture();
  Graph end_capture();

  StreamImpl& impl() { return *impl_; }
  /// cudaStream_t / hipStream_t, or nullptr on cpu.
  void* native_handle();
  /// Unique among the process's streams, never reused (a native handle can be: a destroyed stream's
  /// address comes back for a new one). Vendor handles remember the stream they were set to by it.
  std::uint64_t id() const { return id_; }

 private:
  Device device_;
  std::unique_ptr<StreamImpl> impl_;
  std::uint64_t id_;
};

/// Waits, when destroyed, for the work enqueued on `stream` so far, without throwing and without
/// consuming a failed task's error (the stream's next synchronize() reports it). Declare it after
/// the host buffers a stream's copies read or write: on every path out of the scope, an exception
/// included, the stream has finished with them before they are freed.
class SynchronizeOnExit {
 public:
  explicit SynchronizeOnExit(Stream& stream) : stream_(stream) {}
  ~SynchronizeOnExit();
  SynchronizeOnExit(const SynchronizeOnExit&) = delete;
  SynchronizeOnExit& operator=(const SynchronizeOnExit&) = delete;

 private:
  Stream& stream_;
};

/// Pinned host memory for `device`, RAII. On cpu it is ordinary aligned memory. Allocation
/// failure is Error(out_of_memory). The destructor waits until the device is idle before freeing
/// (as cudaFreeHost does), so work still queued on any stream never touches freed memory; do not
/// destroy one from inside a task of that device.
class PinnedBuffer {
 public:
  PinnedBuffer(const Device& device, std::size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* data() const { return ptr_; }
  std::size_t size() const { return bytes_; }

 private:
  Device device_;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace galley::runtime
