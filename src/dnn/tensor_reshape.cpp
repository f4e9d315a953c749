// Tensor::reshaped: a row-major view of a contiguous tensor's storage under new dims.
#include <string>

#include "galley/core/error.hpp"
#include "galley/tensor.hpp"

namespace galley {

Tensor Tensor::reshaped(const std::vector<std::int64_t>& dims) const {
  const auto bad = [&](const std::string& why) {
    throw Error(Status::invalid_argument, "Tensor::reshaped: " + why);
  };
  if (!defined()) bad("empty tensor");
  if (dims.empty() || dims.size() > static_cast<std::size_t>(dnn::kMaxRank)) {
    bad(std::to_string(dims.size()) + " dims (valid: 1 to " + std::to_string(dnn::kMaxRank) + ")");
  }
  const std::int64_t count = desc_.elements();
  std::int64_t known = 1;
  int inferred = -1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1 && inferred < 0) {
      inferred = static_cast<int>(i);
      continue;
    }
    if (dims[i] < 1) {
      bad("dims[" + std::to_string(i) + "] = " + std::to_string(dims[i]) +
          " (valid: positive, or -1 once to infer it)");
    }
    if (__builtin_mul_overflow(known, dims[i], &known)) bad("the dims' product overflows");
  }
  std::vector<std::int64_t> out = dims;
  if (inferred >= 0) {
    if (count % known != 0) {
      bad("cannot infer dims[" + std::to_string(inferred) + "]: " + std::to_string(count) +
          " elements are not a multiple of " + std::to_string(known));
    }
    out[static_cast<std::size_t>(inferred)] = count / known;
    known = count;
  }
  if (known != count) {
    bad("the new dims hold " + std::to_string(known) + " elements, " + desc_.to_string() + " holds " +
        std::to_string(count));
  }
  if (!desc_.is_contiguous()) {
    bad(desc_.to_string() + " is not row-major contiguous, so no view has the new dims; copy it first " +
        "(dnn::transpose, or dnn::reorder for NHWC)");
  }
  Tensor view = *this;
  view.desc_ = dnn::TensorDesc::contiguous(desc_.dtype, out.data(), static_cast<int>(out.size()));
  return view;
}

}  // namespace galley
