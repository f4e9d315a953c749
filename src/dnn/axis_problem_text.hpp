// Key text shared by the problems over a shaped tensor and its axes (softmax, reduce): a shape as
// "2x3x4x5", an axis list as "1.2", strict integers. Internal to libgalley.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "galley/dnn/tensor.hpp"

namespace galley::dnn::detail {

/// Strict decimal: digits only, no sign, no leading zero (so a key has one spelling).
bool parse_key_uint(std::string_view text, std::int64_t& out);

/// "2x3x4x5" for the first `rank` dims.
std::string dims_text(const Dims& dims, int rank);
/// Reads "2x3x4x5" into dims and rank; false when malformed or of more than kMaxRank dims.
bool parse_dims_text(std::string_view text, Dims& dims, int& rank);

/// Splits `text` at every `sep`.
std::vector<std::string_view> split_text(std::string_view text, char sep);

}  // namespace galley::dnn::detail
