// The find-db on its own: round trips, identity matching, layers, corruption, unwritable files,
// export/import.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "core/config.hpp"
#include "galley/core/error.hpp"
#include "galley/tuning/find_db.hpp"
#include "tuning_fixtures.hpp"

namespace galley::tuning {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

DeviceIdentity identity(std::string galley_version = "0.1.0", std::string driver = "Linux 6.1") {
  return DeviceIdentity{"Test CPU", "avx2", 2, std::move(driver), std::move(galley_version)};
}

std::vector<FindRecord> list(const std::string& best, double ms = 1.5) {
  return {FindRecord{best, ms, 0, 0}, FindRecord{"test.conv.slow", ms * 3, 1024, 0}};
}

std::size_t count_corrupt_files(const fs::path& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".corrupt-") != std::string::npos &&
        e.path().filename().string().find("-wal") == std::string::npos &&
        e.path().filename().string().find("-shm") == std::string::npos) {
      ++n;
    }
  }
  return n;
}

TEST(FindDb, StoreThenLookupRoundTripsAndRanks) {
  TempDir dir;
  FindDb db({dir.path() / "finddb.sqlite", {}});
  EXPECT_FALSE(db.in_memory());
  EXPECT_TRUE(db.lookup("conv-key", identity()).empty());
  db.store("conv-key", identity(), {FindRecord{"a", 1.0, 0, 7}, FindRecord{"b", std::nan(""), 4096, 3}});
  const auto got = db.lookup("conv-key", identity());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].solver, "a");
  EXPECT_EQ(got[0].rank, 0);  // renumbered in the given order
  EXPECT_DOUBLE_EQ(got[0].ms, 1.0);
  EXPECT_EQ(got[1].solver, "b");
  EXPECT_EQ(got[1].rank, 1);
  EXPECT_TRUE(std::isnan(got[1].ms));
  EXPECT_EQ(got[1].workspace_bytes, 4096u);
  // A new list replaces the old one entirely.
  db.store("conv-key", identity(), {FindRecord{"c", 0.5, 0, 0}});
  ASSERT_EQ(db.lookup("conv-key", identity()).size(), 1u);
  EXPECT_EQ(db.lookup("conv-key", identity())[0].solver, "c");
}

TEST(FindDb, InnerChoiceParamsRoundTrip) {
  TempDir dir;
  const auto path = dir.path() / "finddb.sqlite";
  FindDb(FindDbPaths{path, {}})
      .store("conv-key", identity(), {FindRecord{"a", 1.0, 0, 0, "eng12{k2=3,k14=4}"}, FindRecord{"b", 2.0, 0, 1, ""}});
  FindDb reopened({path, {}});
  const auto got = reopened.lookup("conv-key", identity());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].params, "eng12{k2=3,k14=4}");
  EXPECT_EQ(got[1].params, "");
  EXPECT_EQ(reopened.problems(identity()), std::vector<std::string>{"conv-key"});
  EXPECT_TRUE(reopened.problems(identity("9.9.9")).empty());
}

TEST(FindDb, SchemaVersion1FileIsMigratedAndKeepsItsRows) {
  TempDir dir;
  const auto path = dir.path() / "finddb.sqlite";
  {
    // A find-db as Galley wrote it before rows carried params (schema 1).
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const char* sql = R"(
      CREATE TABLE find_rows (problem TEXT NOT NULL, device TEXT NOT NULL, arch TEXT NOT NULL,
        units INTEGER NOT NULL, driver TEXT NOT NULL, galley TEXT NOT NULL, rank INTEGER NOT NULL,
        solver TEXT NOT NULL, ms REAL, workspace INTEGER NOT NULL, tuned_at INTEGER NOT NULL,
        PRIMARY KEY (problem, device, arch, units, driver, galley, rank)) WITHOUT ROWID;
      INSERT INTO find_rows VALUES ('conv-old', 'Test CPU', 'avx2', 2, 'Linux 6.1', '0.1.0', 0, 'old.solver', 2.5,
        64, 1700000000);
      PRAGMA user_version=1;)";
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  FindDb db({path, {}});
  EXPECT_FALSE(db.in_memory());
  const auto got = db.lookup("conv-old", identity());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].solver, "old.solver");
  EXPECT_EQ(got[0].workspace_bytes, 64u);
  EXPECT_EQ(got[0].params, "");
  db.store("conv-new", identity(), {FindRecord{"new.solver", 1.0, 0, 0, "p1"}});
  EXPECT_EQ(FindDb({path, {}}).lookup("conv-new", identity())[0].params, "p1");
}

