// Which way to thread OpenBLAS under Galley's cpu solvers: (a) one cblas_sgemm call per product
// with OpenBLAS's own threads, or (b) OpenBLAS single-threaded and the product split into one
// block of columns per thread, as cpu.conv.gemm_1x1 and im2col_gemm do on the pool.
//
//   cpu_blas_threading [THREADS]
//
// Shapes are the 1x1 layers of shared/bench/conv_problems.txt at batch 2 (Y[K x HW] = W[K x C] *
// X[C x HW] per image), plus an im2col product (r50.l2.c2s2). Prints GFLOP/s medians of both.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

struct Shape {
  const char* tag;
  int m, n, k;  // per image: K, Ho*Wo, C*R*S
};

template <typename Fn>
double median_ms(Fn&& fn) {
  fn();
  fn();
  std::vector<double> ms;
  for (int i = 0; i < 21; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::stoi(argv[1]) : static_cast<int>(std::thread::hardware_concurrency());
  const Shape shapes[] = {{"r50.l1.c1", 64, 3136, 64},    {"r50.l1.c3", 256, 3136, 64},  {"r50.l1.c1b", 64, 3136, 256},
                          {"r50.l2.c1", 128, 3136, 256},  {"r50.l2.c3", 512, 784, 128},  {"r50.l2.c1b", 128, 784, 512},
                          {"r50.l3.c1", 256, 784, 512},   {"r50.l3.c3", 1024, 196, 256}, {"r50.l3.c1b", 256, 196, 1024},
                          {"r50.l4.c1", 512, 196, 1024},  {"r50.l4.c3", 2048, 49, 512},  {"r50.l4.c1b", 512, 49, 2048},
                          {"r50.l2.c2s2 (im2col)", 128, 784, 1152}};
  constexpr int kBatch = 2;
  std::printf("OpenBLAS %s, %d threads, batch %d\n\n| product | m x n x k | OpenBLAS threads, one call per image | "
              "single-threaded, split over %d threads | split / threaded |\n|---|---|---:|---:|---:|\n",
              openblas_get_config(), threads, kBatch, threads);
  // All single-threaded measurements first: once OpenBLAS has run a threaded call its idle
  // workers spin for up to 2^28 cycles and would steal a core from the split runs. The pause
  // lets the workers OpenBLAS starts at load time go to sleep.
  openblas_set_num_threads(1);
  usleep(500 * 1000);
  const int blocks_per_image = std::max(1, (threads + kBatch - 1) / kBatch);
  std::vector<double> split_ms, threaded_ms;
  for (const Shape& s : shapes) {
    std::vector<float> a(static_cast<std::size_t>(s.m) * s.k, 0.01f), b(static_cast<std::size_t>(s.k) * s.n * kBatch, 0.02f);
    std::vector<float> c(static_cast<std::size_t>(s.m) * s.n * kBatch);
    // The same split gemm_1x1 makes: (image, column block) tasks, one block per thread, on
    // threads that live across the repeats as the pool's do (a new thread's first OpenBLAS
    // call is far slower than its later ones).
    const int tasks = kBatch * blocks_per_image;
    auto work = [&](int t) {
      for (int task = t; task < tasks; task += threads) {
        const int img = task / blocks_per_image, blk = task % blocks_per_image;
        const int c0 = s.n * blk / blocks_per_image, c1 = s.n * (blk + 1) / blocks_per_image;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, c1 - c0, s.k, 1.0f, a.data(), s.k,
                    b.data() + static_cast<std::size_t>(img) * s.k * s.n + c0, s.n, 0.0f,
                    c.data() + static_cast<std::size_t>(img) * s.m * s.n + c0, s.n);
      }
    };
    std::barrier start(threads), done(threads);
    std::atomic<bool> stop{false};
    std::vector<std::thread> helpers;
    for (int t = 1; t < threads; ++t) {
      helpers.emplace_back([&, t] {
        for (;;) {
          start.arrive_and_wait();
          if (stop) return;
          work(t);
          done.arrive_and_wait();
        }
      });
    }
    split_ms.push_back(median_ms([&] {
      start.arrive_and_wait();
      work(0);
      done.arrive_and_wait();
    }));
    stop = true;
    start.arrive_and_wait();
    for (auto& t : helpers) t.join();
  }
  openblas_set_num_threads(threads);
  for (const Shape& s : shapes) {
    std::vector<float> a(static_cast<std::size_t>(s.m) * s.k, 0.01f), b(static_cast<std::size_t>(s.k) * s.n * kBatch, 0.02f);
    std::vector<float> c(static_cast<std::size_t>(s.m) * s.n * kBatch);
    threaded_ms.push_back(median_ms([&] {
      for (int i = 0; i < kBatch; ++i) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, a.data(), s.k,
                    b.data() + static_cast<std::size_t>(i) * s.k * s.n, s.n, 0.0f,
                    c.data() + static_cast<std::size_t>(i) * s.m * s.n, s.n);
      }
    }));
  }
  double log_sum = 0;
  for (std::size_t i = 0; i < std::size(shapes); ++i) {
    const Shape& s = shapes[i];
    const double flop = 2.0 * s.m * s.n * s.k * kBatch;
    log_sum += std::log(threaded_ms[i] / split_ms[i]);
    std::printf("| %s | %d x %d x %d | %.1f | %.1f | %.2f |\n", s.tag, s.m, s.n, s.k, flop / threaded_ms[i] / 1e6,
                flop / split_ms[i] / 1e6, threaded_ms[i] / split_ms[i]);
  }
  std::printf("\ngeomean split / threaded: %.2f\n", std::exp(log_sum / std::size(shapes)));
  return 0;
}
