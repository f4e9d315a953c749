// Host-side helpers on raw tensor data of any storage dtype: conversion to and from float, seeded
// random inputs, and the comparison every conformance check uses. Internal to libgalley, tests and
// the CLI (the reference, the solver tests and `galley bench conv -V 1` share one judge).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "galley/core/dtype.hpp"
#include "galley/dnn/conv_problem.hpp"

namespace galley::dnn {

/// Converts `count` elements of f32/f16/bf16 storage to float (exact for all three).
void to_float(DType dtype, const void* src, float* dst, std::int64_t count);
/// Rounds `count` floats to f32/f16/bf16 storage (round to nearest even).
void from_float(DType dtype, const float* src, void* dst, std::int64_t count);

/// `count` elements of `dtype`, uniform in [-1, 1) then rounded to the dtype, from a fixed seed:
/// the same seed gives the same bytes on every machine.
std::vector<std::byte> random_tensor(DType dtype, std::int64_t count, std::uint64_t seed);

/// How far an output is from the reference.
struct Comparison {
  double max_rel_err = 0;         ///< max |got - ref| / max |ref| (the output's inf-norm); inf when any NaN
  double max_abs_err = 0;         ///< max |got - ref|
  double ref_norm = 0;            ///< max |ref|
  std::int64_t nan_count = 0;     ///< NaN or inf in `got` (poison left behind counts here)
  std::int64_t worst_index = -1;  ///< element with the largest error, or the first NaN
  bool passed = false;            ///< no NaN/inf and max_rel_err <= tolerance
  /// "max_rel_err 1.2e-07 at element 17 (got 0.5, want 0.50001)" or "3 NaN, first at element 0".
  std::string summary;
};

/// Compares `count` elements of `got` with `ref` (both in `dtype` storage) against `tolerance`.
/// Errors are relative to the reference's largest magnitude, so one tolerance fits every problem
/// size; a NaN or inf anywhere in `got` or `ref` fails, whatever the tolerance.
Comparison compare_outputs(DType dtype, const void* got, const void* ref, std::int64_t count,
                           double tolerance);

/// The tolerance for a conv output of `dtype` with f32 accumulation: 1e-5 for f32 (room for
/// summation order and Winograd transforms), 1e-2 for f16/bf16 (one rounding of the output
/// is 5e-4 resp. 4e-3 relative).
double conv_tolerance(DType dtype);
/// The tolerance for one problem: conv_tolerance(dtype), widened for fp32 problems whose outputs
/// sum more than 1024 products by sqrt(products / 1024), the growth of a correct fp32 sum's rounding,
/// by 8 for an epilogue activation with bounded outputs (clip, sigmoid, tanh, hardsigmoid), and by 2
/// for a 3x3 problem a solver may run as Winograd (forward or weights stride 1, any backward-data).
double conv_tolerance(const ConvProblem& problem);

}  // namespace galley::dnn
