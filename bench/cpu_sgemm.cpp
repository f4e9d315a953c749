// Galley's packed AVX-512 SGEMM (src/backends/cpu/sgemm_avx512.*) beside OpenBLAS on one thread,
// over the products the cpu conv solvers issue for shared/bench/conv_problems.txt at batch 2.
//
//   cpu_sgemm [--min-time S]
//
// Row-major C[m x n] = A[m x k] * B[k x n], A and B plain (no transpose), leading dimensions equal
// to the widths, data reused between calls (hot caches): this isolates the kernels from the
// solvers' gathers, splits and memory traffic. Each product is checked against a double-precision
// product (relative to the sum of |terms|, 1e-5) before it is timed. Prints a Markdown table of
// median GFLOP/s and their geomeans.
#include <cblas.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/sgemm_avx512.hpp"
#include "bench_util.hpp"

namespace {

namespace gb = galley::bench;
namespace cpu = galley::backends::cpu;

struct Shape {
  const char* what;
  std::int64_t m, n, k;
};

// The products behind the 1x1 layers (per image, or in column blocks), the im2col tasks and the
// 7x7 layers' side-by-side GEMMs, plus the odd tails the kernel treats specially.
const std::vector<Shape> kShapes = {
    {"l1.c1 1x1 (column block)", 64, 784, 64},      {"l1.c3 1x1 (column block)", 256, 784, 64},
    {"l1.c1b 1x1 (column block)", 64, 784, 256},    {"l2.c1 1x1 (column block)", 128, 784, 256},
    {"l3.c1 1x1 (one image)", 256, 196, 512},       {"l3.c3 1x1 (one image)", 1024, 196, 256},
    {"l4.c3 1x1 (two images)", 2048, 98, 512},      {"l4.c1b 1x1 (two images)", 512, 98, 2048},
    {"l2.c2s2 im2col task", 128, 196, 1152},        {"l3.c2s2 im2col task", 256, 196, 2304},
    {"l4.c2 im2col (two images)", 512, 98, 4608},   {"conv1 im2col task", 64, 784, 147},
    {"rx50 per group", 8, 784, 72},                 {"square 512", 512, 512, 512},
};

std::vector<float> random_floats(std::size_t count, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (auto& f : v) f = dist(gen);
  return v;
}

void check(const Shape& s, const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c,
           const char* who) {
  for (std::int64_t i = 0; i < s.m; i += 7) {
    for (std::int64_t j = 0; j < s.n; j += 5) {
      double sum = 0, mag = 0;
      for (std::int64_t p = 0; p < s.k; ++p) {
        const double t = static_cast<double>(a[i * s.k + p]) * b[p * s.n + j];
        sum += t;
        mag += std::fabs(t);
      }
      if (std::fabs(c[i * s.n + j] - sum) > 1e-5 * mag + 1e-30) {
        throw std::runtime_error(std::string(who) + " wrong on " + s.what + " at (" + std::to_string(i) + ", " +
                                 std::to_string(j) + ")");
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  double min_time = 0.5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--min-time" && i + 1 < argc) {
      min_time = std::stod(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: cpu_sgemm [--min-time S]\n");
      return 2;
    }
  }
  if (cpu::cpu_isa_supported() < cpu::CpuIsa::avx512) {
    std::printf("no AVX-512 on this CPU: nothing to compare\n");
    return 0;
  }
  openblas_set_num_threads(1);
  std::vector<float> storage(static_cast<std::size_t>(cpu::avx512::kPackFloats + 16));
  float* pack = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 63) &
                                         ~std::uintptr_t{63});
  std::printf("machine: %s; load average at start %s; one thread, hot caches; OpenBLAS %s\n\n",
              gb::machine().c_str(), gb::load_average().c_str(), openblas_get_config());
  std::printf("| product | m | n | k | Galley avx512 | OpenBLAS | ratio |\n|---|---:|---:|---:|---:|---:|---:|\n");
  std::vector<double> own_all, blas_all;
  for (const Shape& s : kShapes) {
    const auto a = random_floats(static_cast<std::size_t>(s.m * s.k), 1);
    const auto b = random_floats(static_cast<std::size_t>(s.k * s.n), 2);
    std::vector<float> c(static_cast<std::size_t>(s.m * s.n));
    auto own = [&] {
      cpu::avx512::sgemm(false, false, s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n, 0.0f, c.data(), s.n, pack);
    };
    auto blas = [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(s.m), static_cast<int>(s.n),
                  static_cast<int>(s.k), 1.0f, a.data(), static_cast<int>(s.k), b.data(), static_cast<int>(s.n), 0.0f,
                  c.data(), static_cast<int>(s.n));
    };
    own();
    check(s, a, b, c, "Galley");
    blas();
    check(s, a, b, c, "OpenBLAS");
    const double flop = 2.0 * static_cast<double>(s.m * s.n * s.k);
    const double g_own = flop / (gb::median(gb::sample_wall_ms(min_time, own)) * 1e6);
    const double g_blas = flop / (gb::median(gb::sample_wall_ms(min_time, blas)) * 1e6);
    own_all.push_back(g_own);
    blas_all.push_back(g_blas);
    std::printf("| %s | %lld | %lld | %lld | %.1f | %.1f | %.2f |\n", s.what, static_cast<long long>(s.m),
                static_cast<long long>(s.n), static_cast<long long>(s.k), g_own, g_blas, g_own / g_blas);
  }
  std::printf("\n**Geomean GFLOP/s:** Galley avx512 %.1f; OpenBLAS %.1f; ratio %.2f\n", gb::geomean(own_all),
              gb::geomean(blas_all), gb::geomean(own_all) / gb::geomean(blas_all));
  return 0;
}
