// The vendor libraries' names for Galley's data types, shared by every cuDNN and cuBLAS solver.
#pragma once

#include <cudnn.h>
#include <library_types.h>

#include <string>
#include <string_view>

#include "galley/core/dtype.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::cuda {

/// cuDNN's data type for `dtype`; an Error(unsupported) naming `who` for a type cuDNN is not asked for.
inline cudnnDataType_t cudnn_data_type(DType dtype, std::string_view who) {
  switch (dtype) {
    case DType::f32:
      return CUDNN_DATA_FLOAT;
    case DType::f16:
      return CUDNN_DATA_HALF;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    default:
      throw Error(Status::unsupported, std::string(who) + ": dtype " + to_string(dtype));
  }
}

/// cuBLAS's (CUDA's library) data type for `dtype`; an Error(unsupported) naming `who` otherwise.
inline cudaDataType_t cuda_data_type(DType dtype, std::string_view who) {
  switch (dtype) {
    case DType::f32:
      return CUDA_R_32F;
    case DType::f16:
      return CUDA_R_16F;
    case DType::bf16:
      return CUDA_R_16BF;
    default:
      throw Error(Status::unsupported, std::string(who) + ": dtype " + to_string(dtype));
  }
}

}  // namespace galley::backends::cuda
