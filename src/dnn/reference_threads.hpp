// Host threads for the reference implementations. The dnn layer may not include the cpu backend's
// pool (layering), and references run rarely, so they start short-lived threads of their own.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/config.hpp"

namespace galley::dnn {

/// GALLEY_NUM_THREADS when set, else all hardware threads.
inline unsigned reference_threads() {
  if (const int configured = env::config().num_threads; configured > 0) return static_cast<unsigned>(configured);
  return std::max(1u, std::thread::hardware_concurrency());
}

/// Runs body(i) for i in [0, count) over `threads` threads; rethrows the first exception.
template <typename Body>
void reference_fan_out(std::int64_t count, unsigned threads, const Body& body) {
  threads = static_cast<unsigned>(std::min<std::int64_t>(threads, count));
  if (threads <= 1) {
    for (std::int64_t i = 0; i < count; ++i) body(i);
    return;
  }
  std::atomic<std::int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto worker = [&] {
    try {
      for (std::int64_t i = next++; i < count; i = next++) body(i);
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::jthread> pool;
  pool.reserve(threads - 1);
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  pool.clear();  // joins
  if (error) std::rethrow_exception(error);
}

}  // namespace galley::dnn
