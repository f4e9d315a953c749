// GALLEY_ALLOC_CONF=snapshot_on_oom:PATH and `galley prof --memory`: the snapshot written at an
// out-of-memory error, its rendering, and bad paths.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/run_command.hpp"
#include "galley/core/error.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/fake_device.hpp"
#include "profile/memory_report.hpp"

namespace galley::profile {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
const std::string kGalley = std::string(GALLEY_TEST_BIN_DIR) + "/galley";

std::filesystem::path scratch(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("galley-memory-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

std::string read(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(MemorySnapshot, AnOutOfMemoryErrorWritesTheSnapshotFirstAndSaysWhere) {
  const auto path = scratch("oom.json");
  std::filesystem::remove(path);
  memory::testing::FakeDevice fake{64 * kMiB};
  auto s = fake.make_stream();
  memory::CachingAllocator alloc{fake, memory::AllocatorConfig::parse("snapshot_on_oom:" + path.string()),
                                 "fake:0"};
  memory::Buffer held = alloc.allocate(60 * kMiB, s.get());
  try {
    alloc.allocate(10 * kMiB, s.get());
    FAIL() << "expected out_of_memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("memory snapshot written to " + path.string()), std::string::npos)
        << e.what();
  }
  const auto snapshot = nlohmann::json::parse(read(path));
  EXPECT_EQ(snapshot["device"], "fake:0");
  ASSERT_EQ(snapshot["segments"].size(), 1u);
  EXPECT_EQ(snapshot["segments"][0]["blocks"][0]["state"], "active_allocated");
  EXPECT_EQ(snapshot["segments"][0]["blocks"][0]["requested_size"], 60 * kMiB);

  const std::string text = format_memory_snapshot(read(path));
  EXPECT_NE(text.find("memory snapshot of fake:0"), std::string::npos) << text;
  EXPECT_NE(text.find("reserved 60.00 MiB in 1 segments; allocated 60.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("|" + std::string(64, '#') + "|"), std::string::npos) << text;
  EXPECT_NE(text.find("out-of-memory errors 1"), std::string::npos) << text;
}

TEST(MemorySnapshot, FreeBlocksShowAsFragmentation) {
  memory::testing::FakeDevice fake{std::size_t{1} << 30};
  auto s = fake.make_stream();
  memory::CachingAllocator alloc{fake, memory::AllocatorConfig{}, "fake:0"};
  memory::Buffer a = alloc.allocate(6 * kMiB, s.get());
  memory::Buffer b = alloc.allocate(4 * kMiB, s.get());
  memory::Buffer c = alloc.allocate(6 * kMiB, s.get());
  b = memory::Buffer();
  const std::string text = format_memory_snapshot(alloc.snapshot_json());
  EXPECT_NE(text.find("reserved 20.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("allocated 12.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("cached free 8.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("largest free block 4.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("the largest free block is 50% of the free memory"), std::string::npos) << text;
  EXPECT_NE(text.find("#...."), std::string::npos) << text;
}

TEST(MemorySnapshot, ABadSnapshotPathIsANamedError) {
  try {
    memory::AllocatorConfig::parse("snapshot_on_oom:/nonexistent-galley-folder/oom.json");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("snapshot_on_oom='/nonexistent-galley-folder/oom.json'"),
              std::string::npos)
        << e.what();
  }
  const auto ok = memory::AllocatorConfig::parse("snapshot_on_oom:" + scratch("x.json").string());
  EXPECT_EQ(memory::AllocatorConfig::parse(ok.to_string()).snapshot_on_oom, ok.snapshot_on_oom);
}

TEST(MemorySnapshot, WhatIsNotASnapshotIsANamedError) {
  for (const char* text : {"{", "{}", "{\"segments\":[{\"blocks\":[{}], \"total_size\": 1}]}"}) {
    try {
      format_memory_snapshot(text);
      ADD_FAILURE() << text << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::corrupt_data) << text;
    }
  }
}

TEST(GalleyProfMemory, RendersASnapshotFile) {
  memory::testing::FakeDevice fake{std::size_t{1} << 30};
  auto s = fake.make_stream();
  memory::CachingAllocator alloc{fake, memory::AllocatorConfig{}, "fake:0"};
  memory::Buffer a = alloc.allocate(3 * kMiB, s.get());
  const auto path = scratch("snap.json");
  std::ofstream(path) << alloc.snapshot_json();
  const auto r = galley::testing::run_command(kGalley + " prof --memory " + path.string() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("memory snapshot of fake:0"), std::string::npos) << r.output;
  const auto bad =
      galley::testing::run_command(kGalley + " prof --memory " + path.string() + " --summary 2>&1");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--memory shows a memory snapshot"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace galley::profile
