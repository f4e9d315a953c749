#include "backends/cuda/runtime_stream.hpp"

#include <cstdio>
#include <cstring>
#include <utility>

#include "backends/cuda/runtime_check.hpp"
#include "backends/cuda/runtime_device.hpp"
#include "backends/cuda/runtime_staging.hpp"
#include "galley/core/log.hpp"

namespace galley::backends::GALLEY_GPU_NS {

namespace {

using vendor::PointerKind;

GpuEvent& gpu_event(runtime::EventImpl& event, const char* op) {
  auto* gpu = dynamic_cast<GpuEvent*>(&event);
  if (gpu == nullptr) {
    throw Error(Status::invalid_argument,
                std::string(op) + ": the event belongs to another backend than " + vendor::kBackend);
  }
  return *gpu;
}

// The vendor's host callback. It must not throw into the driver: failures are parked in the
// stream's slot and rethrown by synchronize().
void CUDART_CB run_host_task(void* data) {
  auto* task = static_cast<HostTask*>(data);
  std::unique_ptr<HostTask> owned(task->one_shot ? task : nullptr);
  try {
    task->fn();
  } catch (...) {
    if (task->slot_mutex) {
      std::lock_guard lock(*task->slot_mutex);
      if (task->slot) task->slot->set(std::current_exception());
    } else if (task->slot) {
      task->slot->set(std::current_exception());
    }
  }
}

}  // namespace

// ---- ErrorSlot ------------------------------------------------------------------------------

void ErrorSlot::set(std::exception_ptr e) {
  std::lock_guard lock(mutex);
  if (!error) error = std::move(e);  // the first failure is the one worth reporting
}

std::exception_ptr ErrorSlot::take() {
  std::lock_guard lock(mutex);
  return std::exchange(error, nullptr);
}

// ---- GpuEvent -------------------------------------------------------------------------------

GpuEvent::GpuEvent(int device, bool enable_timing) : device_(device) {
  DeviceGuard guard(device_);
  check(cudaEventCreateWithFlags(&event_, enable_timing ? cudaEventDefault : cudaEventDisableTiming),
        "EventCreateWithFlags", device_name(device_));
}

GpuEvent::~GpuEvent() { (void)cudaEventDestroy(event_); }

bool GpuEvent::query() {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) return false;
  check(status, "EventQuery", device_name(device_));
  return true;
}

void GpuEvent::synchronize() {
  check(cudaEventSynchronize(event_), "EventSynchronize", device_name(device_));
}

float GpuEvent::elapsed_ms_since(runtime::EventImpl& start) {
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, gpu_event(start, "elapsed_ms_since").native(), event_), "EventElapsedTime",
        device_name(device_));
  return ms;
}

// ---- GpuGraph -------------------------------------------------------------------------------

GpuGraph::GpuGraph(int device, cudaGraph_t graph, std::vector<std::unique_ptr<HostTask>> tasks,
                   std::shared_ptr<std::mutex> slot_mutex)
    : device_(device), graph_(graph), tasks_(std::move(tasks)), slot_mutex_(std::move(slot_mutex)) {
  const std::string where = device_name(device_) + " graph";
  try {
    check(cudaGraphGetNodes(graph_, nullptr, &nodes_), "GraphGetNodes", where);
    DeviceGuard guard(device_);
    check(cudaGraphInstantiate(&exec_, graph_, 0), "GraphInstantiate", where);
  } catch (...) {
    (void)cudaGraphDestroy(graph_);
    throw;
  }
}

GpuGraph::~GpuGraph() {
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  (void)cudaGraphDestroy(graph_);
}

void GpuGraph::replay(runtime::StreamImpl& stream) {
  auto* gpu = dynamic_cast<GpuStream*>(&stream);
  if (gpu == nullptr || gpu->device_index() != device_) {
    throw Error(Status::invalid_argument,
                "graph replay: the graph was captured on " + device_name(device_) + ", the stream is not");
  }
  {
    // Host-task failures during this replay belong to the replaying stream.
    std::lock_guard lock(*slot_mutex_);
    for (auto& task : tasks_) task->slot = gpu->error_slot();
  }
  DeviceGuard guard(device_);
  check(cudaGraphLaunch(exec_, gpu->native()), "GraphLaunch", device_name(device_) + " graph replay");
}

// ---- GpuStream ------------------------------------------------------------------------------

GpuStream::GpuStream(GpuDevice& device) : device_(device) {
  DeviceGuard guard(device_.index());
  // Non-blocking: never implicitly ordered with the legacy default stream other libraries use.
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "StreamCreateWithFlags", device_.name());
}

GpuStream::~GpuStream() {
  if (capturing_) {
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph != nullptr)
      (void)cudaGraphDestroy(graph);
  }
  // Wait for queued work first: the caching allocator keys cached blocks by StreamImpl address, so
  // a new stream created at this address must not inherit blocks that this stream's pending work
  // still uses. One-shot host tasks own themselves; captured ones die with their graph.
  (void)cudaStreamSynchronize(stream_);
  (void)cudaStreamDestroy(stream_);
}

int GpuStream::device_index() const { return device_.index(); }

std::string GpuStream::where(const char* op, std::size_t bytes) const {
  return device_.name() + " " + op + " of " + std::to_string(bytes) + " bytes";
}

