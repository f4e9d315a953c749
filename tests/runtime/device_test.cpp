#include <gtest/gtest.h>
#include <stdlib.h>

#include "common/scoped_env.hpp"
#include "galley/core/error.hpp"
#include "galley/runtime/device.hpp"
#include "runtime/backend.hpp"

namespace galley::runtime {
namespace {

TEST(Device, CpuIsAlwaysPresentAndFirst) {
  const auto all = devices();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front().name(), "cpu");
  const auto cpu = device("cpu");
  EXPECT_TRUE(cpu.is_cpu());
  EXPECT_EQ(device("cpu:0"), cpu);
  const auto p = cpu.properties();
  EXPECT_EQ(p.backend, "cpu");
  EXPECT_FALSE(p.arch.empty());
  EXPECT_GT(p.compute_units, 0);
  EXPECT_GT(p.memory_total, 0u);
  EXPECT_FALSE(cpu.impl().readiness().empty());
}

void expect_error_naming(const char* name, Status status) {
  try {
    device(name);
    FAIL() << name << " resolved";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(Device, UnknownDevicesGiveClearErrors) {
  expect_error_naming("tpu:0", Status::not_found);
  expect_error_naming("cuda:7", Status::not_found);
  expect_error_naming("hip:3", Status::not_found);
  expect_error_naming("cuda:x", Status::invalid_argument);
  expect_error_naming("cuda:-1", Status::invalid_argument);
  expect_error_naming("", Status::not_found);
}

TEST(Device, EveryBackendIsReported) {
  const auto reports = backend_reports();
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_EQ(reports[0].name, "cpu");
  EXPECT_TRUE(reports[0].loaded);
  for (const auto& r : reports) {
    // A backend without devices must say why.
    if (r.device_count == 0) EXPECT_FALSE(r.reason.empty()) << r.name;
  }
}

TEST(Device, DefaultDeviceHonorsEnvironment) {
  testing::ScopedEnv env("GALLEY_DEVICE", "cpu");
  EXPECT_TRUE(default_device().is_cpu());
  env.set("tpu:0");
  try {
    default_device();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GALLEY_DEVICE"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("tpu:0"), std::string::npos);
  }
  // A well-formed name of a device this machine lacks is the registry's answer, not a syntax error.
  env.set("hip:7");
  try {
    default_device();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::not_found) << e.what();
    EXPECT_NE(std::string(e.what()).find("GALLEY_DEVICE"), std::string::npos) << e.what();
  }
  env.set(nullptr);
  EXPECT_NO_THROW(default_device());
}

TEST(Device, BadVisibleDevicesIsAnErrorBeforeAnyDeviceIsListed) {
  testing::ScopedEnv env("GALLEY_VISIBLE_DEVICES", "cuda:0,tpu");
  try {
    (void)devices();
    FAIL() << "GALLEY_VISIBLE_DEVICES=cuda:0,tpu accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("'tpu'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda:N"), std::string::npos) << e.what();
  }
  env.set("cuda:0, hip");
  EXPECT_NO_THROW((void)devices());
}

}  // namespace
}  // namespace galley::runtime
