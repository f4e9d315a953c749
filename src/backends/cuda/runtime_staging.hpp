// Copies between pageable host memory and the device, staged through pinned buffers.
//
// A DMA engine can only read or write page-locked memory, so the driver itself stages a pageable
// cudaMemcpyAsync through a small pinned buffer with one thread: about 8 GB/s on an H200 host,
// against 55 GB/s from pinned memory. Here the copy is cut into pieces that several host threads
// move in parallel: each thread takes a free pinned chunk, memcpy's its piece into it and enqueues
// the chunk's DMA on the caller's stream while the other threads fill their chunks, so host
// copying and DMA overlap and the host side runs at several threads' memcpy bandwidth.
//
// Ordering: every DMA goes on the caller's stream, so the copy is ordered with the stream's other
// work exactly as a cudaMemcpyAsync would be. A chunk is refilled only after the event recorded
// behind its last DMA has completed, whichever stream that DMA was on.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/gpu/vendor.hpp"

namespace galley::backends::GALLEY_GPU_NS {

/// A fixed set of helper threads that run one job on all of them (plus the caller) at once.
class HostWorkers {
 public:
  explicit HostWorkers(int helpers);
  ~HostWorkers();
  HostWorkers(const HostWorkers&) = delete;
  HostWorkers& operator=(const HostWorkers&) = delete;

  /// Runs `job(worker)` on every helper and on the calling thread (worker 0) and returns when all
  /// have finished; rethrows the first exception a job raised.
  void run(const std::function<void(int worker)>& job);
  int size() const { return static_cast<int>(threads_.size()) + 1; }

 private:
  void loop(int worker);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int)>* job_ = nullptr;
  unsigned long generation_ = 0;
  int running_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

class StagingPool {
 public:
  /// Pageable copies smaller than this go straight to the driver, whose own staging has less
  /// overhead than waking the helper threads.
  static constexpr std::size_t kDirectBelow = std::size_t{1} << 20;
  static constexpr std::size_t kMaxPiece = std::size_t{4} << 20;

  explicit StagingPool(int device_index);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  /// Host (pageable) -> device. Returns once `src` has been read; the DMA may still be in flight.
  void h2d(void* dst, const void* src, std::size_t bytes, cudaStream_t stream);
  /// Device -> host (pageable). Returns once `dst` holds the data (after the stream's earlier work).
  void d2h(void* dst, const void* src, std::size_t bytes, cudaStream_t stream);

  int threads() const { return workers_.size(); }
  std::size_t chunk_bytes() const { return kMaxPiece; }
  std::size_t chunk_count() const { return chunks_.size(); }

 private:
  struct Chunk {
    void* host = nullptr;
    cudaEvent_t done = nullptr;  // recorded behind the chunk's last DMA
  };
  enum class Direction { h2d, d2h };
  void copy(Direction direction, char* device, char* host, std::size_t bytes, cudaStream_t stream);
  Chunk take_chunk();
  void give_chunk(Chunk chunk);

  int device_;
  std::mutex copy_mutex_;  // one staged copy at a time per device: they share threads and chunks
  std::mutex chunk_mutex_;
  std::deque<Chunk> free_;  // oldest DMA first, so the front is the likeliest to be done
  std::vector<Chunk> chunks_;
  HostWorkers workers_;
};

}  // namespace galley::backends::GALLEY_GPU_NS
