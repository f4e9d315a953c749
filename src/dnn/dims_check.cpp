#include "dnn/dims_check.hpp"

#include <cstddef>
#include <string>

#include "dnn/key_text.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn::detail {
namespace {

[[noreturn]] void bad(std::string_view kind, const std::string& message) {
  throw Error(Status::invalid_argument, std::string(kind) + " problem: " + message);
}

}  // namespace

void check_rank_and_dims(std::string_view kind, int rank, const Dims& dims) {
  if (rank < 1 || rank > kMaxRank) {
    bad(kind, "rank " + std::to_string(rank) + " is out of range (valid: 1 to " + std::to_string(kMaxRank) + ")");
  }
  for (int i = 0; i < kMaxRank; ++i) {
    const std::int64_t d = dims[static_cast<std::size_t>(i)];
    if (i < rank && d < 1) bad(kind, "dims[" + std::to_string(i) + "] = " + std::to_string(d) + " must be positive");
    if (i >= rank && d != 1) {
      bad(kind, "dims[" + std::to_string(i) + "] = " + std::to_string(d) + " lies past rank " +
                    std::to_string(rank) + " and must be 1");
    }
  }
}

void check_float_dtype_and_bytes(std::string_view kind, DType dtype, const Dims& dims, int rank) {
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) {
    bad(kind, std::string("dtype ") + galley::to_string(dtype) + " is not supported (valid: f32, f16, bf16)");
  }
  std::int64_t total = static_cast<std::int64_t>(size_of(dtype));
  for (int i = 0; i < rank; ++i) {
    if (__builtin_mul_overflow(total, dims[static_cast<std::size_t>(i)], &total)) {
      bad(kind, "byte size of the tensor " + dims_text(dims, rank) + " overflows 64 bits");
    }
  }
}

}  // namespace galley::dnn::detail
