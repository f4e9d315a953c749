#include "backends/cuda/runtime_staging.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "backends/cuda/runtime_check.hpp"
#include "galley/core/log.hpp"

namespace galley::backends::GALLEY_GPU_NS {

// ---- HostWorkers ----------------------------------------------------------------------------

HostWorkers::HostWorkers(int helpers) {
  threads_.reserve(static_cast<std::size_t>(std::max(helpers, 0)));
  for (int i = 0; i < helpers; ++i) threads_.emplace_back([this, i] { loop(i + 1); });
}

HostWorkers::~HostWorkers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& thread : threads_) thread.join();
}

void HostWorkers::loop(int worker) {
  unsigned long seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr error;
    try {
      (*job)(worker);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    if (error && !error_) error_ = error;
    if (--running_ == 0) done_.notify_one();
  }
}

void HostWorkers::run(const std::function<void(int)>& job) {
  {
    std::lock_guard lock(mutex_);
    job_ = &job;
    error_ = nullptr;
    running_ = static_cast<int>(threads_.size());
    ++generation_;
  }
  wake_.notify_all();
  std::exception_ptr error;
  try {
    job(0);
  } catch (...) {
    error = std::current_exception();
  }
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return running_ == 0; });
  job_ = nullptr;
  if (!error) error = error_;
  if (error) std::rethrow_exception(error);
}

// ---- StagingPool ----------------------------------------------------------------------------

namespace {

// Half the hardware threads (the rest run the caller's other work and the DMA's interrupts), at
// most 8: beyond that the host's memory bandwidth, not the thread count, limits the copy.
int helper_count() {
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(hardware / 2, 1, 8) - 1;
}

}  // namespace

StagingPool::StagingPool(int device_index) : device_(device_index), workers_(helper_count()) {
  const std::string where = device_name(device_) + " staging buffers";
  const std::size_t count = static_cast<std::size_t>(workers_.size()) + 2;
  try {
    DeviceGuard guard(device_);
    for (std::size_t i = 0; i < count; ++i) {
      Chunk chunk;
      check(cudaHostAlloc(&chunk.host, kMaxPiece, cudaHostAllocPortable), "HostAlloc", where);
      chunks_.push_back(chunk);
      check(cudaEventCreateWithFlags(&chunks_.back().done, cudaEventDisableTiming), "EventCreateWithFlags",
            where);
    }
  } catch (...) {
    for (auto& chunk : chunks_) {
      if (chunk.done != nullptr) (void)cudaEventDestroy(chunk.done);
      (void)cudaFreeHost(chunk.host);
    }
    throw;
  }
  free_.assign(chunks_.begin(), chunks_.end());
}

StagingPool::~StagingPool() {
  for (auto& chunk : chunks_) {
    // A DMA may still read the chunk; wait for it before freeing (errors here have no caller left).
    (void)cudaEventSynchronize(chunk.done);
    (void)cudaEventDestroy(chunk.done);
    (void)cudaFreeHost(chunk.host);
  }
}

StagingPool::Chunk StagingPool::take_chunk() {
  std::lock_guard lock(chunk_mutex_);
  // There are more chunks than workers and each worker holds at most one, so this never runs dry.
  Chunk chunk = free_.front();
  free_.pop_front();
  return chunk;
}

void StagingPool::give_chunk(Chunk chunk) {
  std::lock_guard lock(chunk_mutex_);
  free_.push_back(chunk);
}

void StagingPool::h2d(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  copy(Direction::h2d, static_cast<char*>(dst), const_cast<char*>(static_cast<const char*>(src)), bytes,
       stream);
}

void StagingPool::d2h(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  copy(Direction::d2h, const_cast<char*>(static_cast<const char*>(src)), static_cast<char*>(dst), bytes,
       stream);
}

void StagingPool::copy(Direction direction, char* device, char* host, std::size_t bytes,
                       cudaStream_t stream) {
  std::lock_guard copy_lock(copy_mutex_);
  const std::string where =
      device_name(device_) + ", staged pageable copy of " + std::to_string(bytes) + " bytes";
  // Pieces small enough that every worker gets some, big enough that per-piece calls stay cheap.
  const std::size_t workers = static_cast<std::size_t>(workers_.size());
  constexpr std::size_t kGrain = std::size_t{64} << 10;
  std::size_t piece = (bytes + workers - 1) / workers;
  piece = std::clamp((piece + kGrain - 1) / kGrain * kGrain, kDirectBelow, kMaxPiece);
  const std::size_t pieces = (bytes + piece - 1) / piece;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};

  workers_.run([&](int) {
    DeviceGuard guard(device_);
    for (;;) {
      const std::size_t index = next.fetch_add(1, std::memory_order_relaxed);
      if (index >= pieces || failed.load(std::memory_order_relaxed)) return;
      const std::size_t offset = index * piece;
      const std::size_t length = std::min(piece, bytes - offset);
      Chunk chunk = take_chunk();
      try {
        check(cudaEventSynchronize(chunk.done), "EventSynchronize", where);
        if (direction == Direction::h2d) {
          std::memcpy(chunk.host, host + offset, length);
          check(cudaMemcpyAsync(device + offset, chunk.host, length, cudaMemcpyHostToDevice, stream),
                "MemcpyAsync", where);
          check(cudaEventRecord(chunk.done, stream), "EventRecord", where);
        } else {
          check(cudaMemcpyAsync(chunk.host, device + offset, length, cudaMemcpyDeviceToHost, stream),
                "MemcpyAsync", where);
          check(cudaEventRecord(chunk.done, stream), "EventRecord", where);
          check(cudaEventSynchronize(chunk.done), "EventSynchronize", where);
          std::memcpy(host + offset, chunk.host, length);
        }
      } catch (...) {
        failed = true;
        give_chunk(chunk);
        throw;
      }
      give_chunk(chunk);
    }
  });
}

}  // namespace galley::backends::GALLEY_GPU_NS