TEST(FindDb, FolderCreatedPrivate) {
  TempDir dir;
  const fs::path nested = dir.path() / "a" / "galley";
  FindDb db({nested / "finddb.sqlite", {}});
  EXPECT_FALSE(db.in_memory());
  ASSERT_TRUE(fs::exists(nested / "finddb.sqlite"));
  EXPECT_EQ(fs::status(nested).permissions() & fs::perms::all, fs::perms::owner_all);
}

TEST(FindDb, RowsSurviveReopening) {
  TempDir dir;
  const fs::path file = dir.path() / "finddb.sqlite";
  { FindDb(FindDbPaths{file, {}}).store("k1", identity(), list("a")); }
  FindDb again({file, {}});
  ASSERT_EQ(again.lookup("k1", identity()).size(), 2u);
  EXPECT_EQ(again.rows().size(), 2u);
}

TEST(FindDb, StaleVersionsAndOtherDevicesAreIgnored) {
  TempDir dir;
  FindDb db({dir.path() / "finddb.sqlite", {}});
  db.store("k", identity("0.0.9"), list("old_galley"));
  db.store("k", identity("0.1.0", "Linux 5.0"), list("old_driver"));
  DeviceIdentity other = identity();
  other.compute_units = 64;
  db.store("k", other, list("other_device"));
  other = identity();
  other.name = "Another CPU";
  db.store("k", other, list("other_name"));
  EXPECT_TRUE(db.lookup("k", identity()).empty());
  db.store("k", identity(), list("current"));
  ASSERT_FALSE(db.lookup("k", identity()).empty());
  EXPECT_EQ(db.lookup("k", identity())[0].solver, "current");
  EXPECT_EQ(db.rows().size(), 10u);  // the old rows are still there, just not matched
}

TEST(FindDb, SystemDbIsConsultedUnderTheUserDb) {
  TempDir dir;
  const fs::path system = dir.path() / "share" / "finddb.sqlite";
  {
    FindDb maker({system, {}});
    maker.store("both", identity(), list("from_system"));
    maker.store("system_only", identity(), list("from_system"));
  }
  FindDb db({dir.path() / "user" / "finddb.sqlite", system});
  EXPECT_TRUE(db.has_system_db());
  db.store("both", identity(), list("from_user"));
  bool from_system = true;
  EXPECT_EQ(db.lookup("both", identity(), &from_system)[0].solver, "from_user");
  EXPECT_FALSE(from_system);
  EXPECT_EQ(db.lookup("system_only", identity(), &from_system)[0].solver, "from_system");
  EXPECT_TRUE(from_system);
  EXPECT_TRUE(db.lookup("neither", identity()).empty());
  // Writes never go to the system db.
  EXPECT_EQ(FindDb(FindDbPaths{system, {}}).rows().size(), 4u);
}

TEST(FindDb, MissingSystemDbIsFine) {
  TempDir dir;
  ::testing::internal::CaptureStderr();
  FindDb db({dir.path() / "finddb.sqlite", dir.path() / "nowhere" / "finddb.sqlite"});
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_FALSE(db.has_system_db());
}

void write_file(const fs::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << bytes;
}

TEST(FindDb, GarbageFileIsMovedAsideWithOneWarning) {
  TempDir dir;
  const fs::path file = dir.path() / "finddb.sqlite";
  write_file(file, std::string(5000, 'x') + "this is not a database");
  ::testing::internal::CaptureStderr();
  FindDb db({file, {}});
  EXPECT_TRUE(db.lookup("k", identity()).empty());
  db.store("k", identity(), list("a"));
  EXPECT_EQ(db.lookup("k", identity())[0].solver, "a");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(db.in_memory());
  EXPECT_NE(err.find("corrupt"), std::string::npos) << err;
  EXPECT_EQ(err.find("galley[warn]"), err.rfind("galley[warn]")) << "more than one warning: " << err;
  EXPECT_EQ(count_corrupt_files(dir.path()), 1u);
  // The fresh file is a good db for the next process.
  EXPECT_EQ(FindDb(FindDbPaths{file, {}}).lookup("k", identity()).size(), 2u);
}

