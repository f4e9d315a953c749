// GALLEY_CPU_ISA caps the cpu kernels' instruction-set level; a bad value is an Error naming it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backends/cpu/conv_isa.hpp"
#include "core/config.hpp"
#include "galley/core/error.hpp"
#include "galley/runtime/device.hpp"

namespace galley::backends::cpu {
namespace {

TEST(CpuIsaEnv, ParsesEveryLevelAndDefaultsToAll) {
  ::unsetenv("GALLEY_CPU_ISA");
  galley::env::reload_for_testing();  // the configuration is read once per process
  EXPECT_EQ(cpu_isa_cap_from_env(), CpuIsa::avx512);
  ::setenv("GALLEY_CPU_ISA", "", 1);
  galley::env::reload_for_testing();  // the configuration is read once per process
  EXPECT_EQ(cpu_isa_cap_from_env(), CpuIsa::avx512);
  for (CpuIsa isa : {CpuIsa::scalar, CpuIsa::avx2, CpuIsa::avx512}) {
    ::setenv("GALLEY_CPU_ISA", std::string(to_string(isa)).c_str(), 1);
    galley::env::reload_for_testing();  // the configuration is read once per process
    EXPECT_EQ(cpu_isa_cap_from_env(), isa);
  }
  ::unsetenv("GALLEY_CPU_ISA");
  galley::env::reload_for_testing();  // the configuration is read once per process
}

TEST(CpuIsaEnv, BadValueNamesTheVariableAndTheValidOnes) {
  ::setenv("GALLEY_CPU_ISA", "avx9000", 1);
  galley::env::reload_for_testing();  // the configuration is read once per process
  try {
    (void)cpu_isa_cap_from_env();
    ADD_FAILURE() << "accepted avx9000";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(what.find("GALLEY_CPU_ISA"), std::string::npos) << what;
    EXPECT_NE(what.find("avx9000"), std::string::npos) << what;
    EXPECT_NE(what.find("avx2"), std::string::npos) << what;
  }
  ::unsetenv("GALLEY_CPU_ISA");
  galley::env::reload_for_testing();  // the configuration is read once per process
}

TEST(CpuIsaEnv, CappedKernelsChangeTheDeviceArchTheFindDbKeysOn) {
  if (cpu_isa_supported() == CpuIsa::scalar) GTEST_SKIP() << "nothing to cap below scalar";
  const runtime::Device cpu = runtime::device("cpu");
  const std::string uncapped = cpu.properties().arch;
  set_cpu_isa_cap(CpuIsa::scalar);
  const std::string capped = cpu.properties().arch;
  set_cpu_isa_cap(CpuIsa::avx512);
  EXPECT_NE(capped, uncapped);
  EXPECT_NE(capped.find("kernels<=scalar"), std::string::npos) << capped;
  EXPECT_EQ(cpu.properties().arch, uncapped);
}

}  // namespace
}  // namespace galley::backends::cpu
