// cuda-only readiness lines for the NVIDIA libraries the plugin links: each must match the CUDA
// runtime's major version (cuBLAS 13 for CUDA 13) and, for cuDNN, the major it was built against.
#include <cublasLt.h>
#include <cudnn.h>

#include "backends/cuda/runtime_device.hpp"

namespace galley::backends::cuda {

namespace {

std::string three_part(std::size_t version, std::size_t major_div, std::size_t minor_div) {
  return std::to_string(version / major_div) + "." + std::to_string(version % major_div / minor_div) + "." +
         std::to_string(version % minor_div);
}

}  // namespace

std::vector<std::string> library_readiness() {
  std::vector<std::string> lines;
  int runtime = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  const int runtime_major = vendor::version_major(runtime);

  // cublasLtGetVersion: major*10000 + minor*100 + patch.
  const std::size_t cublas = cublasLtGetVersion();
  const int cublas_major = static_cast<int>(cublas / 10000);
  lines.push_back("cuBLAS " + three_part(cublas, 10000, 100) + " for CUDA " + std::to_string(runtime_major) +
                  (cublas_major == runtime_major ? std::string(": ok")
                                                 : ": FAIL (cuBLAS major " + std::to_string(cublas_major) +
                                                       " does not match the CUDA runtime's)"));

  // cudnnGetVersion (9.x): major*10000 + minor*100 + patch; cudnnGetCudartVersion: CUDA's encoding.
  const std::size_t cudnn = cudnnGetVersion();
  const int cudnn_major = static_cast<int>(cudnn / 10000);
  const int cudnn_cuda_major = static_cast<int>(cudnnGetCudartVersion() / 1000);
  std::string why;
  if (cudnn_major != CUDNN_MAJOR) why = "plugin built against cuDNN " + std::to_string(CUDNN_MAJOR);
  if (cudnn_cuda_major != runtime_major) {
    why +=
        (why.empty() ? "" : "; ") + std::string("cuDNN built for CUDA ") + std::to_string(cudnn_cuda_major);
  }
  lines.push_back("cuDNN " + three_part(cudnn, 10000, 100) + " (built against " +
                  std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR) + ")" +
                  (why.empty() ? ": ok" : ": FAIL (" + why + ")"));
  return lines;
}

}  // namespace galley::backends::cuda
