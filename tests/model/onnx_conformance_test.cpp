// ONNX conformance: every test directory of Debian's libonnx-testdata (node, pytorch-converted,
// pytorch-operator, simple) whose ops all run is executed on each device here with its
// input_*.pb, and every output must match output_*.pb within the dtype's tolerance; the rest are
// counted as skipped with the reason (an op, attribute or type the op layer lacks), printed. The
// graph passes run with their defaults (and once with every pass off, on the cpu).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "galley/core/error.hpp"
#include "galley/model/executor.hpp"
#include "galley/model/onnx.hpp"
#include "galley/model/passes.hpp"
#include "galley/runtime/device.hpp"
#include "model/onnx_testdata.hpp"

namespace galley::model {
namespace {

namespace fs = std::filesystem;
const fs::path kTestData = testing::onnx_testdata_dir();

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

void run_case(const runtime::Device& device, const fs::path& dir, const PassOptions& passes, Outcome& o) {
  std::unique_ptr<Executor> exec;
  Graph graph;
  try {
    graph = import_onnx((dir / "model.onnx").string());
  } catch (const Error& e) {
    ++o.skipped;
    std::string why = e.what();
    const auto colon = why.find(": ");
    o.skip_reasons[colon == std::string::npos ? why : why.substr(colon + 2, 70)]++;
    return;
  }
  // The graph passes run on every model that imports: a pass that fails or changes a result is a
  // failure, not a skip.
  try {
    run_passes(graph, passes);
  } catch (const Error& e) {
    ++o.failed;
    o.failures.push_back(dir.filename().string() + ": graph passes: " + e.what());
    return;
  }
  try {
    exec = std::make_unique<Executor>(std::move(graph), device);
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
    std::vector<HostTensor> wants;
    try {
      for (std::size_t i = 0; i < names.size(); ++i) {
        inputs[names[i]] = to_device(stream, read_onnx_tensor((set.path() / ("input_" + std::to_string(i) + ".pb")).string()));
      }
      for (std::size_t i = 0; i < exec->graph().outputs.size(); ++i) {
        wants.push_back(read_onnx_tensor((set.path() / ("output_" + std::to_string(i) + ".pb")).string()));
      }
    } catch (const Error& e) {
      // Test data in a type Galley does not read (bf16 written as uint16, say) cannot be checked.
      if (e.status() != Status::unsupported && e.status() != Status::invalid_argument) throw;
      ++o.skipped;
      o.skip_reasons[std::string("test data: ") + std::string(e.what()).substr(0, 60)]++;
      return;
    }
    try {
      const auto outputs = exec->run(stream, inputs);
      for (std::size_t i = 0; i < exec->graph().outputs.size(); ++i) {
        const HostTensor& want = wants[i];
        const HostTensor got = to_host(stream, outputs.at(exec->graph().outputs[i]));
        const double err = max_error(got, want);
        // A graph converted to f16/bf16 is checked against the f32 data with that dtype's tolerance.
        const bool converted = passes.dtype.has_value() && passes.disabled.count("dtype-conversion") == 0;
        const double tol = converted ? (*passes.dtype == ElemType::bf16 ? 5e-2 : 1e-2) : (want.type == ElemType::f32 ? 1e-4 : 1e-2);
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

void run_suite(const std::string& device_name, PassOptions passes = {}, const std::set<std::string>& beyond_dtype = {}) {
  ASSERT_TRUE(fs::is_directory(kTestData)) << kTestData << " missing: run scripts/install-deps";
  const runtime::Device device = runtime::device(device_name);
  passes.gpu = !device.is_cpu();
  Outcome o;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    for (const auto& entry : fs::directory_iterator(kTestData / suite)) {
      if (!fs::exists(entry.path() / "model.onnx")) continue;
      if (beyond_dtype.count(entry.path().filename().string()) != 0) {
        ++o.skipped;
        o.skip_reasons["inputs beyond the dtype's precision"]++;
        continue;
      }
      run_case(device, entry.path(), passes, o);
    }
  }
  const char* layout = passes.layout == LayoutChoice::nhwc ? "nhwc" : passes.layout == LayoutChoice::nchw ? "nchw" : "auto";
  std::printf("ONNX conformance on %s (passes: dtype %s, layout %s, %zu off): passed %d, failed %d, skipped as unsupported %d\n",
              device.name().c_str(), passes.dtype ? to_string(*passes.dtype) : "f32", layout, passes.disabled.size(), o.passed,
              o.failed, o.skipped);
  std::vector<std::pair<int, std::string>> reasons;
  for (const auto& [why, count] : o.skip_reasons) reasons.emplace_back(count, why);
  std::sort(reasons.rbegin(), reasons.rend());
  for (std::size_t i = 0; i < reasons.size() && i < 40; ++i) std::printf("  skipped %4d: %s\n", reasons[i].first, reasons[i].second.c_str());
  for (const auto& f : o.failures) ADD_FAILURE() << f;
  EXPECT_GT(o.passed, 0);
}

TEST(OnnxConformance, Cpu) { run_suite("cpu"); }

// Converted to f16 (f32 interface), every case passes with f16's tolerance except those whose
// inputs differ by less than f16 resolves at their magnitude (softmax of values near 10000).
TEST(OnnxConformance, CpuF16) {
  run_suite("cpu", {.dtype = ElemType::f16}, {"test_softmax_large_number", "test_logsoftmax_large_number"});
}

// Every node that can runs NHWC, the reorders at its edges included.
TEST(OnnxConformance, CpuNhwc) { run_suite("cpu", {.layout = LayoutChoice::nhwc}); }

TEST(OnnxConformance, CpuWithPassesOff) {
  PassOptions off;
  for (const auto& name : pass_names()) off.disabled.insert(name);
  run_suite("cpu", off);
}

TEST(OnnxConformance, FirstGpu) {
  for (const auto& d : runtime::devices()) {
    if (!d.is_cpu()) {
      run_suite(d.name());
      return;
    }
  }
  GTEST_SKIP() << "no GPU device";
}

// f16 on a GPU: the automatic layout runs convolutions, pools and norms NHWC.
TEST(OnnxConformance, FirstGpuF16) {
  for (const auto& d : runtime::devices()) {
    if (!d.is_cpu()) {
      run_suite(d.name(), {.dtype = ElemType::f16}, {"test_softmax_large_number", "test_logsoftmax_large_number"});
      return;
    }
  }
  GTEST_SKIP() << "no GPU device";
}

}  // namespace
}  // namespace galley::model
