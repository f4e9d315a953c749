// Issue 16's CPU figure: what a fused epilogue (bias + relu; bias + residual + relu) costs over the
// convolution alone on the same solver, for the problems of a list (the ResNet-50 layers by default).
// Per problem, in one process: the tuner picks the plain problem's solver, then ROUNDS rounds time
// the plain and the two fused forms with that solver in rotating order, each a batch of back-to-back
// calls lasting ~50 ms, so load on the machine hits every form alike. Prints per problem the medians
// of the per-round fused / plain ratios and their geomean (the target: <= 1.05).
//
//   cpu_fused_epilogue_cost [--file shared/bench/conv_problems.txt] [--tag r50.] [--batch 2]
//                           [--rounds 9] [--device cpu]
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

namespace {

using Clock = std::chrono::steady_clock;
using galley::Tensor;
using galley::dnn::Activation;
using galley::dnn::ConvEpilogue;
using galley::dnn::ConvProblem;
using galley::dnn::ConvSolver;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Tensor random_on_device(galley::runtime::Stream& stream, const galley::dnn::TensorDesc& desc,
                        std::uint64_t seed) {
  Tensor t = Tensor::empty(stream, desc);
  const std::vector<std::byte> host = galley::dnn::random_tensor(desc.dtype, desc.elements(), seed);
  t.copy_from_host(stream, host.data(), host.size());
  return t;
}

struct Form {
  const char* name;
  ConvProblem problem;
};

}  // namespace

int main(int argc, char** argv) {
  std::string file = "../shared/bench/conv_problems.txt", tag = "r50.", device = "cpu";
  int rounds = 9;
  std::int64_t batch = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--file")
      file = value;
    else if (flag == "--tag")
      tag = value;
    else if (flag == "--device")
      device = value;
    else if (flag == "--rounds")
      rounds = std::atoi(value.c_str());
    else if (flag == "--batch")
      batch = std::atoll(value.c_str());
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::ifstream in(file);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", file.c_str());
    return 1;
  }
  galley::runtime::Stream stream(galley::runtime::device(device));
  std::printf("%-14s %-26s %10s %10s %14s\n", "problem", "solver", "plain ms", "bias-relu", "bias-res-relu");
  std::vector<double> geo[2];
  for (std::string line; std::getline(in, line);) {
    std::string name;
    if (line.empty() || line.front() == '#') continue;
    ConvProblem plain = ConvProblem::parse_driver_line(line, &name);
    if (name.rfind(tag, 0) != 0) continue;
    plain.n = batch;
    Form forms[3] = {{"plain", plain}, {"bias-relu", plain}, {"bias-res-relu", plain}};
    forms[1].problem.epilogue = ConvEpilogue::with(Activation::relu, true, false);
    forms[2].problem.epilogue = ConvEpilogue::with(Activation::relu, true, true);
    const Tensor x = random_on_device(stream, plain.x_desc(), 1),
                 w = random_on_device(stream, plain.w_desc(), 2);
    const Tensor bias =
        random_on_device(stream, galley::dnn::TensorDesc::contiguous(plain.dtype, {plain.k}), 3);
    const Tensor residual = random_on_device(stream, plain.y_desc(), 4);
    Tensor y = Tensor::empty(stream, plain.y_desc());
    const ConvSolver& solver = galley::dnn::convolution_forward(stream, plain, x, w, y);  // the tuner's pick
    const auto call = [&](const Form& f) {
      const ConvEpilogue& e = f.problem.epilogue;
      galley::dnn::convolution_forward(stream, f.problem, x, w, e.bias ? &bias : nullptr,
                                       e.residual ? &residual : nullptr, y, &solver);
    };
    const auto time_batch = [&](const Form& f, int calls) {
      const auto start = Clock::now();
      for (int i = 0; i < calls; ++i) call(f);
      stream.synchronize();
      return std::chrono::duration<double, std::milli>(Clock::now() - start).count() / calls;
    };
    for (const Form& f : forms) time_batch(f, 2);  // warm-up: workspaces, caches
    const int calls = std::max(3, static_cast<int>(50.0 / std::max(time_batch(forms[0], 3), 1e-3)));
    std::vector<double> plain_ms, ratio[2];
    for (int r = 0; r < rounds; ++r) {
      double ms[3];
      for (int k = 0; k < 3; ++k) {
        const int which = (k + r) % 3;  // rotate the order so no form always runs first
        ms[which] = time_batch(forms[which], calls);
      }
      plain_ms.push_back(ms[0]);
      ratio[0].push_back(ms[1] / ms[0]);
      ratio[1].push_back(ms[2] / ms[0]);
    }
    const double r0 = median(ratio[0]), r1 = median(ratio[1]);
    geo[0].push_back(std::log(r0));
    geo[1].push_back(std::log(r1));
    std::printf("%-14s %-26s %10.3f %10.3f %14.3f\n", name.c_str(), std::string(solver.name()).c_str(),
                median(plain_ms), r0, r1);
    std::fflush(stdout);
  }
  for (int i = 0; i < 2; ++i) {
    double sum = 0;
    for (double v : geo[i]) sum += v;
    std::printf("geomean fused/plain, %s: %.3f over %zu problems (target <= 1.05)\n",
                i == 0 ? "bias-relu" : "bias-res-relu", std::exp(sum / static_cast<double>(geo[i].size())),
                geo[i].size());
  }
  return 0;
}
