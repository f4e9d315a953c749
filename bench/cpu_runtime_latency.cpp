// Fixed costs of the cpu backend that small kernels feel: an empty host task's round trip
// through a cpu Stream (enqueue, worker wake-up, synchronize), and how late the pool's other
// threads join a parallel_for after an idle gap (longer than the pool's 200 us poll) or right
// after another job.
//
//   cpu_runtime_latency
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "backends/cpu/thread_pool.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace {

using Clock = std::chrono::steady_clock;

void report(const char* what, std::vector<double> us) {
  std::sort(us.begin(), us.end());
  std::printf("%-58s median %7.1f us, p90 %7.1f us, min %6.1f us (%zu trials)\n", what, us[us.size() / 2],
              us[us.size() * 9 / 10], us.front(), us.size());
}

// Microseconds from the parallel_for call until the last of `threads` one-index chunks starts;
// each chunk holds its thread for 100 us so a thread cannot take two.
double last_join_us(int threads) {
  const auto t0 = Clock::now();
  std::atomic<double> latest{0};
  galley::backends::cpu::parallel_for(0, threads, [&](std::int64_t, std::int64_t) {
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    for (double cur = latest.load(); us > cur && !latest.compare_exchange_weak(cur, us);) {
    }
    for (const auto until = Clock::now() + std::chrono::microseconds(100); Clock::now() < until;) {
    }
  });
  return latest.load();
}

}  // namespace

int main() {
  const galley::runtime::Device cpu = galley::runtime::device("cpu");
  galley::runtime::Stream stream(cpu);
  std::vector<double> us;
  for (int i = 0; i < 2000; ++i) {
    const auto t0 = Clock::now();
    stream.launch("empty", [&] { stream.host_task([] {}); });
    stream.synchronize();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  report("empty host_task + synchronize on a cpu stream", us);

  const int threads = galley::backends::cpu::pool_size();
  if (threads < 2) {
    std::printf("pool has one thread: no join latency to measure\n");
    return 0;
  }
  us.clear();
  for (int i = 0; i < 500; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // workers have gone to sleep
    us.push_back(last_join_us(threads));
  }
  report("parallel_for after 2 ms idle: last thread joins after", us);
  us.clear();
  for (int i = 0; i < 500; ++i) {
    last_join_us(threads);
    us.push_back(last_join_us(threads));  // right after a job: workers still polling
  }
  report("parallel_for right after another: last thread joins after", us);
  return 0;
}
