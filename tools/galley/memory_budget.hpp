// The memory a command is about to allocate for one problem, checked against what the device has
// before anything is allocated: a huge shape is an Error naming each tensor and its bytes, not a
// std::bad_alloc, an out-of-memory kill or a swap storm halfway through filling inputs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "galley/dnn/conv_problem.hpp"
#include "galley/runtime/device.hpp"

namespace galley::cli {

class MemoryBudget {
 public:
  /// A budget for buffers on `device` and host buffers (on a cpu device both are the same memory).
  explicit MemoryBudget(runtime::Device device) : device_(std::move(device)) {}

  /// A buffer on the device, e.g. {"x (input)", bytes}.
  MemoryBudget& device(std::string name, std::size_t bytes);
  /// A host buffer, e.g. a host copy of x made to fill it.
  MemoryBudget& host(std::string name, std::size_t bytes);
  /// x, w and y of `problem` on the device (their byte counts overflow-checked by validate()).
  MemoryBudget& conv_tensors(const dnn::ConvProblem& problem);

  /// Throws Error(out_of_memory) when the device buffers (or the host buffers) together need more
  /// than is available: the free memory plus what Galley's caching allocator holds unused. The
  /// message names `what` (the problem), every buffer with its bytes, and the memory there is. Does
  /// nothing when the device reports no memory figures.
  void check(const std::string& what) const;

 private:
  struct Entry {
    std::string name;
    std::size_t bytes;
  };
  runtime::Device device_;
  std::vector<Entry> device_entries_, host_entries_;
};

}  // namespace galley::cli
