// Streams, events and graphs of the cuda and hip plugins (the same source serves both).
#pragma once

#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/gpu/vendor.hpp"
#include "runtime/backend.hpp"

namespace galley::backends::GALLEY_GPU_NS {

class GpuDevice;

/// Where an exception thrown by a host task goes until synchronize() rethrows it. Shared with
/// the callbacks, which may run after the stream object is gone.
struct ErrorSlot {
  std::mutex mutex;
  std::exception_ptr error;
  void set(std::exception_ptr e);
  std::exception_ptr take();
};

/// A host task's closure as the vendor's host callback sees it. One-shot payloads free
/// themselves after running; payloads captured in a graph live as long as the graph.
struct HostTask {
  std::function<void()> fn;
  std::shared_ptr<ErrorSlot> slot;         // stream whose synchronize() reports a failure
  std::shared_ptr<std::mutex> slot_mutex;  // guards `slot` while a graph rebinds it on replay
  bool one_shot = true;
};

class GpuEvent final : public runtime::EventImpl {
 public:
  GpuEvent(int device, bool enable_timing);
  ~GpuEvent() override;
  bool query() override;
  void synchronize() override;
  float elapsed_ms_since(runtime::EventImpl& start) override;
  cudaEvent_t native() const { return event_; }

 private:
  int device_;
  cudaEvent_t event_ = nullptr;
};

class GpuGraph final : public runtime::GraphImpl {
 public:
  GpuGraph(int device, cudaGraph_t graph, std::vector<std::unique_ptr<HostTask>> tasks,
           std::shared_ptr<std::mutex> slot_mutex);
  ~GpuGraph() override;
  void replay(runtime::StreamImpl& stream) override;
  std::size_t node_count() const override { return nodes_; }

 private:
  int device_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::size_t nodes_ = 0;
  std::vector<std::unique_ptr<HostTask>> tasks_;  // host nodes point at these
  std::shared_ptr<std::mutex> slot_mutex_;
};

class GpuStream final : public runtime::StreamImpl {
 public:
  explicit GpuStream(GpuDevice& device);
  ~GpuStream() override;

  void copy_h2d(void* dst, const void* src, std::size_t bytes) override;
  void copy_d2h(void* dst, const void* src, std::size_t bytes) override;
  void copy_d2d(void* dst, const void* src, std::size_t bytes) override;
  void copy_h2h(void* dst, const void* src, std::size_t bytes) override;
  void memset(void* dst, int value, std::size_t bytes) override;
  void host_task(std::function<void()> fn) override;
  void record(runtime::EventImpl& event) override;
  void wait(runtime::EventImpl& event) override;
  void synchronize() override;
  bool query() override;
  void begin_capture() override;
  std::unique_ptr<runtime::GraphImpl> end_capture() override;
  bool capturing() const override { return capturing_; }
  void* native_handle() override { return stream_; }

  cudaStream_t native() const { return stream_; }
  int device_index() const;
  const std::shared_ptr<ErrorSlot>& error_slot() const { return slot_; }

 private:
  std::string where(const char* op, std::size_t bytes) const;
  void require_device_pointer(const void* ptr, const char* role, const char* op) const;
  void rethrow_task_error();

  GpuDevice& device_;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<ErrorSlot> slot_ = std::make_shared<ErrorSlot>();
  bool capturing_ = false;
  // Host tasks enqueued during capture: owned by the graph that end_capture() returns.
  std::vector<std::unique_ptr<HostTask>> captured_tasks_;
  std::shared_ptr<std::mutex> capture_slot_mutex_;
};

}  // namespace galley::backends::GALLEY_GPU_NS
