// The profiler's cost inside one process: the same convolution calls, through the public entry
// points (dispatch, tuner pick, workspace allocation, launch), with tracing off and on in
// alternating rounds, so load on a shared machine hits both modes alike. Per problem it prints
// the median per-call time of each mode and the median of the per-round on/off ratios; then the
// cost of one off-hook (a relaxed load and a branch) against the calls it guards.
//
//   profile_overhead [--file bench/profile_overhead_problems.txt] [--device cpu|cuda:0] [--rounds 21] [--calls 200]
//
// The find-db is used as usual (GALLEY_CACHE_DIR): run `galley tune --file ...` first, or the first
// call of each problem tunes it (outside the timed rounds either way).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "dnn/tensor_data.hpp"
#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/convolution.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "galley/tensor.hpp"
#include "profile/tracer.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using galley::dnn::ConvDirection;
using galley::dnn::ConvProblem;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Workload {
  ConvProblem problem;
  galley::Tensor a, b, out;  // on the device timed
};

void call(galley::runtime::Stream& stream, Workload& w) {
  switch (w.problem.direction) {
    case ConvDirection::forward:
      galley::dnn::convolution_forward(stream, w.problem, w.a, w.b, w.out);
      break;
    case ConvDirection::backward_data:
      galley::dnn::convolution_backward_data(stream, w.problem, w.a, w.b, w.out);
      break;
    case ConvDirection::backward_weights:
      galley::dnn::convolution_backward_weights(stream, w.problem, w.a, w.b, w.out);
      break;
  }
}

galley::Tensor random_on_device(galley::runtime::Stream& stream, const galley::dnn::TensorDesc& desc,
                                std::uint64_t seed) {
  galley::Tensor t = galley::Tensor::empty(stream, desc);
  const std::vector<std::byte> host = galley::dnn::random_tensor(desc.dtype, desc.elements(), seed);
  t.copy_from_host(stream, host.data(), host.size());
  return t;
}

// Microseconds per call of `calls` back-to-back calls and one synchronize.
double time_batch(galley::runtime::Stream& stream, Workload& w, int calls) {
  const auto start = Clock::now();
  for (int i = 0; i < calls; ++i) call(stream, w);
  stream.synchronize();
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / calls;
}

}  // namespace

int main(int argc, char** argv) {
  std::string file = "bench/profile_overhead_problems.txt";
  std::string device = "cpu";
  int rounds = 21, calls = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--file")
      file = argv[i + 1];
    else if (flag == "--rounds")
      rounds = std::atoi(argv[i + 1]);
    else if (flag == "--calls")
      calls = std::atoi(argv[i + 1]);
    else if (flag == "--device")
      device = argv[i + 1];
  }
  std::ifstream in(file);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", file.c_str());
    return 1;
  }
  galley::runtime::Stream stream(galley::runtime::device(device));
  std::vector<Workload> workloads;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() == '#') continue;
    Workload w{ConvProblem::parse_driver_line(line)};
    const auto& p = w.problem;
    const auto x = p.x_desc(), wd = p.w_desc(), y = p.y_desc();
    const auto first = p.direction == ConvDirection::backward_data ? y : x;
    const auto second = p.direction == ConvDirection::backward_weights ? y : wd;
    const auto result =
        p.direction == ConvDirection::forward ? y : (p.direction == ConvDirection::backward_data ? x : wd);
    w.a = random_on_device(stream, first, 1);
    w.b = random_on_device(stream, second, 2);
    w.out = galley::Tensor::empty(stream, result);
    call(stream, w);  // tunes or loads the pick, and warms the caches
    stream.synchronize();
    workloads.push_back(std::move(w));
  }
  std::printf("%-66s %10s %10s %9s\n", ("problem (" + device + ")").c_str(), "off us", "on us", "on/off");
  std::vector<double> all_ratios;
  for (Workload& w : workloads) {
    // Enough calls per batch for ~20 ms, so one batch outlasts a scheduler time slice.
    const double probe = time_batch(stream, w, 3);
    const int n = std::max(calls, static_cast<int>(20000 / std::max(probe, 1.0)));
    std::vector<double> off, on, ratio;
    for (int r = 0; r < rounds; ++r) {
      const bool on_first = r % 2 == 1;
      double t[2];
      for (int k = 0; k < 2; ++k) {
        const bool tracing = (k == 0) == on_first;
        galley::profile::set_enabled(tracing);
        t[tracing] = time_batch(stream, w, n);
        galley::profile::set_enabled(false);
        galley::profile::clear();  // bounded memory; the cost measured is recording, not a full buffer
      }
      off.push_back(t[0]);
      on.push_back(t[1]);
      ratio.push_back(t[1] / t[0]);
    }
    all_ratios.push_back(median(ratio));
    std::printf("%-66s %10.2f %10.2f %9.4f\n", w.problem.key().c_str(), median(off), median(on),
                median(ratio));
  }
  double log_sum = 0;
  for (double r : all_ratios) log_sum += std::log(r);
  std::printf("geomean of the per-problem median on/off ratios: %.4f\n",
              std::exp(log_sum / all_ratios.size()));

  // Tracing off, a hook is `if (profile::enabled())`: time a long run of them.
  constexpr long kLoads = 200'000'000;
  long taken = 0;
  const auto start = Clock::now();
  for (long i = 0; i < kLoads; ++i) {
    if (galley::profile::enabled()) ++taken;
    asm volatile("" ::: "memory");  // one load per iteration, as at each hook
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kLoads;
  std::printf(
      "an off hook: %.2f ns (a conv call passes about 8: dispatch, tuner pick, alloc, free, "
      "launch, synchronize)%s\n",
      ns, taken ? " [tracing was on]" : "");
  return 0;
}
