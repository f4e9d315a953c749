// The ONNX importer: bytes as a .onnx file through import_onnx (protobuf parsing, initializers,
// attributes, opset checks, shape inference and the constant folding it does), then the graph
// lowered for the cpu (every node's attributes checked against what its op layer call takes).
// Input: the file's bytes, written to a per-process file in /dev/shm (import_onnx reads a path, as
// users call it; external-data references resolve next to it and must stay inside that folder).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_check.hpp"
#include "galley/model/executor.hpp"
#include "galley/model/onnx.hpp"
#include "galley/runtime/device.hpp"

namespace {

const std::string& model_path() {
  static const std::string path = [] {
    const std::filesystem::path dir = std::filesystem::path("/dev/shm") / ("galley-onnx-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    return (dir / "model.onnx").string();
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  {
    std::ofstream out(model_path(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) galley::fuzz::finding("cannot write the model file");
  }
  galley::fuzz::expect_result_or_error("import_onnx + lowering", [&] {
    galley::model::OnnxImportOptions options;
    options.batch = 1;
    galley::model::Graph graph = galley::model::import_onnx(model_path(), options);
    const galley::model::Executor executor(std::move(graph), galley::runtime::device("cpu"));
  });
  return 0;
}
