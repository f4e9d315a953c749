// Launchers of the single-source data-movement kernels (datamove_copy.cu, datamove_parts.cu),
// over the plans of dnn/datamove_plan.hpp. `stream` is the native stream handle.
#pragma once

#include <string>

#include "dnn/datamove_plan.hpp"

namespace galley::backends::gpu {

/// dst = the plan's gather of src, converting dtypes: a vectorised copy when contiguous, vectorised
/// rows when the last dim is, a 32x32 shared-memory tiled transpose when the unit-stride dim
/// moves, a strided gather otherwise.
void launch_copy_plan(const dnn::CopyPlan& plan, const void* src, void* dst, void* stream);
/// concat (whole from parts) or split (parts from whole), one launch for every part.
void launch_parts(const dnn::PartsPlan& plan, bool concat, void* whole, void* const* parts, void* stream);
/// dst = src padded with plan.value.
void launch_pad(const dnn::PadPlan& plan, const void* src, void* dst, void* stream);
/// Whether launch_register_transpose takes `plan` (else false, with the reason in `why` when not
/// null): a same-dtype move of 2- or 4-byte elements that moves the unit-stride dim, both swapped
/// dims and every other src stride whole 16-byte vectors.
bool register_transpose_applies(const dnn::CopyPlan& plan, std::string* why);
/// dst = the plan's gather of src, 8x8 blocks of halves (4x4 of words) a thread through registers;
/// launch_copy_plan where the plan or the pointers do not allow it.
void launch_register_transpose(const dnn::CopyPlan& plan, const void* src, void* dst, void* stream);
/// Which path launch_copy_plan takes for `plan`: "copy", "rows", "tiled" or "strided".
const char* copy_plan_path(const dnn::CopyPlan& plan);

}  // namespace galley::backends::gpu