TEST(FindDb, TruncatedFileIsMovedAside) {
  TempDir dir;
  const fs::path file = dir.path() / "finddb.sqlite";
  {
    FindDb db({file, {}});
    // Enough rows for many pages, so that cutting the file loses b-tree pages.
    for (int i = 0; i < 400; ++i) db.store("conv-problem-with-a-long-key-" + std::to_string(i), identity(), list("a"));
  }
  ASSERT_FALSE(fs::exists(dir.path() / "finddb.sqlite-wal") && fs::file_size(dir.path() / "finddb.sqlite-wal") > 0);
  const auto size = fs::file_size(file);
  ASSERT_GT(size, 16384u);
  fs::resize_file(file, size / 2);
  ::testing::internal::CaptureStderr();
  FindDb db({file, {}});
  // Some statement must touch a lost page; listing every row does.
  std::vector<FindRow> rows;
  EXPECT_NO_THROW(rows = db.rows());
  db.store("k", identity(), list("b"));
  EXPECT_EQ(db.lookup("k", identity())[0].solver, "b");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("corrupt"), std::string::npos) << err;
  EXPECT_EQ(count_corrupt_files(dir.path()), 1u);
  EXPECT_FALSE(db.in_memory());
}

TEST(FindDb, UncreatableFolderFallsBackToMemoryWithOneWarning) {
  TempDir dir;
  write_file(dir.path() / "plainfile", "x");
  ::testing::internal::CaptureStderr();
  FindDb db({dir.path() / "plainfile" / "galley" / "finddb.sqlite", {}});
  EXPECT_TRUE(db.in_memory());
  db.store("k", identity(), list("a"));
  db.store("k2", identity(), list("a"));
  EXPECT_EQ(db.lookup("k", identity())[0].solver, "a");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("in memory"), std::string::npos) << err;
  EXPECT_EQ(err.find("galley[warn]"), err.rfind("galley[warn]")) << err;
}

TEST(FindDb, UnopenableFileFallsBackToMemory) {
  TempDir dir;
  fs::create_directories(dir.path() / "finddb.sqlite");  // a folder where the file should be
  ::testing::internal::CaptureStderr();
  FindDb db({dir.path() / "finddb.sqlite", {}});
  db.store("k", identity(), list("a"));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(db.in_memory());
  EXPECT_EQ(db.lookup("k", identity())[0].solver, "a");
  EXPECT_NE(err.find("cannot be written"), std::string::npos) << err;
}