void GpuStream::require_device_pointer(const void* ptr, const char* role, const char* op) const {
  int owner = -1;
  if (vendor::pointer_kind(ptr, &owner) != PointerKind::device) {
    char text[32];
    std::snprintf(text, sizeof text, "%p", ptr);
    throw Error(Status::invalid_argument, std::string(op) + ": " + role + "=" + text +
                                              " is not device memory (stream on " + device_.name() + ")");
  }
  // Plain device memory is reachable only from its own device (managed memory reports -1).
  if (owner >= 0 && owner != device_.index()) {
    throw Error(Status::invalid_argument, std::string(op) + ": " + role + " lives on " + device_name(owner) +
                                              ", the stream on " + device_.name());
  }
}

void GpuStream::copy_h2d(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  require_device_pointer(dst, "dst", "copy_h2d");
  DeviceGuard guard(device_.index());
  if (vendor::pointer_kind(src) == PointerKind::pageable && bytes >= StagingPool::kDirectBelow) {
    if (capturing_) {
      throw Error(Status::unsupported, "copy_h2d: " + where("copy_h2d", bytes) +
                                           " from pageable host memory cannot be captured in a graph "
                                           "(the data would be read at capture time); use pinned memory");
    }
    device_.staging().h2d(dst, src, bytes, stream_);
    return;
  }
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "MemcpyAsync",
        where("copy_h2d", bytes));
}

void GpuStream::copy_d2h(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  require_device_pointer(src, "src", "copy_d2h");
  DeviceGuard guard(device_.index());
  if (vendor::pointer_kind(dst) == PointerKind::pageable && bytes >= StagingPool::kDirectBelow) {
    if (capturing_) {
      throw Error(Status::unsupported, "copy_d2h: " + where("copy_d2h", bytes) +
                                           " into pageable host memory cannot be captured in a graph; "
                                           "use pinned memory");
    }
    device_.staging().d2h(dst, src, bytes, stream_);
    return;
  }
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "MemcpyAsync",
        where("copy_d2h", bytes));
}

void GpuStream::copy_d2d(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  require_device_pointer(dst, "dst", "copy_d2d");
  require_device_pointer(src, "src", "copy_d2d");
  DeviceGuard guard(device_.index());
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "MemcpyAsync",
        where("copy_d2d", bytes));
}

void GpuStream::copy_h2h(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  // A host task keeps the copy in stream order for pageable and pinned memory alike (a
  // cudaMemcpyAsync between pageable buffers would run at once, ahead of queued work).
  host_task([dst, src, bytes] { std::memcpy(dst, src, bytes); });
}

void GpuStream::memset(void* dst, int value, std::size_t bytes) {
  if (bytes == 0) return;
  require_device_pointer(dst, "dst", "memset");
  DeviceGuard guard(device_.index());
  check(cudaMemsetAsync(dst, value, bytes, stream_), "MemsetAsync", where("memset", bytes));
}

void GpuStream::host_task(std::function<void()> fn) {
  auto task = std::make_unique<HostTask>();
  task->fn = std::move(fn);
  task->slot = slot_;
  if (capturing_) {
    task->one_shot = false;
    task->slot_mutex = capture_slot_mutex_;
  }
  DeviceGuard guard(device_.index());
  check(vendor::launch_host_func<run_host_task>(stream_, task.get()), "LaunchHostFunc",
        device_.name() + " host_task");
  if (capturing_) {
    captured_tasks_.push_back(std::move(task));
  } else {
    (void)task.release();  // run_host_task owns and frees it
  }
}

void GpuStream::record(runtime::EventImpl& event) {
  DeviceGuard guard(device_.index());
  check(cudaEventRecord(gpu_event(event, "record").native(), stream_), "EventRecord", device_.name());
}

void GpuStream::wait(runtime::EventImpl& event) {
  DeviceGuard guard(device_.index());
  check(cudaStreamWaitEvent(stream_, gpu_event(event, "wait").native(), 0), "StreamWaitEvent",
        device_.name());
}

void GpuStream::rethrow_task_error() {
  if (auto error = slot_->take()) std::rethrow_exception(error);
}

void GpuStream::synchronize() {
  if (capturing_) {
    throw Error(Status::invalid_argument,
                "synchronize: " + device_.name() + " stream is capturing a graph; call end_capture() first");
  }
  check(cudaStreamSynchronize(stream_), "StreamSynchronize", device_.name());
  rethrow_task_error();
}

bool GpuStream::query() {
  const cudaError_t status = cudaStreamQuery(stream_);
  if (status == cudaErrorNotReady) return false;
  check(status, "StreamQuery", device_.name());
  return true;
}

void GpuStream::begin_capture() {
  if (capturing_)
    throw Error(Status::invalid_argument,
                "begin_capture: " + device_.name() + " stream is already capturing");
  DeviceGuard guard(device_.index());
  // Relaxed: the caching allocator may cudaMalloc from this thread while a capture is open.
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "StreamBeginCapture", device_.name());
  capturing_ = true;
  capture_slot_mutex_ = std::make_shared<std::mutex>();
  captured_tasks_.clear();
}

std::unique_ptr<runtime::GraphImpl> GpuStream::end_capture() {
  if (!capturing_)
    throw Error(Status::invalid_argument, "end_capture: " + device_.name() + " stream is not capturing");
  capturing_ = false;
  auto tasks = std::move(captured_tasks_);
  captured_tasks_.clear();
  cudaGraph_t graph = nullptr;
  DeviceGuard guard(device_.index());
  check(cudaStreamEndCapture(stream_, &graph), "StreamEndCapture", device_.name());
  return std::make_unique<GpuGraph>(device_.index(), graph, std::move(tasks), std::move(capture_slot_mutex_));
}

}  // namespace galley::backends::GALLEY_GPU_NS
