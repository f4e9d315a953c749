// Timing and reporting helpers shared by the cpu benchmarks under bench/ (header-only: each
// benchmark is one program).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "galley/runtime/stream.hpp"

namespace galley::bench {

using Clock = std::chrono::steady_clock;

/// Milliseconds of each call of fn() for about `seconds` (at least 3 calls, at most 200), after
/// one warm-up call. Wall clock around each call: for code that runs in the calling thread.
inline std::vector<double> sample_wall_ms(double seconds, const std::function<void()>& fn) {
  fn();
  std::vector<double> ms;
  const auto start = Clock::now();
  while (ms.size() < 200 &&
         (ms.size() < 3 || std::chrono::duration<double>(Clock::now() - start).count() < seconds)) {
    const auto t0 = Clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return ms;
}

/// Milliseconds of each op that `enqueue` puts on `stream`, measured between events recorded
/// around it, with the ops enqueued back to back (as `galley bench conv` and GPU benchmarks
/// time kernels), for about `seconds` after one warm-up op.
inline std::vector<double> sample_event_ms(double seconds, runtime::Stream& stream,
                                           const std::function<void()>& enqueue) {
  enqueue();
  stream.synchronize();
  const auto t0 = Clock::now();
  enqueue();
  stream.synchronize();
  const double once = std::chrono::duration<double>(Clock::now() - t0).count();
  const int reps = static_cast<int>(std::clamp(seconds / std::max(once, 1e-6), 3.0, 200.0));
  std::deque<runtime::Event> starts, stops;  // events must not move once recorded
  for (int i = 0; i < reps; ++i) {
    starts.emplace_back(stream.device()).record(stream);
    enqueue();
    stops.emplace_back(stream.device()).record(stream);
  }
  stream.synchronize();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) ms.push_back(stops[i].elapsed_ms_since(starts[i]));
  return ms;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline double geomean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

/// "0.42 0.61 0.70": the 1/5/15-minute load averages, so a reader can see whether other work
/// shared the cores during the run.
inline std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

/// "AMD EPYC, 2 threads, AVX2, AVX-512".
inline std::string machine() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown cpu";
  bool avx2 = false, avx512 = false;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 && model == "unknown cpu") model = line.substr(line.find(':') + 2);
    if (line.rfind("flags", 0) == 0) {
      avx2 = line.find(" avx2") != std::string::npos;
      avx512 = line.find(" avx512f") != std::string::npos;
    }
  }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " threads" + (avx2 ? ", AVX2" : "") +
         (avx512 ? ", AVX-512" : "");
}

}  // namespace galley::bench