// A write-protected user db: still read, new rows kept in memory. Root ignores file modes, so there
// the file is made immutable instead (chattr), and the test skips when that is not possible.
TEST(FindDb, ReadOnlyFileIsStillConsulted) {
  TempDir dir;
  const fs::path file = dir.path() / "finddb.sqlite";
  { FindDb(FindDbPaths{file, {}}).store("old", identity(), list("stored")); }
  bool immutable = false;
  if (::geteuid() == 0) {
    immutable = std::system(("chattr +i '" + file.string() + "' 2>/dev/null").c_str()) == 0;
    if (!immutable) GTEST_SKIP() << "running as root without chattr: cannot make a file read-only";
  } else {
    fs::permissions(file, fs::perms::owner_read);
  }
  ::testing::internal::CaptureStderr();
  {
    FindDb db({file, {}});
    EXPECT_TRUE(db.in_memory());
    ASSERT_FALSE(db.lookup("old", identity()).empty());
    EXPECT_EQ(db.lookup("old", identity())[0].solver, "stored");
    db.store("new", identity(), list("fresh"));
    EXPECT_EQ(db.lookup("new", identity())[0].solver, "fresh");
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  if (immutable) (void)std::system(("chattr -i '" + file.string() + "'").c_str());
  EXPECT_EQ(err.find("galley[warn]"), err.rfind("galley[warn]")) << err;
  EXPECT_NE(err.find("cannot be written"), std::string::npos) << err;
}

TEST(FindDb, ClearExportImport) {
  TempDir dir;
  // Imports take only keys and solvers this build knows.
  const std::string k1 = testing::small_problem(1).key(), k2 = testing::small_problem(2).key();
  FindDb db({dir.path() / "a.sqlite", {}});
  db.store(k1, identity(), list(testing::kFast));
  db.store(k2, identity("0.0.1"), {FindRecord{testing::kRef, std::nan(""), 0, 0}});
  EXPECT_EQ(db.export_json(dir.path() / "export.json"), 3u);
  FindDb other({dir.path() / "b.sqlite", {}});
  const WriteResult imported = other.import_json(dir.path() / "export.json");
  EXPECT_TRUE(imported.saved) << imported.reason;
  EXPECT_EQ(imported.rows, 3u);
  const auto rows = other.rows();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(other.lookup(k1, identity())[0].solver, testing::kFast);
  EXPECT_EQ(other.lookup(k1, identity())[1].solver, "test.conv.slow");
  EXPECT_TRUE(std::isnan(other.lookup(k2, identity("0.0.1"))[0].ms));
  // The time a row was tuned travels with it.
  EXPECT_EQ(rows[0].tuned_at, db.rows()[0].tuned_at);
  const WriteResult cleared = db.clear();
  EXPECT_TRUE(cleared.saved) << cleared.reason;
  EXPECT_EQ(cleared.rows, 3u);
  EXPECT_TRUE(db.rows().empty());
  // Bad inputs name the file.
  write_file(dir.path() / "bad.json", "{\"format\": \"something else\"}");
  try {
    other.import_json(dir.path() / "bad.json");
    FAIL() << "accepted a foreign file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
  }
  write_file(dir.path() / "broken.json", "{\"format\": \"galley-finddb\", \"version\": 1, \"rows\": [{\"problem\": 1}]}");
  EXPECT_THROW(other.import_json(dir.path() / "broken.json"), Error);
  EXPECT_THROW(other.import_json(dir.path() / "missing.json"), Error);
  EXPECT_EQ(other.rows().size(), 3u);  // failed imports change nothing
}

TEST(FindDb, ExportCarriesParamsAndOlderExportsWithoutThemImport) {
  TempDir dir;
  const std::string k1 = testing::small_problem(1).key(), k2 = testing::small_problem(2).key();
  FindDb db({dir.path() / "a.sqlite", {}});
  db.store(k1, identity(), {FindRecord{testing::kInner, 1.0, 0, 0, "eng3"}});
  db.export_json(dir.path() / "export.json");
  FindDb other({dir.path() / "b.sqlite", {}});
  ASSERT_EQ(other.import_json(dir.path() / "export.json").rows, 1u);
  EXPECT_EQ(other.lookup(k1, identity())[0].params, "eng3");
  write_file(dir.path() / "old.json", R"({"format": "galley-finddb", "version": 1, "rows": [{"problem": ")" +
                                          k2 + R"(", "device": "Test CPU",
                 "arch": "avx2", "compute_units": 2, "driver_version": "Linux 6.1", "galley_version": "0.1.0",
                 "rank": 0, "solver": "test.conv.slow", "workspace_bytes": 0, "tuned_at": 1, "ms": 2.0}]})");
  ASSERT_TRUE(other.import_json(dir.path() / "old.json").saved);
  EXPECT_EQ(other.lookup(k2, identity())[0].solver, "test.conv.slow");
  EXPECT_EQ(other.lookup(k2, identity())[0].params, "");
}

TEST(FindDb, DefaultPathsFollowTheEnvironment) {
  TempDir dir;
  ::setenv("GALLEY_CACHE_DIR", dir.path().c_str(), 1);
  galley::env::reload_for_testing();  // the configuration is read once per process
  EXPECT_EQ(default_find_db_paths().user, dir.path() / "finddb.sqlite");
  ::unsetenv("GALLEY_CACHE_DIR");
  galley::env::reload_for_testing();  // the configuration is read once per process
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(default_cache_dir(), fs::path("/xdg/galley"));
  ::unsetenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (home != nullptr) EXPECT_EQ(default_cache_dir(), fs::path(home) / ".cache" / "galley");
  // Beside libgalley: <lib>/../share/galley/finddb.sqlite.
  const fs::path system = default_system_db_path();
  EXPECT_EQ(system.filename(), "finddb.sqlite");
  EXPECT_EQ(system.parent_path().filename(), "galley");
  EXPECT_EQ(system.parent_path().parent_path().filename(), "share");
}

}  // namespace
}  // namespace galley::tuning
