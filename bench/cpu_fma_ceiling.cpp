// The FMA throughput ceiling of this CPU with AVX2 and (where present) AVX-512 vectors: 12
// independent accumulator chains per thread, one thread per hardware thread, best of 20 runs.
// The roofline that the cpu conv figures in bench/RESULTS.md are read against.
//
//   cpu_fma_ceiling [THREADS]
//
// Compiled with -mavx2 -mfma -mavx512f; the AVX-512 loop runs only where cpuid says it can.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr long kIterations = 2'000'000;
constexpr int kChains = 12;

template <typename V, typename Fma>
__attribute__((noinline)) float chains(Fma fma, V b, V c) {
  V a[kChains];
  for (auto& v : a) v = b;
  for (long i = 0; i < kIterations; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) a[j] = fma(a[j], b, c);
  }
  V s = a[0];
  for (int j = 1; j < kChains; ++j) s = s + a[j];
  return reinterpret_cast<float*>(&s)[0];  // keeps the loop alive
}

template <typename Body>
double best_gflops(int threads, int lanes, Body body) {
  double best = 1e30;
  for (int r = 0; r < 20; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(body);
    body();
    for (auto& t : pool) t.join();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return threads * 2.0 * lanes * kChains * kIterations / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::stoi(argv[1]) : static_cast<int>(std::thread::hardware_concurrency());
  volatile float sink = 0;
  const double avx2 = best_gflops(threads, 8, [&] {
    sink = chains<__m256>([](__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); },
                          _mm256_set1_ps(0.999f), _mm256_set1_ps(1e-4f));
  });
  std::printf("FMA ceiling, %d threads, best of 20: AVX2 %.0f GFLOP/s", threads, avx2);
  if (__builtin_cpu_supports("avx512f")) {
    const double avx512 = best_gflops(threads, 16, [&] {
      sink = chains<__m512>([](__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); },
                            _mm512_set1_ps(0.999f), _mm512_set1_ps(1e-4f));
    });
    std::printf(", AVX-512 %.0f GFLOP/s", avx512);
  }
  std::printf("\n");
  return 0;
}
