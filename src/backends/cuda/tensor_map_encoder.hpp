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

}  // namespace galley::backends::gpu
