// The cpu backend's stream: a worker thread draining an ordered queue, so enqueue returns at once
// and synchronize() really waits, exactly as on a GPU. Events and graphs live here too.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/backend.hpp"

namespace galley::backends::cpu {

/// Completion state shared between an event and the streams that record or wait on it.
struct EventState {
  std::mutex mutex;
  std::condition_variable completed;
  std::uint64_t recorded = 0;   ///< generation of the last record enqueued
  std::uint64_t done = 0;       ///< generation of the last record executed
  std::chrono::steady_clock::time_point when{};
};

class CpuEvent final : public runtime::EventImpl {
 public:
  CpuEvent() : state_(std::make_shared<EventState>()) {}
  bool query() override;
  void synchronize() override;
  float elapsed_ms_since(runtime::EventImpl& start) override;
  const std::shared_ptr<EventState>& state() const { return state_; }

 private:
  std::shared_ptr<EventState> state_;
};

/// A recorded task list; replay enqueues the tasks in order on any cpu stream.
class CpuGraph final : public runtime::GraphImpl {
 public:
  explicit CpuGraph(std::vector<std::function<void()>> tasks) : tasks_(std::move(tasks)) {}
  void replay(runtime::StreamImpl& stream) override;
  std::size_t node_count() const override { return tasks_.size(); }

 private:
  std::vector<std::function<void()>> tasks_;
};

class CpuStream;

/// The live streams of the cpu device, so a device-wide synchronize() can wait for all of them.
class StreamSet {
 public:
  void add(CpuStream* stream);
  void remove(CpuStream* stream);
  /// Waits until every live stream is idle. Errors stay with their streams (each stream's own
  /// synchronize() reports them), as a device sync must not swallow another stream's failure.
  void wait_all_idle();

 private:
  std::mutex mutex_;
  std::vector<CpuStream*> streams_;
};

/// Tasks a cpu stream holds before submit() blocks: the backpressure a GPU's launch queue gives
/// (about a thousand launches), so a loop that enqueues faster than the stream runs waits instead
/// of growing memory without limit.
inline constexpr std::size_t kMaxQueuedTasks = 1024;

class CpuStream final : public runtime::StreamImpl {
 public:
  /// Throws Error(backend_error) when the worker thread cannot be started.
  explicit CpuStream(StreamSet* owner = nullptr);
  ~CpuStream() override;
  void copy_h2d(void* dst, const void* src, std::size_t bytes) override { enqueue_copy(dst, src, bytes); }
  void copy_d2h(void* dst, const void* src, std::size_t bytes) override { enqueue_copy(dst, src, bytes); }
  void copy_d2d(void* dst, const void* src, std::size_t bytes) override { enqueue_copy(dst, src, bytes); }
  void copy_h2h(void* dst, const void* src, std::size_t bytes) override { enqueue_copy(dst, src, bytes); }
  void memset(void* dst, int value, std::size_t bytes) override;
  void host_task(std::function<void()> fn) override { submit(std::move(fn)); }
  void record(runtime::EventImpl& event) override;
  void wait(runtime::EventImpl& event) override;
  void synchronize() override;
  bool query() override;
  void begin_capture() override;
  std::unique_ptr<runtime::GraphImpl> end_capture() override;
  bool capturing() const override { return capturing_; }
  void* native_handle() override { return nullptr; }

  /// Enqueues (or, while capturing, records) one task. Blocks while kMaxQueuedTasks tasks wait,
  /// except on the stream's own worker (a task enqueueing more work), which must not wait on itself.
  void submit(std::function<void()> task);
  /// Tasks enqueued and not yet started (for tests of the bound).
  std::size_t queued();
  /// Blocks until the queue is drained, without consuming a pending error.
  void wait_idle();

 private:
  void enqueue_copy(void* dst, const void* src, std::size_t bytes);
  void worker_loop();

  std::mutex mutex_;
  std::condition_variable work_available_, idle_, space_available_;
  std::deque<std::function<void()>> queue_;
  bool running_task_ = false;
  bool stopping_ = false;
  std::exception_ptr error_;  // first failure of an enqueued task; rethrown by synchronize()
  bool capturing_ = false;
  std::vector<std::function<void()>> captured_;
  StreamSet* owner_;
  std::thread worker_;
  std::thread::id worker_id_;
};

/// Parallel memcpy over the shared pool for large sizes; plain memcpy otherwise.
void parallel_copy(void* dst, const void* src, std::size_t bytes);

}  // namespace galley::backends::cpu
