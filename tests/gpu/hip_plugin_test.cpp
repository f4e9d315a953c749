// The hip plugin on a machine without an AMD GPU (CI, the H200 machine): it must load, register
// a backend with no devices and say why, never abort. Skipped when the plugin was not built
// (presets cpu and cuda) or when an AMD GPU is present.
#include <gtest/gtest.h>

#include <filesystem>

#include "galley/runtime/device.hpp"

namespace galley::runtime {
namespace {

TEST(HipPlugin, ReportsWhyItHasNoDevices) {
  const BackendReport* hip = nullptr;
  const auto reports = backend_reports();
  for (const auto& r : reports) {
    if (r.name == "hip") hip = &r;
  }
  ASSERT_NE(hip, nullptr) << "the registry must report the hip backend";
  const std::filesystem::path built =
      std::filesystem::path(GALLEY_TEST_BIN_DIR) / ".." / "lib" / "libgalley_backend_hip.so";
  if (!hip->loaded && !std::filesystem::exists(built)) {
    GTEST_SKIP() << "hip plugin not built in this tree (configure with the hip or all preset): "
                 << hip->reason;
  }
  if (!hip->loaded && hip->reason.find("libamdhip64") != std::string::npos) {
    GTEST_SKIP() << "the HIP runtime library is not installed here: " << hip->reason;
  }
  ASSERT_TRUE(hip->loaded) << "the hip plugin must load even without an AMD GPU: " << hip->reason;
  if (hip->device_count > 0) GTEST_SKIP() << "an AMD GPU is present (" << hip->device_count << " devices)";
  EXPECT_NE(hip->reason.find("no AMD GPU"), std::string::npos) << hip->reason;
  EXPECT_NE(hip->reason.find("hipGetDeviceCount"), std::string::npos) << hip->reason;
  for (const auto& d : devices()) EXPECT_NE(d.backend(), "hip") << d.name();
}

}  // namespace
}  // namespace galley::runtime
