// Where the model tests find Debian's libonnx-testdata.
#pragma once

#include <cstdlib>
#include <filesystem>

namespace galley::model::testing {

/// The package's data folder; ONNX_TESTDATA_DIR points elsewhere on a machine without the package
/// (the GPU machine gets a copy carried with the test pack, see scripts/lib/gpu-pack.sh).
inline std::filesystem::path onnx_testdata_dir() {
  const char* dir = std::getenv("ONNX_TESTDATA_DIR");
  return dir != nullptr ? std::filesystem::path(dir)
                        : std::filesystem::path("/usr/share/libonnx-testdata/data");
}

}  // namespace galley::model::testing
