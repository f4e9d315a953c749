// Validation shared by the problems over one densely packed tensor of any rank (softmax, reduce):
// each throws Error(invalid_argument) with a message starting "<kind> problem: ". Internal.
#pragma once

#include <string_view>

#include "galley/core/dtype.hpp"
#include "galley/dnn/tensor.hpp"

namespace galley::dnn::detail {

/// rank in 1..kMaxRank, the first `rank` dims positive and the ones past it 1.
void check_rank_and_dims(std::string_view kind, int rank, const Dims& dims);
/// dtype f32, f16 or bf16, and the tensor's byte size within 64 bits.
void check_float_dtype_and_bytes(std::string_view kind, DType dtype, const Dims& dims, int rank);

}  // namespace galley::dnn::detail
