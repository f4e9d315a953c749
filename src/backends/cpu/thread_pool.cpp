#include "backends/cpu/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/config.hpp"
#include "galley/core/error.hpp"
#include "galley/core/log.hpp"

namespace galley::backends::cpu {
namespace {

thread_local bool t_in_region = false;

int configured_threads() {
  const int configured = env::config().num_threads;  // validated: 1..4096, or 0 when unset
  return configured > 0 ? configured : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// A fork-join pool: one job at a time (parallel_for calls from different streams serialise on
// job_mutex_), workers take chunk indices from an atomic-free counter under the state mutex.
// Chunks are coarse (a few per thread), so the lock is not a bottleneck.
//
// Waking a thread that sleeps on a condition variable can take ~100 us on small VMs, longer than
// many whole kernels, so without care a short parallel_for would run almost entirely on the
// caller. Workers therefore poll for the next job
// for kSpin after finishing one, and the caller polls for the last chunk before it sleeps: back-
// to-back jobs (the phases of one kernel, consecutive ops on a stream) find everyone awake.
constexpr auto kSpin = std::chrono::microseconds(200);
constexpr int kChunksPerThread = 4;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

class Pool {
 public:
  // When the system refuses threads (RLIMIT_NPROC, memory for stacks), the pool keeps those it
  // got and says so: fewer threads is slower, never wrong. size_ counts the workers that exist,
  // because run() splits work by it and waits for every chunk.
  explicit Pool(int threads) : size_(1), claimed_(static_cast<std::size_t>(std::max(threads, 1)) * kChunksPerThread) {
    workers_.reserve(static_cast<std::size_t>(threads > 1 ? threads - 1 : 0));
    for (int i = 1; i < threads; ++i) {
      try {
        workers_.emplace_back([this, i] { worker_loop(i); });
      } catch (const std::system_error& e) {
        log::warn("cpu thread pool: could not start thread " + std::to_string(i + 1) + " of " +
                  std::to_string(threads) + " (" + e.what() + "); running with " + std::to_string(i) +
                  " thread(s)");
        break;
      }
      ++size_;
    }
  }
  ~Pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      posted_.store(~std::uint64_t{0}, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return size_; }

  void run(std::int64_t begin, std::int64_t end, const std::function<void(std::int64_t, std::int64_t)>& body) {
    std::lock_guard job_lock(job_mutex_);
    const std::int64_t total = end - begin;
    const std::int64_t chunks = std::min<std::int64_t>(total, static_cast<std::int64_t>(size_) * kChunksPerThread);
    {
      std::lock_guard lock(mutex_);
      body_ = &body;
      begin_ = begin;
      total_ = total;
      chunks_ = chunks;
      done_chunks_ = 0;
      error_ = nullptr;
      ++generation_;
      done_posted_.store(0, std::memory_order_relaxed);
      posted_.store(generation_, std::memory_order_release);
    }
    wake_.notify_all();
    work_until_done(0);
    for (const auto until = std::chrono::steady_clock::now() + kSpin;
         done_posted_.load(std::memory_order_acquire) != chunks && std::chrono::steady_clock::now() < until;) {
      cpu_relax();
    }
    std::unique_lock lock(mutex_);
    finished_.wait(lock, [&] { return done_chunks_ == chunks_; });
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void worker_loop(int self) {
    t_in_region = true;
    std::uint64_t seen = 0;
    for (;;) {
      for (const auto until = std::chrono::steady_clock::now() + kSpin;
           posted_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < until;) {
        cpu_relax();
      }
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || (generation_ != seen && body_ != nullptr); });
        if (stopping_) return;
        seen = generation_;
      }
      work_until_done(self);
    }
  }

  // Claims chunk c for job `generation`: each chunk's slot holds the last job that claimed it, and
  // jobs only grow, so a thread still holding an older job's parameters claims nothing new.
  bool claim(std::int64_t c, std::uint64_t generation) {
    std::atomic<std::uint64_t>& slot = claimed_[static_cast<std::size_t>(c)];
    std::uint64_t seen = slot.load(std::memory_order_relaxed);
    while (seen < generation) {
      if (slot.compare_exchange_weak(seen, generation, std::memory_order_acq_rel)) return true;
    }
    return false;
  }

  // Thread `self` (the caller 0, worker i the (i+1)-th) runs its own share of the chunks first,
  // then whatever the others have not started.
  void work_until_done(int self) {
    const std::function<void(std::int64_t, std::int64_t)>* body;
    std::int64_t begin, total, chunks;
    std::uint64_t generation;
    {
      std::lock_guard lock(mutex_);
      if (body_ == nullptr) return;
      body = body_;
      begin = begin_;
      total = total_;
      chunks = chunks_;
      generation = generation_;
    }
    const bool was_in_region = t_in_region;
    t_in_region = true;
    const std::int64_t home = chunks * self / size_;
    for (std::int64_t i = 0; i < chunks; ++i) {
      const std::int64_t chunk = (home + i) % chunks;
      if (!claim(chunk, generation)) continue;
      const std::int64_t lo = begin + total * chunk / chunks;
      const std::int64_t hi = begin + total * (chunk + 1) / chunks;
      try {
        (*body)(lo, hi);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      std::lock_guard lock(mutex_);
      done_posted_.store(done_chunks_ + 1, std::memory_order_release);
      if (++done_chunks_ == chunks_) finished_.notify_all();
    }
    t_in_region = was_in_region;
  }

  int size_;
  std::vector<std::thread> workers_;
  std::mutex job_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  bool stopping_ = false;
  std::uint64_t generation_ = 0;
  std::atomic<std::uint64_t> posted_{0};       // generation_, readable without the lock
  std::atomic<std::int64_t> done_posted_{0};   // done_chunks_, readable without the lock
  const std::function<void(std::int64_t, std::int64_t)>* body_ = nullptr;
  std::int64_t begin_ = 0, total_ = 0, chunks_ = 0, done_chunks_ = 0;
  std::vector<std::atomic<std::uint64_t>> claimed_;  // per chunk: the last job that claimed it
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool instance(configured_threads());
  return instance;
}

}  // namespace

int pool_size() { return pool().size(); }

bool in_parallel_region() { return t_in_region; }

void parallel_for(std::int64_t begin, std::int64_t end,
                  const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (end <= begin) return;
  if (t_in_region || end - begin == 1 || pool().size() == 1) {
    body(begin, end);
    return;
  }
  pool().run(begin, end, body);
}

}  // namespace galley::backends::cpu
