// ONNX conformance: every test directory of Debian's libonnx-testdata (node, pytorch-converted,
// pytorch-operator, simple) whose ops all run is executed on each device here with its
// input_*.pb, and every output must match output_*.pb within the dtype's tolerance; the rest are
// counted as skipped with the reason (an op, attribute or type the op layer lacks), printed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "galley/core/error.hpp"
#include "galley/model/executor.hpp"
#include "galley/model/onnx.hpp"
#include "galley/runtime/device.hpp"

namespace galley::model {
namespace {

namespace fs = std::filesystem;
// Debian's libonnx-testdata; ONNX_TESTDATA_DIR points elsewhere on a machine without the package
// (the GPU machine gets a copy carried with the test pack).
const fs::path kTestData = std::getenv("ONNX_TESTDATA_DIR") != nullptr ? std::getenv("ONNX_TESTDATA_DIR") : "/usr/share/libonnx-testdata/data";

// Max |got - want| / max(1, max|want|): relative for large outputs, absolute for small ones.
double max_error(const HostTensor& got, const HostTensor& want) {
  const auto g = got.as_double(), w = want.as_double();
  double scale = 1, err = 0;
  for (const double v : w) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) != std::isnan(w[i])) return INFINITY;
    if (!std::isnan(g[i])) err = std::max(err, std::abs(g[i] - w[i]));
  }
  return err / scale;
}

struct Outcome {
  int passed = 0, failed = 0, skipped = 0;
  std::map<std::string, int> skip_reasons;
  std::vector<std::string> failures;
};

void run_case(const runtime::Device& device, const fs::path& dir, Outcome& o) {
  std::unique_ptr<Executor> exec;
  try {
    exec = std::make_unique<Executor>(import_onnx((dir / "model.onnx").string()), device);
  } catch (const Error& e) {
    ++o.skipped;
    std::string why = e.what();
    const auto colon = why.find(": ");
    o.skip_reasons[colon == std::string::npos ? why : why.substr(colon + 2, 70)]++;
    return;
  }
  for (const auto& set : fs::directory_iterator(dir)) {
    if (!set.is_directory()) continue;
    runtime::Stream stream(device);
    std::map<std::string, Tensor> inputs;
    const auto& names = exec->graph().inputs;
    for (std::size_t i = 0; i < names.size(); ++i) {
      inputs[names[i]] = to_device(stream, read_onnx_tensor((set.path() / ("input_" + std::to_string(i) + ".pb")).string()));
    }
    try {
      const auto outputs = exec->run(stream, inputs);
      for (std::size_t i = 0; i < exec->graph().outputs.size(); ++i) {
        const HostTensor want = read_onnx_tensor((set.path() / ("output_" + std::to_string(i) + ".pb")).string());
        const HostTensor got = to_host(stream, outputs.at(exec->graph().outputs[i]));
        const double err = max_error(got, want);
        const double tol = want.type == ElemType::f32 ? 1e-4 : 1e-2;
        if (got.shape != want.shape || !(err <= tol)) {
          ++o.failed;
          o.failures.push_back(dir.filename().string() + "/" + set.path().filename().string() + " output " + std::to_string(i) +
                               ": shape " + to_string(got.shape) + " vs " + to_string(want.shape) + ", error " + std::to_string(err));
          return;
        }
      }
    } catch (const Error& e) {
      ++o.failed;
      o.failures.push_back(dir.filename().string() + ": " + e.what());
      return;
    }
  }
  ++o.passed;
}

void run_suite(const std::string& device_name) {
  ASSERT_TRUE(fs::is_directory(kTestData)) << kTestData << " missing: run scripts/install-deps";
  const runtime::Device device = runtime::device(device_name);
  Outcome o;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    for (const auto& entry : fs::directory_iterator(kTestData / suite)) {
      if (fs::exists(entry.path() / "model.onnx")) run_case(device, entry.path(), o);
    }
  }
  std::printf("ONNX conformance on %s: passed %d, failed %d, skipped as unsupported %d\n", device.name().c_str(), o.passed,
              o.failed, o.skipped);
  std::vector<std::pair<int, std::string>> reasons;
  for (const auto& [why, count] : o.skip_reasons) reasons.emplace_back(count, why);
  std::sort(reasons.rbegin(), reasons.rend());
  for (std::size_t i = 0; i < reasons.size() && i < 40; ++i) std::printf("  skipped %4d: %s\n", reasons[i].first, reasons[i].second.c_str());
  for (const auto& f : o.failures) ADD_FAILURE() << f;
  EXPECT_GT(o.passed, 0);
}

TEST(OnnxConformance, Cpu) { run_suite("cpu"); }

TEST(OnnxConformance, FirstGpu) {
  for (const auto& d : runtime::devices()) {
    if (!d.is_cpu()) {
      run_suite(d.name());
      return;
    }
  }
  GTEST_SKIP() << "no GPU device";
}

}  // namespace
}  // namespace galley::model
