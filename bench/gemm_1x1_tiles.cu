// Measures gpu.conv.gemm_1x1's tiles and split-K factors one by one (the planner picks one) against
// gpu.conv.igemm_f32's planned kernel on the 1x1 lines of a problem file, and the same for
// gpu.conv.igemm_f32_nchw (that kernel tap by tap) on the other ungrouped lines it takes; fp32 NCHW,
// on cuda:0. Not part of the build:
//   nvcc -O3 -std=c++20 --generate-code=arch=compute_90,code=sm_90 -Isrc -Iinclude \
//     bench/gemm_1x1_tiles.cu src/backends/gpu/conv_gemm_1x1.cu src/backends/gpu/conv_igemm_f32.cu \
//     src/backends/gpu/conv_params.cu \
//     -Lbuild/<dir>/lib -lgalley -o gemm_1x1_tiles
//   gemm_1x1_tiles conv_problems.txt
// Timing as `galley bench conv` does it: warm-up, a batch of back-to-back launches filling ~1 ms
// (at most 200), median of 10 batches (us). Each variant's output is compared with the planned
// igemm_f32's (both fp32, different summation orders: max |diff| / max |ref| well under 1e-5),
// NaN-poisoned first.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backends/gpu/conv_gemm_1x1.hpp"
#include "backends/gpu/conv_params.hpp"

using namespace galley::backends::gpu;

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

__global__ void fill_random(float* v, std::int64_t n, unsigned seed) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    v[i] = float(h & 0xffffff) / float(0x800000) - 1.f;
  }
}

