// The GALLEY_* configuration: one table, each variable validated with a message naming the
// variable, the value and the valid values; read once; listed without throwing.
#include "core/config.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "common/scoped_env.hpp"
#include "galley/core/env.hpp"
#include "galley/core/error.hpp"

namespace galley::env {
namespace {

using galley::testing::ScopedEnv;

std::string check_message() {
  try {
    check();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

bool declared(std::string_view name) {
  const auto& table = variables();
  return std::any_of(table.begin(), table.end(), [&](const Variable& v) { return v.name == name; });
}

struct BadValue {
  const char* name;
  const char* value;
  const char* valid;  // a piece of the list of valid values the message must show
};

TEST(Config, EveryBadValueNamesTheVariableTheValueAndTheValidValues) {
  const BadValue cases[] = {
      {"GALLEY_DEVICE", "tpu:0", "cuda:N"},
      {"GALLEY_DEVICE", "cuda:x", "hip:N"},
      {"GALLEY_VISIBLE_DEVICES", "cuda:0,gpu", "cuda:N"},
      {"GALLEY_LOG_LEVEL", "loud", "error, warn, info, debug, trace"},
      {"GALLEY_LOG_CMD", "maybe", "1, 0, true, false"},
      {"GALLEY_LAUNCH_BLOCKING", "2", "1, 0, true, false"},
      {"GALLEY_FIND_MODE", "turbo", "normal, fast, hybrid, off"},
      {"GALLEY_FIND_ENFORCE", "yes", "none, search"},
      {"GALLEY_FIND_TIME_MS", "abc", "positive number"},
      {"GALLEY_FIND_TIME_MS", "-5", "positive number"},
      {"GALLEY_FIND_TIME_MS", "nan", "positive number"},
      {"GALLEY_FIND_TIME_MS", "10ms", "positive number"},
      {"GALLEY_ALLOC_CONF", "max_split:128", "max_split_mb"},
      {"GALLEY_NO_CACHING", "maybe", "1, 0, true, false"},
      {"GALLEY_CUDA_GRAPHS", "sometimes", "1, 0, true, false"},
      {"GALLEY_PROFILE_DEVICE_TIMES", "sometimes", "events, cupti, host"},
      {"GALLEY_NUM_THREADS", "0", "1..4096"},
      {"GALLEY_NUM_THREADS", "64x", "1..4096"},
      {"GALLEY_NUM_THREADS", "99999999999999999999", "1..4096"},
      {"GALLEY_CPU_ISA", "avx9000", "scalar, avx2, avx512"},
      {"GALLEY_DEBUG_IGEMM_TC_PLAN", "3", "tile:splits"},
      {"GALLEY_DEBUG_IGEMM_TC_PLAN", "3:0", "splits 1..64"},
      {"GALLEY_DEBUG_IGEMM_TC_TUNE", "off-ish", "1, 0, true, false"},
      {"GALLEY_DEBUG_BWD_WEIGHTS_WGMMA", "sure", "1, 0, true, false"},
      {"GALLEY_DEBUG_3XTF32", "tf32", "1, 0, true, false"},
      {"GALLEY_DEBUG_BWD_DATA_PHASES", "some", "1, 0, true, false"},
      {"GALLEY_DEBUG_GEMM_WGMMA", "wg", "1, 0, true, false"},
  };
  for (const auto& c : cases) {
    ASSERT_TRUE(declared(c.name)) << c.name;
    ScopedEnv env(c.name, c.value);
    const std::string what = check_message();
    EXPECT_NE(what.find(std::string(c.name) + "='" + c.value + "'"), std::string::npos)
        << c.name << ": " << what;
    EXPECT_NE(what.find(c.valid), std::string::npos) << c.name << ": " << what;
    try {
      (void)config();
      ADD_FAILURE() << c.name << "=" << c.value << " accepted by config()";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    }
  }
  EXPECT_EQ(check_message(), "") << "restoring the environment restores a valid configuration";
}

TEST(Config, GoodValuesAreParsed) {
  ScopedEnv threads("GALLEY_NUM_THREADS", "3");
  ScopedEnv mode("GALLEY_FIND_MODE", " Fast ");
  ScopedEnv enforce("GALLEY_FIND_ENFORCE", "search");
  ScopedEnv time("GALLEY_FIND_TIME_MS", "250.5");
  ScopedEnv blocking("GALLEY_LAUNCH_BLOCKING", "yes");
  ScopedEnv level("GALLEY_LOG_LEVEL", "debug");
  ScopedEnv visible("GALLEY_VISIBLE_DEVICES", " cuda:1 ,hip,");
  ScopedEnv plugins("GALLEY_PLUGIN_PATH", "/a::/b");
  ScopedEnv plan("GALLEY_DEBUG_IGEMM_TC_PLAN", "4:2");
  ScopedEnv tune("GALLEY_DEBUG_IGEMM_TC_TUNE", "0");
  ScopedEnv graphs("GALLEY_CUDA_GRAPHS", "0");
  ScopedEnv device_times("GALLEY_PROFILE_DEVICE_TIMES", "Host");
  ScopedEnv bwd_wgmma("GALLEY_DEBUG_BWD_WEIGHTS_WGMMA", "0");
  ScopedEnv tf32_off("GALLEY_DEBUG_3XTF32", "false");
  ScopedEnv phases_off("GALLEY_DEBUG_BWD_DATA_PHASES", "0");
  ScopedEnv gemm_wgmma_off("GALLEY_DEBUG_GEMM_WGMMA", "0");
  const Config& c = config();
  EXPECT_EQ(c.num_threads, 3);
  EXPECT_EQ(c.find_mode, "fast");
  EXPECT_TRUE(c.find_enforce_search);
  ASSERT_TRUE(c.find_time_ms.has_value());
  EXPECT_DOUBLE_EQ(*c.find_time_ms, 250.5);
  EXPECT_TRUE(c.launch_blocking);
  EXPECT_EQ(c.log_level, 3);
  ASSERT_TRUE(c.visible_devices.has_value());
  EXPECT_EQ(*c.visible_devices, (std::vector<std::string>{"cuda:1", "hip"}));
  EXPECT_EQ(c.plugin_path, (std::vector<std::string>{"/a", "/b"}));
  ASSERT_TRUE(c.debug_igemm_tc_plan.has_value());
  EXPECT_EQ(*c.debug_igemm_tc_plan, (std::pair<int, int>{4, 2}));
  EXPECT_FALSE(c.debug_igemm_tc_tune);
  EXPECT_FALSE(c.cuda_graphs);
  EXPECT_EQ(c.profile_device_times, "host");
  EXPECT_FALSE(c.debug_bwd_weights_wgmma);
  EXPECT_FALSE(c.debug_3xtf32);
  EXPECT_FALSE(c.debug_bwd_data_phases);
  EXPECT_FALSE(c.debug_gemm_wgmma);
}

TEST(Config, UnsetAndEmptyMeanTheDefaults) {
  ScopedEnv threads("GALLEY_NUM_THREADS", "");
  ScopedEnv mode("GALLEY_FIND_MODE", nullptr);
  ScopedEnv blocking("GALLEY_LAUNCH_BLOCKING", "");
  ScopedEnv graphs("GALLEY_CUDA_GRAPHS", "");
  ScopedEnv profile("GALLEY_PROFILE", "");
  const Config& c = config();
  EXPECT_EQ(c.num_threads, 0);
  EXPECT_EQ(c.find_mode, "");
  EXPECT_FALSE(c.launch_blocking);
  EXPECT_TRUE(c.cuda_graphs);
  EXPECT_FALSE(c.visible_devices.has_value());
}

TEST(Config, IsReadOnceUntilTheTestHookReloadsIt) {
  ScopedEnv blocking("GALLEY_LAUNCH_BLOCKING", "1");
  ASSERT_TRUE(config().launch_blocking);
  ::setenv("GALLEY_LAUNCH_BLOCKING", "0", 1);  // behind the configuration's back
  EXPECT_TRUE(config().launch_blocking) << "the environment is read once, not on every access";
  ::setenv("GALLEY_LAUNCH_BLOCKING", "bogus", 1);
  EXPECT_NO_THROW(check()) << "a value set after the read is not seen until a reload";
  reload_for_testing();
  EXPECT_THROW(check(), Error);
}

TEST(Config, GalleyProfileIsImplementedAndABadPathIsNamed) {
  const auto& table = variables();
  const auto profile =
      std::find_if(table.begin(), table.end(), [](const Variable& v) { return v.name == "GALLEY_PROFILE"; });
  ASSERT_NE(profile, table.end());
  EXPECT_TRUE(profile->implemented);
  ScopedEnv env("GALLEY_PROFILE", "/nonexistent-galley-folder/trace.json");
  try {
    check();
    FAIL() << "GALLEY_PROFILE in a folder that does not exist accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("GALLEY_PROFILE='/nonexistent-galley-folder/trace.json'"),
              std::string::npos)
        << e.what();
  }
}

TEST(Config, EveryBadVariableIsNamedInOneError) {
  ScopedEnv mode("GALLEY_FIND_MODE", "turbo");
  ScopedEnv cmd("GALLEY_LOG_CMD", "maybe");
  const std::string what = check_message();
  EXPECT_NE(what.find("GALLEY_FIND_MODE='turbo'"), std::string::npos) << what;
  EXPECT_NE(what.find("GALLEY_LOG_CMD='maybe'"), std::string::npos) << what;
}

TEST(Config, SettingsListEveryVariableAndMarkInvalidOnesWithoutThrowing) {
  ScopedEnv mode("GALLEY_FIND_MODE", "turbo");
  ScopedEnv threads("GALLEY_NUM_THREADS", "4");
  ScopedEnv stray("GALLEY_NOT_A_VARIABLE", "1");
  ScopedEnv old_name("GALLEY_IGEMM_TC_PLAN", "1:1");
  std::vector<Setting> listed;
  ASSERT_NO_THROW(listed = settings());
  const auto find = [&](std::string_view name) -> const Setting* {
    for (const auto& s : listed) {
      if (s.name == name) return &s;
    }
    return nullptr;
  };
  for (const auto& v : variables()) EXPECT_NE(find(v.name), nullptr) << v.name << " missing from settings()";
  ASSERT_NE(find("GALLEY_FIND_MODE"), nullptr);
  EXPECT_EQ(find("GALLEY_FIND_MODE")->value, "turbo");
  EXPECT_NE(find("GALLEY_FIND_MODE")->problem.find("normal, fast, hybrid, off"), std::string::npos);
  EXPECT_EQ(find("GALLEY_NUM_THREADS")->problem, "");
  EXPECT_FALSE(find("GALLEY_DEVICE")->value.has_value());
  const Setting* stray_setting = find("GALLEY_NOT_A_VARIABLE");
  ASSERT_NE(stray_setting, nullptr) << "an undeclared GALLEY_* name in the environment is listed";
  EXPECT_FALSE(stray_setting->known);
  ASSERT_NE(find("GALLEY_IGEMM_TC_PLAN"), nullptr);
  EXPECT_NE(find("GALLEY_IGEMM_TC_PLAN")->problem.find("did you mean GALLEY_DEBUG_IGEMM_TC_PLAN?"),
            std::string::npos)
      << find("GALLEY_IGEMM_TC_PLAN")->problem;
}

TEST(Config, AnUndeclaredNameIsIgnoredNotAnError) {
  ScopedEnv stray("GALLEY_NOT_A_VARIABLE", "1");
  EXPECT_NO_THROW(check());
}

TEST(Config, DevelopmentKnobsAreDeclared) {
  for (const char* name :
       {"GALLEY_DEBUG_IGEMM_TC_PLAN", "GALLEY_DEBUG_IGEMM_TC_TUNE", "GALLEY_DEBUG_BWD_WEIGHTS_WGMMA",
        "GALLEY_DEBUG_3XTF32", "GALLEY_DEBUG_BWD_DATA_PHASES", "GALLEY_DEBUG_GEMM_WGMMA"}) {
    EXPECT_TRUE(declared(name)) << name;
  }
  for (const auto& v : variables()) {
    EXPECT_TRUE(v.name.starts_with("GALLEY_")) << v.name;
    EXPECT_FALSE(v.meaning.empty()) << v.name;
    EXPECT_FALSE(v.default_value.empty()) << v.name;
  }
}

}  // namespace
}  // namespace galley::env
