// Runs the real `galley` binary as a user would, including with bad environment values.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/run_command.hpp"

namespace {

/// stdout and stderr together.
galley::testing::CommandResult run_galley(const std::string& env, const std::string& args) {
  return galley::testing::run_command(env + " " GALLEY_TEST_BIN_DIR "/galley " + args + " 2>&1");
}

TEST(CliInfo, JsonListsBackendsAndCpu) {
  const auto r = run_galley("", "info --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto info = nlohmann::json::parse(r.output);
  ASSERT_EQ(info["backends"].size(), 3u);
  EXPECT_EQ(info["backends"][0]["name"], "cpu");
  EXPECT_EQ(info["devices"][0]["name"], "cpu");
  for (const auto& b : info["backends"]) {
    if (b["device_count"] == 0) EXPECT_FALSE(b["reason"].get<std::string>().empty()) << b.dump();
  }
}

TEST(CliInfo, EnvListsEveryVariableWithItsValue) {
  const auto r = run_galley("GALLEY_FIND_MODE=fast", "info --env");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"GALLEY_DEVICE", "GALLEY_VISIBLE_DEVICES", "GALLEY_PLUGIN_PATH", "GALLEY_LOG_LEVEL",
                           "GALLEY_LOG_CMD", "GALLEY_LAUNCH_BLOCKING", "GALLEY_FIND_MODE", "GALLEY_CACHE_DIR",
                           "GALLEY_ALLOC_CONF", "GALLEY_NO_CACHING", "GALLEY_PROFILE"}) {
    EXPECT_NE(r.output.find(name), std::string::npos) << name;
  }
  EXPECT_NE(r.output.find("fast"), std::string::npos);
}

TEST(CliInfo, CheckFailsForABadDefaultDevice) {
  const auto ok = run_galley("GALLEY_DEVICE=cpu", "info --check");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  const auto bad = run_galley("GALLEY_DEVICE=tpu:0", "info --check");
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_NE(bad.output.find("tpu:0"), std::string::npos) << bad.output;
}

TEST(CliInfo, VisibleDevicesHidesGpusButNeverTheCpu) {
  const auto r = run_galley("GALLEY_VISIBLE_DEVICES=cpu", "info --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto info = nlohmann::json::parse(r.output);
  ASSERT_EQ(info["devices"].size(), 1u);
  EXPECT_EQ(info["devices"][0]["name"], "cpu");
  EXPECT_EQ(info["default_device"], "cpu");
}

// Every command stops on a malformed GALLEY_* value, naming it, before it queues work; only
// `info --env` runs, to show which value is wrong.
TEST(CliInfo, MalformedEnvironmentIsAnErrorExceptForInfoEnv) {
  const auto level = run_galley("GALLEY_LOG_LEVEL=loud", "info");
  EXPECT_EQ(level.exit_code, 1) << level.output;
  EXPECT_NE(level.output.find("GALLEY_LOG_LEVEL='loud'"), std::string::npos) << level.output;
  EXPECT_NE(level.output.find("error, warn, info, debug, trace"), std::string::npos) << level.output;
  const auto visible = run_galley("GALLEY_VISIBLE_DEVICES='cuda:x,,gpu'", "info --json");
  EXPECT_EQ(visible.exit_code, 1) << visible.output;
  EXPECT_NE(visible.output.find("cuda:x"), std::string::npos) << visible.output;
  const auto listing = run_galley("GALLEY_LOG_LEVEL=loud", "info --env");
  EXPECT_EQ(listing.exit_code, 0) << listing.output;
  EXPECT_NE(listing.output.find("loud  INVALID"), std::string::npos) << listing.output;
}

TEST(Cli, UnknownSubcommandFails) {
  const auto r = run_galley("", "frobnicate");
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