template <typename F>
float median_us(F&& launch) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  launch();
  CHECK(cudaEventRecord(a));
  launch();
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  float one = 0;
  CHECK(cudaEventElapsedTime(&one, a, b));
  const int batch = std::clamp(int(1.0f / std::max(one, 1e-3f)), 1, 200);
  std::vector<float> samples;
  for (int s = 0; s < 10; ++s) {
    CHECK(cudaEventRecord(a));
    for (int i = 0; i < batch; ++i) launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    samples.push_back(ms * 1000.f / batch);
  }
  std::sort(samples.begin(), samples.end());
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return 0.5f * (samples[4] + samples[5]);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s conv_problems.txt\n", argv[0]);
    return 2;
  }
  int sm_count = 0;
  CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
  std::ifstream file(argv[1]);
  std::string line;
  const int kSplits[] = {1, 2, 4};
  std::vector<float> hr, hy;
  while (std::getline(file, line)) {
    if (line.rfind("conv", 0) != 0) continue;
    ConvParams p;
    std::string tag = line.find('#') != std::string::npos ? line.substr(line.find('#') + 2) : "";
    std::istringstream in(line.substr(0, line.find('#')));
    std::string tok;
    in >> tok;
    int v = 0;
    while (in >> tok >> v) {
      if (tok == "-n") p.n = v;
      else if (tok == "-c") p.c = v;
      else if (tok == "-H") p.h = v;
      else if (tok == "-W") p.w = v;
      else if (tok == "-k") p.k = v;
      else if (tok == "-y") p.r = v;
      else if (tok == "-x") p.s = v;
      else if (tok == "-p") p.pad_h = v;
      else if (tok == "-q") p.pad_w = v;
      else if (tok == "-u") p.stride_h = v;
      else if (tok == "-v") p.stride_w = v;
      else if (tok == "-l") p.dil_h = v;
      else if (tok == "-j") p.dil_w = v;
      else if (tok == "-g") p.groups = v;
    }
    p.p = (p.h + 2 * p.pad_h - p.dil_h * (p.r - 1) - 1) / p.stride_h + 1;
    p.q = (p.w + 2 * p.pad_w - p.dil_w * (p.s - 1) - 1) / p.stride_w + 1;
    p.cg = p.c / p.groups, p.kg = p.k / p.groups;
    if (p.groups != 1) continue;
    const bool one = gemm_1x1_refusal(p).empty();
    float *x, *w, *y, *ref;
    CHECK(cudaMalloc(&x, p.x_elems() * 4));
    CHECK(cudaMalloc(&w, p.w_elems() * 4));
    CHECK(cudaMalloc(&y, p.y_elems() * 4));
    CHECK(cudaMalloc(&ref, p.y_elems() * 4));
    void* ws = nullptr;
    CHECK(cudaMalloc(&ws, std::size_t(8) * p.y_elems() * 4 + std::size_t(p.w_elems()) * 4 + 512));
    fill_random<<<1024, 256>>>(x, p.x_elems(), 17u);
    fill_random<<<1024, 256>>>(w, p.w_elems(), 91u);
    const IgemmPlan ip = plan_igemm_f32(p, sm_count);
    launch_conv_igemm_f32(p, ip, x, w, ref, ws, nullptr);
    CHECK(cudaDeviceSynchronize());
    hr.resize(p.y_elems()), hy.resize(p.y_elems());
    CHECK(cudaMemcpy(hr.data(), ref, hr.size() * 4, cudaMemcpyDeviceToHost));
    double ref_max = 0;
    for (float f : hr) ref_max = std::max(ref_max, double(std::fabs(f)));
    auto worst_diff = [&](float* out) {
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy(hy.data(), out, hy.size() * 4, cudaMemcpyDeviceToHost));
      double worst = 0;
      for (std::size_t i = 0; i < hy.size(); ++i)
        worst = std::isnan(hy[i]) ? INFINITY : std::max(worst, std::fabs(double(hy[i]) - hr[i]) / ref_max);
      return worst;
    };
    const double flops = 2.0 * p.y_elems() * p.c * p.r * p.s;
    const float igemm_us = median_us([&] { launch_conv_igemm_f32(p, ip, x, w, ref, ws, nullptr); });
    std::printf("%-16s igemm_f32 planned %s: %.1f us (%.1f TFLOP/s)\n", tag.c_str(), ip.describe().c_str(), igemm_us,
                flops / igemm_us * 1e-6);
    double worst = 0;
    // gemm_1x1 on the 1x1 layers; gpu.conv.igemm_f32_nchw (the same kernel, tap by tap) on the others
    // it takes, where its planner never picks tile 0.
    if (one || igemm_f32_nchw_refusal(p).empty()) {
      const Gemm1x1Plan planned = plan_gemm_1x1(p, sm_count);
      CHECK(cudaMemset(y, 0xff, p.y_elems() * 4));
      launch_conv_gemm_1x1(p, planned, x, w, y, ws, nullptr);
      worst = std::max(worst, worst_diff(y));
      const float us = median_us([&] { launch_conv_gemm_1x1(p, planned, x, w, y, ws, nullptr); });
      std::printf("  %s planned %s: %.1f us (%.1f TFLOP/s)\n ", one ? "gemm_1x1" : "igemm_f32_nchw",
                  planned.describe().c_str(), us, flops / us * 1e-6);
      for (int t = one ? 0 : 1; t < gemm_1x1_tile_count(); ++t) {
        for (int sp : kSplits) {
          const Gemm1x1Plan tp = gemm_1x1_plan_for(p, t, sp);
          if (tp.splits != sp) continue;
          CHECK(cudaMemset(y, 0xff, p.y_elems() * 4));
          launch_conv_gemm_1x1(p, tp, x, w, y, ws, nullptr);
          worst = std::max(worst, worst_diff(y));
          std::printf(" %dx%d/%d/s%d %.1f", tp.bm, tp.bn, tp.bk, sp,
                      median_us([&] { launch_conv_gemm_1x1(p, tp, x, w, y, ws, nullptr); }));
        }
      }
    }
    std::printf("\n  worst rel diff vs planned igemm_f32 %.1e%s\n", worst, worst > 1e-5 ? " FAIL" : "");
    std::fflush(stdout);
    CHECK(cudaFree(x));
    CHECK(cudaFree(w));
    CHECK(cudaFree(y));
    CHECK(cudaFree(ref));
    CHECK(cudaFree(ws));
  }
  return 0;
}
