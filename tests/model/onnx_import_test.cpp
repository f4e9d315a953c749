// ONNX import and shape inference over Debian's libonnx-testdata (installed by scripts/install-deps):
// every model either imports with each output's inferred shape equal to its test data's, or is
// refused with a galley::Error naming an unsupported op, attribute or type; and bad files are named.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "galley/core/error.hpp"
#include "galley/model/onnx.hpp"
#include "model/onnx_testdata.hpp"

namespace galley::model {
namespace {

namespace fs = std::filesystem;
const fs::path kTestData = testing::onnx_testdata_dir();

struct Tally {
  int imported = 0, refused = 0, shape_checked = 0;
  std::map<std::string, int> refusals;  // first words of the reasons, counted
};

// Imports one test directory's model; returns false with the reason when refused.
void check_case(const fs::path& dir, Tally& tally) {
  Graph g;
  try {
    g = import_onnx((dir / "model.onnx").string());
  } catch (const Error& e) {
    // Refusals are about what is not supported or a model the spec allows but the op layer does not
    // run (dynamic shapes); never an internal error.
    EXPECT_TRUE(e.status() == Status::unsupported || e.status() == Status::invalid_argument)
        << dir << ": " << to_string(e.status()) << ": " << e.what();
    ++tally.refused;
    const std::string what = e.what();
    const auto op = what.find("op '");
    tally.refusals[op != std::string::npos ? what.substr(op, what.find('\'', op + 4) - op + 1) : what.substr(what.find(':') + 1, 60)]++;
    return;
  }
  ++tally.imported;
  const fs::path data = dir / "test_data_set_0";
  for (std::size_t i = 0; i < g.outputs.size(); ++i) {
    const fs::path file = data / ("output_" + std::to_string(i) + ".pb");
    if (!fs::exists(file)) continue;
    HostTensor want;
    try {
      want = read_onnx_tensor(file.string());
    } catch (const Error& e) {
      // Test data in a type Galley does not read (bf16 written as uint16) has no shape to compare.
      EXPECT_EQ(e.status(), Status::unsupported) << file << ": " << e.what();
      continue;
    }
    EXPECT_EQ(to_string(g.value(g.outputs[i]).shape), to_string(want.shape)) << dir << " output " << i;
    EXPECT_EQ(g.value(g.outputs[i]).type, want.type) << dir << " output " << i;
    ++tally.shape_checked;
  }
}

TEST(OnnxImport, EveryTestDataModelImportsWithItsShapesOrIsRefusedByName) {
  ASSERT_TRUE(fs::is_directory(kTestData)) << kTestData << " missing: run scripts/install-deps";
  std::map<std::string, Tally> by_suite;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    for (const auto& entry : fs::directory_iterator(kTestData / suite)) {
      if (fs::exists(entry.path() / "model.onnx")) check_case(entry.path(), by_suite[suite]);
    }
  }
  int imported = 0;
  for (const auto& [suite, t] : by_suite) {
    std::printf("%-18s imported %4d (outputs shape-checked %4d), refused %4d\n", suite.c_str(), t.imported,
                t.shape_checked, t.refused);
    imported += t.imported;
    for (const auto& [why, count] : t.refusals) std::printf("    %4d %s\n", count, why.c_str());
  }
  // The convolution-network ops of the PyTorch-converted suite must import.
  EXPECT_GE(by_suite["pytorch-converted"].imported, 40);
  EXPECT_GE(imported, 250);
}

TEST(OnnxImport, PytorchConvModelHasTheShapesOfItsTestData) {
  const fs::path dir = kTestData / "pytorch-converted" / "test_Conv2d";
  const Graph g = import_onnx((dir / "model.onnx").string());
  ASSERT_EQ(g.inputs.size(), 1u);
  const HostTensor in = read_onnx_tensor((dir / "test_data_set_0" / "input_0.pb").string());
  EXPECT_EQ(to_string(g.value(g.inputs[0]).shape), to_string(in.shape));
  bool has_conv = false;
  for (const Node& n : g.nodes) has_conv = has_conv || n.op_type == "Conv";
  EXPECT_TRUE(has_conv);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(OnnxImport, BadFilesAreNamed) {
  EXPECT_NE(error_of([] { import_onnx("/nonexistent/model.onnx"); }).find("/nonexistent/model.onnx"), std::string::npos);
  EXPECT_NE(error_of([] { import_onnx("/tmp"); }).find("is a directory"), std::string::npos);
  const fs::path garbage = fs::temp_directory_path() / "galley_garbage.onnx";
  {
    std::ofstream(garbage, std::ios::binary) << "\xff\xff\xff\xff not a protobuf";
  }
  EXPECT_NE(error_of([&] { import_onnx(garbage.string()); }).find("not an ONNX model"), std::string::npos);
  fs::remove(garbage);
  EXPECT_NE(error_of([] { import_onnx((kTestData / "node" / "test_relu" / "model.onnx").string(), {0}); }).find("batch 0"),
            std::string::npos);
}

TEST(OnnxImport, UnsupportedOpsAreNamedWithTheirNode) {
  const std::string why = error_of([] { import_onnx((kTestData / "node" / "test_acos" / "model.onnx").string()); });
  EXPECT_NE(why.find("op 'Acos' is not supported"), std::string::npos) << why;
  EXPECT_NE(why.find("node '"), std::string::npos) << why;
}

TEST(OnnxImport, TensorFilesReadBack) {
  const HostTensor t = read_onnx_tensor((kTestData / "node" / "test_relu" / "test_data_set_0" / "input_0.pb").string());
  EXPECT_EQ(t.type, ElemType::f32);
  EXPECT_EQ(to_string(t.shape), "[3,4,5]");
  EXPECT_EQ(t.data.size(), 3u * 4 * 5 * 4);
}

}  // namespace
}  // namespace galley::model
