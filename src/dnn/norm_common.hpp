// What the three normalisation problems share in their text forms and checks: real numbers in
// keys (epsilon, momentum), the direction letter, and the common validation.
// Internal to libgalley.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "galley/core/dtype.hpp"
#include "galley/dnn/norm_args.hpp"
#include "galley/dnn/op.hpp"

namespace galley::dnn::norm {

[[noreturn]] void bad(const std::string& message);

/// The shortest fixed-notation decimal that reads back as `value` ("0.00001", "0.1", "1"): no
/// exponent, so no '-' or '+' can appear in a key for the non-negative values keys hold.
std::string format_real(double value);
/// Parses what format_real writes, and only that spelling (so one problem has one key).
bool parse_real_canonical(std::string_view text, double& out);

/// 'F' or 'B'.
char direction_letter(NormDirection d);
/// The direction of the letter 'F' or 'B' (KeyReader::direction reads only those).
NormDirection direction_of(char letter);

/// `what` = "bnorm problem" etc.: dtype f32/f16/bf16, epsilon finite and > 0.
void check_dtype_epsilon(const char* what, DType dtype, double epsilon);
/// The product of `count` values, or bad() naming `what` when it (or its bytes) overflows.
std::int64_t checked_product(const char* what, const std::int64_t* values, int count,
                             std::size_t element_bytes);

/// Every tensor of `tensors` once, and the outputs a call also reads twice.
double tensor_bytes(const std::vector<TensorArg>& tensors);

/// f32 data: `f32` (1e-5 for one-pass maps, 1e-4 where long sums feed the outputs); 1e-2 for
/// f16/bf16 (one rounding of the output is up to 4e-3 of an element in bf16).
double norm_tolerance(DType dtype, double f32);

}  // namespace galley::dnn::norm
