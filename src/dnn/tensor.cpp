#include "galley/dnn/tensor.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

constexpr const char* kDimNames[4] = {"N", "C", "H", "W"};

std::string join(const std::array<std::int64_t, 4>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i != 0) out += ',';
    out += std::to_string(values[i]);
  }
  return out + "]";
}

// The largest element offset + 1, or throws naming `what` when it does not fit in int64.
std::int64_t extent(const TensorDesc& desc, std::string_view what) {
  std::int64_t last = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    std::int64_t term = 0;
    if (__builtin_mul_overflow(desc.dims[i] - 1, desc.strides[i], &term) ||
        __builtin_add_overflow(last, term, &last)) {
      throw Error(Status::invalid_argument, std::string(what) + " tensor " + desc.to_string() +
                                                " spans more elements than fit in 64 bits");
    }
  }
  return last + 1;
}

}  // namespace

const char* to_string(Layout layout) noexcept {
  switch (layout) {
    case Layout::nchw:
      return "nchw";
    case Layout::nhwc:
      return "nhwc";
  }
  return "?";
}

Layout parse_layout(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "nchw") return Layout::nchw;
  if (lower == "nhwc") return Layout::nhwc;
  throw Error(Status::invalid_argument, "unknown layout " + quoted_input(text) + " (valid: nchw, nhwc)");
}

TensorDesc TensorDesc::packed(DType dtype, Layout layout, std::int64_t n, std::int64_t c, std::int64_t h,
                              std::int64_t w) {
  TensorDesc desc;
  desc.dtype = dtype;
  desc.dims = {n, c, h, w};
  // Strides are products of dims; wrap-around for absurd sizes is caught by validate()/elements(),
  // which recompute with overflow checks, so plain multiplication in unsigned is enough here.
  const auto mul = [](std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
  };
  if (layout == Layout::nchw) {
    desc.strides = {mul(mul(c, h), w), mul(h, w), w, 1};
  } else {
    desc.strides = {mul(mul(h, w), c), 1, mul(w, c), c};
  }
  return desc;
}

std::int64_t TensorDesc::elements() const {
  std::int64_t count = 1;
  for (std::size_t i = 0; i < 4; ++i) {
    if (dims[i] < 0 || __builtin_mul_overflow(count, dims[i], &count)) {
      throw Error(Status::invalid_argument, "tensor " + to_string() + ": element count overflows 64 bits");
    }
  }
  return count;
}

std::size_t TensorDesc::bytes() const {
  validate("tensor");
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(extent(*this, "tensor")), size_of(dtype), &bytes)) {
    throw Error(Status::invalid_argument, "tensor " + to_string() + ": byte size overflows");
  }
  return bytes;
}

bool TensorDesc::is_packed(Layout layout) const {
  // A dimension of size 1 is never stepped over, so its stride does not change the memory (as in
  // PyTorch's is_contiguous): NCHW with C == 1 is also NHWC.
  const auto want = packed(dtype, layout, dims[0], dims[1], dims[2], dims[3]).strides;
  for (std::size_t i = 0; i < 4; ++i) {
    if (dims[i] != 1 && strides[i] != want[i]) return false;
  }
  return true;
}

void TensorDesc::validate(std::string_view what) const {
  for (std::size_t i = 0; i < 4; ++i) {
    if (dims[i] <= 0) {
      throw Error(Status::invalid_argument, std::string(what) + " tensor " + to_string() + ": dimension " +
                                                kDimNames[i] + " = " + std::to_string(dims[i]) +
                                                " must be positive");
    }
    if (strides[i] <= 0) {
      throw Error(Status::invalid_argument, std::string(what) + " tensor " + to_string() + ": stride of " +
                                                kDimNames[i] + " = " + std::to_string(strides[i]) +
                                                " must be positive");
    }
  }
  std::int64_t count = 1;
  for (std::size_t i = 0; i < 4; ++i) {
    if (__builtin_mul_overflow(count, dims[i], &count)) {
      throw Error(Status::invalid_argument,
                  std::string(what) + " tensor " + to_string() + ": element count overflows 64 bits");
    }
  }
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(extent(*this, what)), size_of(dtype), &bytes)) {
    throw Error(Status::invalid_argument,
                std::string(what) + " tensor " + to_string() + ": byte size overflows");
  }
}

std::string TensorDesc::to_string() const {
  return std::string(galley::to_string(dtype)) + join(dims) + " strides " + join(strides);
}

}  // namespace galley::dnn
