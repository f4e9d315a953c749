// The cpu executors of the data-movement plans (dnn/datamove_plan.hpp), on the thread pool:
// memcpy of contiguous runs, blocked transposes for dims that swap the unit stride, strided
// gathers for the rest, converting dtypes on the way where a reorder asks.
#pragma once

#include "dnn/datamove_plan.hpp"

namespace galley::backends::cpu {

/// dst (packed over plan.dims) = the gather plan.src_strides describes, from src.
void run_copy_plan(const dnn::CopyPlan& plan, const void* src, void* dst);
/// concat: whole's rows from the parts; split: the parts from whole's rows.
void run_parts(const dnn::PartsPlan& plan, bool concat, void* whole, void* const* parts);
/// dst = src padded with plan.value.
void run_pad(const dnn::PadPlan& plan, const void* src, void* dst);

}  // namespace galley::backends::cpu
