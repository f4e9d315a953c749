// What the data-movement benches (concat, split, transpose, pad, reorder) share: comma lists of
// integers read strictly, and the common --dtype / --layout flags with their defaults.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench_op.hpp"
#include "galley/core/dtype.hpp"
#include "galley/dnn/tensor.hpp"

namespace galley::cli {

/// "8,64,56,56" -> {8, 64, 56, 56}: each entry a strict decimal in [min, max]; an empty list or
/// entry throws Error(invalid_argument) naming `option`.
std::vector<std::int64_t> parse_int_list(std::string_view option, std::string_view text, std::int64_t min,
                                         std::int64_t max);
/// --dtype, f32 when not given.
DType bench_dtype(const OpBenchFlags& flags);
/// --layout, nchw when not given.
dnn::Layout bench_layout(const OpBenchFlags& flags);

}  // namespace galley::cli
