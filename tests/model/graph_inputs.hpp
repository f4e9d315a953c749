// Seeded device tensors for a graph's inputs and host copies of a run's outputs: what the executor
// tests feed a network and compare it by.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dnn/tensor_data.hpp"
#include "galley/model/executor.hpp"
#include "galley/model/graph.hpp"

namespace galley::model::test {

/// Uniform random f32 data for every graph input, input i from `seed + i`, on the stream's device.
inline std::map<std::string, Tensor> seeded_inputs(runtime::Stream& stream, const Graph& g,
                                                   std::uint64_t seed) {
  std::map<std::string, Tensor> out;
  for (const std::string& name : g.inputs) {
    const Shape& shape = g.value(name).shape;
    const auto desc = dnn::TensorDesc::contiguous(DType::f32, shape.data(), static_cast<int>(shape.size()));
    const auto bytes = dnn::random_tensor(DType::f32, desc.elements(), seed++);
    Tensor t = Tensor::empty(stream, desc);
    t.copy_from_host(stream, bytes.data(), bytes.size());
    out[name] = t;
  }
  return out;
}

/// Each tensor's bytes on the host, by name.
inline std::map<std::string, std::vector<std::byte>> host_bytes(
    runtime::Stream& stream, const std::map<std::string, Tensor>& tensors) {
  std::map<std::string, std::vector<std::byte>> out;
  for (const auto& [name, t] : tensors) out[name] = to_host(stream, t).data;
  return out;
}

}  // namespace galley::model::test
