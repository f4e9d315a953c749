#include "backends/cpu/cpu_stream.hpp"

#include <cstring>
#include <string>
#include <system_error>

#include "backends/cpu/thread_pool.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::cpu {

namespace {
// Below this a single memcpy beats waking the pool.
constexpr std::size_t kParallelCopyMin = std::size_t{1} << 20;
constexpr std::size_t kCopyChunk = std::size_t{1} << 18;

CpuEvent& as_cpu_event(runtime::EventImpl& event) {
  auto* cpu = dynamic_cast<CpuEvent*>(&event);
  if (cpu == nullptr) throw Error(Status::invalid_argument, "event does not belong to the cpu backend");
  return *cpu;
}
}  // namespace

void parallel_copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes < kParallelCopyMin || pool_size() == 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const auto chunks = static_cast<std::int64_t>((bytes + kCopyChunk - 1) / kCopyChunk);
  parallel_for(0, chunks, [&](std::int64_t lo, std::int64_t hi) {
    const std::size_t from = static_cast<std::size_t>(lo) * kCopyChunk;
    const std::size_t to = std::min(bytes, static_cast<std::size_t>(hi) * kCopyChunk);
    std::memcpy(static_cast<char*>(dst) + from, static_cast<const char*>(src) + from, to - from);
  });
}

bool CpuEvent::query() {
  std::lock_guard lock(state_->mutex);
  return state_->done >= state_->recorded;
}

void CpuEvent::synchronize() {
  std::unique_lock lock(state_->mutex);
  const std::uint64_t target = state_->recorded;
  state_->completed.wait(lock, [&] { return state_->done >= target; });
}

float CpuEvent::elapsed_ms_since(runtime::EventImpl& start) {
  auto& begin = as_cpu_event(start);
  std::chrono::steady_clock::time_point t0, t1;
  {
    std::lock_guard lock(begin.state_->mutex);
    if (begin.state_->recorded == 0 || begin.state_->done < begin.state_->recorded)
      throw Error(Status::invalid_argument, "elapsed time: the start event was not recorded or has not completed");
    t0 = begin.state_->when;
  }
  {
    std::lock_guard lock(state_->mutex);
    if (state_->recorded == 0 || state_->done < state_->recorded)
      throw Error(Status::invalid_argument, "elapsed time: the end event was not recorded or has not completed");
    t1 = state_->when;
  }
  return std::chrono::duration<float, std::milli>(t1 - t0).count();
}

void CpuGraph::replay(runtime::StreamImpl& stream) {
  auto* cpu = dynamic_cast<CpuStream*>(&stream);
  if (cpu == nullptr) throw Error(Status::invalid_argument, "a cpu graph can only replay on a cpu stream");
  for (const auto& task : tasks_) cpu->submit(task);
}

void StreamSet::add(CpuStream* stream) {
  std::lock_guard lock(mutex_);
  streams_.push_back(stream);
}

void StreamSet::remove(CpuStream* stream) {
  std::lock_guard lock(mutex_);
  std::erase(streams_, stream);
}

void StreamSet::wait_all_idle() {
  // Holding the lock keeps every listed stream alive while we wait (its destructor must remove it).
  std::lock_guard lock(mutex_);
  for (CpuStream* stream : streams_) stream->wait_idle();
}

namespace {
std::thread start_worker(CpuStream* stream, void (CpuStream::*loop)()) {
  try {
    return std::thread(loop, stream);
  } catch (const std::system_error& e) {
    throw Error(Status::backend_error, std::string("cpu stream: cannot start its worker thread (") +
                                           e.what() +
                                           "); the process may have reached its thread limit (ulimit -u)");
  }
}
}  // namespace

CpuStream::CpuStream(StreamSet* owner) : owner_(owner), worker_(start_worker(this, &CpuStream::worker_loop)) {
  worker_id_ = worker_.get_id();
  if (owner_ != nullptr) owner_->add(this);
}

CpuStream::~CpuStream() {
  if (owner_ != nullptr) owner_->remove(this);
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_available_.notify_one();
  worker_.join();
}

