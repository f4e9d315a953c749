// ONNX import: a .onnx file (opsets 7-17, initializers inline or in external data files) into a
// Graph with every value's shape inferred. Parsing is protobuf's, through Debian's libonnx.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "galley/model/graph.hpp"

namespace galley::model {

struct OnnxImportOptions {
  /// Replaces the first dim of every graph input (a symbolic batch dim such as "N" included).
  std::optional<std::int64_t> batch;
};

/// Reads, validates and shape-infers the model at `path`. Throws Error naming the file for an
/// unreadable or malformed model, an opset outside 7-17, a symbolic dim that `batch` does not
/// resolve (naming the input and dim), and whatever infer_shapes() rejects (naming node and op).
Graph import_onnx(const std::string& path, const OnnxImportOptions& options = {});

/// A TensorProto file (ONNX test data's input_0.pb, output_0.pb) as a host tensor.
HostTensor read_onnx_tensor(const std::string& path);

}  // namespace galley::model
