#include "galley/dnn/tensor.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

// Rank-4 tensors name their dims N, C, H, W in messages; other ranks by index.
std::string dim_name(int rank, int i) {
  static constexpr const char* kNchw[4] = {"N", "C", "H", "W"};
  return rank == 4 ? kNchw[i] : "dim " + std::to_string(i);
}

std::string join(const Dims& values, int rank) {
  std::string out = "[";
  for (int i = 0; i < rank; ++i) {
    if (i != 0) out += ',';
    out += std::to_string(values[i]);
  }
  return out + "]";
}

// The largest element offset + 1, or throws naming `what` when it does not fit in int64.
std::int64_t extent(const TensorDesc& desc, std::string_view what) {
  std::int64_t last = 0;
  for (int i = 0; i < desc.rank; ++i) {
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
  desc.dims = {n, c, h, w, 1, 1};
  // Strides are products of dims; wrap-around for absurd sizes is caught by validate()/elements(),
  // which recompute with overflow checks, so plain multiplication in unsigned is enough here.
  const auto mul = [](std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
  };
  if (layout == Layout::nchw) {
    desc.strides = {mul(mul(c, h), w), mul(h, w), w, 1, 1, 1};
  } else {
    desc.strides = {mul(mul(h, w), c), 1, mul(w, c), c, 1, 1};
  }
  return desc;
}

TensorDesc TensorDesc::contiguous(DType dtype, const std::int64_t* dims, int rank) {
  if (rank < 1 || rank > kMaxRank) {
    throw Error(Status::invalid_argument,
                "tensor rank " + std::to_string(rank) + " is outside 1.." + std::to_string(kMaxRank));
  }
  TensorDesc desc;
  desc.dtype = dtype;
  desc.rank = rank;
  std::uint64_t stride = 1;  // wrap-around is caught by validate()/elements(), as in packed()
  for (int i = rank - 1; i >= 0; --i) {
    desc.dims[i] = dims[i];
    desc.strides[i] = static_cast<std::int64_t>(stride);
    stride *= static_cast<std::uint64_t>(dims[i]);
  }
  return desc;
}

TensorDesc TensorDesc::contiguous(DType dtype, std::initializer_list<std::int64_t> dims) {
  return contiguous(dtype, dims.begin(), static_cast<int>(dims.size()));
}

bool TensorDesc::is_contiguous() const {
  std::int64_t want = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (dims[i] != 1 && strides[i] != want) return false;
    want *= dims[i];
  }
  return true;
}

std::int64_t TensorDesc::elements() const {
  std::int64_t count = 1;
  for (int i = 0; i < rank; ++i) {
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
  if (rank != 4) return false;
  const auto want = packed(dtype, layout, dims[0], dims[1], dims[2], dims[3]).strides;
  for (std::size_t i = 0; i < 4; ++i) {
    if (dims[i] != 1 && strides[i] != want[i]) return false;
  }
  return true;
}

void TensorDesc::validate(std::string_view what) const {
  if (rank < 1 || rank > kMaxRank) {
    throw Error(Status::invalid_argument, std::string(what) + " tensor has rank " + std::to_string(rank) +
                                              ", outside 1.." + std::to_string(kMaxRank));
  }
  for (int i = rank; i < kMaxRank; ++i) {
    if (dims[i] != 1 || strides[i] != 1) {
      throw Error(Status::invalid_argument, std::string(what) + " tensor of rank " + std::to_string(rank) +
                                                " has dims or strides set past its rank");
    }
  }
  for (int i = 0; i < rank; ++i) {
    if (dims[i] <= 0) {
      throw Error(Status::invalid_argument, std::string(what) + " tensor " + to_string() + ": dimension " +
                                                dim_name(rank, i) + " = " + std::to_string(dims[i]) +
                                                " must be positive");
    }
  }
  // Dims first: a zero dim makes the packed strides before it zero too, and the dim is the cause.
  for (int i = 0; i < rank; ++i) {
    if (strides[i] <= 0) {
      throw Error(Status::invalid_argument, std::string(what) + " tensor " + to_string() + ": stride of " +
                                                dim_name(rank, i) + " = " + std::to_string(strides[i]) +
                                                " must be positive");
    }
  }
  std::int64_t count = 1;
  for (int i = 0; i < rank; ++i) {
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
  return std::string(galley::to_string(dtype)) + join(dims, rank) + " strides " + join(strides, rank);
}

}  // namespace galley::dnn