// Waking a thread blocked on a condition variable costs ~100 us on small VMs, more than many
// kernels take. Both sides therefore poll briefly before sleeping: the worker for the next task, a
// synchronize() for the worker to go idle. The poll is bounded, so idle streams cost nothing.
constexpr auto kPollBeforeSleep = std::chrono::microseconds(100);

template <class Ready>
void poll_briefly(std::mutex& mutex, Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kPollBeforeSleep;
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard lock(mutex);
      if (ready()) return;
    }
    std::this_thread::yield();
  }
}

void CpuStream::worker_loop() {
  for (;;) {
    std::function<void()> task;
    poll_briefly(mutex_, [&] { return stopping_ || !queue_.empty(); });
    {
      std::unique_lock lock(mutex_);
      work_available_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
      running_task_ = true;
    }
    space_available_.notify_one();
    std::exception_ptr failure;
    try {
      task();
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      if (failure && !error_) error_ = failure;
      running_task_ = false;
      if (queue_.empty()) idle_.notify_all();
    }
  }
}

void CpuStream::submit(std::function<void()> task) {
  std::unique_lock lock(mutex_);
  if (capturing_) {
    captured_.push_back(std::move(task));
    return;
  }
  if (std::this_thread::get_id() != worker_id_) {
    space_available_.wait(lock, [&] { return queue_.size() < kMaxQueuedTasks; });
  }
  queue_.push_back(std::move(task));
  work_available_.notify_one();
}

std::size_t CpuStream::queued() {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

void CpuStream::enqueue_copy(void* dst, const void* src, std::size_t bytes) {
  submit([dst, src, bytes] { parallel_copy(dst, src, bytes); });
}

void CpuStream::memset(void* dst, int value, std::size_t bytes) {
  submit([dst, value, bytes] { std::memset(dst, value, bytes); });
}

void CpuStream::record(runtime::EventImpl& event) {
  auto state = as_cpu_event(event).state();
  // The generation is taken when the record is executed during replay too, so a captured record
  // marks the event each time the graph runs.
  std::uint64_t generation;
  {
    std::lock_guard lock(state->mutex);
    generation = ++state->recorded;
  }
  submit([state, generation] {
    std::lock_guard lock(state->mutex);
    state->when = std::chrono::steady_clock::now();
    state->done = std::max(state->done, generation);
    state->completed.notify_all();
  });
}

void CpuStream::wait(runtime::EventImpl& event) {
  auto state = as_cpu_event(event).state();
  std::uint64_t target;
  {
    std::lock_guard lock(state->mutex);
    target = state->recorded;
  }
  if (target == 0) return;  // never recorded: nothing to wait for (CUDA semantics)
  submit([state, target] {
    std::unique_lock lock(state->mutex);
    state->completed.wait(lock, [&] { return state->done >= target; });
  });
}

void CpuStream::synchronize() {
  {
    // As on a GPU: waiting for captured work that has not run would return at once with nothing
    // done, so code that reads results after a wait is caught here rather than reading stale data.
    std::lock_guard lock(mutex_);
    if (capturing_) {
      throw Error(Status::invalid_argument,
                  "synchronize: the cpu stream is capturing a graph; call end_capture() first");
    }
  }
  poll_briefly(mutex_, [&] { return queue_.empty() && !running_task_; });
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !running_task_; });
  if (error_) {
    auto failure = error_;
    error_ = nullptr;
    std::rethrow_exception(failure);
  }
}

void CpuStream::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !running_task_; });
}

bool CpuStream::query() {
  std::lock_guard lock(mutex_);
  return queue_.empty() && !running_task_;
}

void CpuStream::begin_capture() {
  std::lock_guard lock(mutex_);
  if (capturing_) throw Error(Status::invalid_argument, "begin_capture: the stream is already capturing");
  capturing_ = true;
  captured_.clear();
}

std::unique_ptr<runtime::GraphImpl> CpuStream::end_capture() {
  std::lock_guard lock(mutex_);
  if (!capturing_) throw Error(Status::invalid_argument, "end_capture: the stream is not capturing");
  capturing_ = false;
  return std::make_unique<CpuGraph>(std::move(captured_));
}

}  // namespace galley::backends::cpu
