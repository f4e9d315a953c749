// cuTensorMapEncodeTiled, which describes a global tensor to TMA, fetched from the driver through the
// runtime so the plugin does not link against libcuda. Shared by the Hopper kernels that copy tiles by
// TMA (gemm_wgmma.cu, conv_igemm_wgmma.cu).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <string>

#include "galley/core/error.hpp"

namespace galley::backends::gpu {

/// The driver's encoder, looked up once; an Error(unsupported) naming `who` where the driver lacks it.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder(const char* who) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    (void)cudaGetLastError();
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (encode == nullptr)
    throw Error(Status::unsupported, std::string(who) + ": the driver has no cuTensorMapEncodeTiled");
  return encode;
}

/// The 3-D tensor map of 16-bit (f16 or bf16) `base` with extents `dims` (innermost first) and the
/// byte strides of dims 1 and 2, read in boxes of 64 x box_rows x 1 with the 128-byte swizzle (the
/// layout wgmma reads); elements outside the extents arrive as zeros. A failure is an Error naming
/// `who` and `what` the tensor is.
inline CUtensorMap swizzled_box_map(bool f16, const void* base, const cuuint64_t (&dims)[3],
                                    const cuuint64_t (&strides)[2], int box_rows, const char* who,
                                    const std::string& what) {
  const cuuint32_t box[3] = {64, cuuint32_t(box_rows), 1}, element_strides[3] = {1, 1, 1};
  CUtensorMap map{};
  const CUresult r = tensor_map_encoder(who)(
      &map, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3,
      const_cast<void*>(base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(Status::backend_error, std::string(who) + ": cuTensorMapEncodeTiled failed (" +
                                           std::to_string(int(r)) + ") for " + what);
  return map;
}

}  // namespace galley::backends::gpu
