// Writes the find-db file cannot take are reported, never passed off as saved: a held write lock
// (bounded wait, once per process), an aborting trigger, a foreign table, an unwritable path, a full
// disk. Rows committed before the failure stay, and this process still sees its own results.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include "galley/tuning/find_db.hpp"
#include "tuning_fixtures.hpp"

namespace galley::tuning {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const DeviceIdentity kId{"Test CPU", "avx2", 2, "Linux 6.1", "0.1.0"};

std::vector<FindRecord> list(const std::string& best) {
  return {FindRecord{best, 1.0, 0, 0}, FindRecord{testing::kSlow, 3.0, 1024, 0}};
}

// Statements on the file through a connection of its own, as another process would.
void sql(const fs::path& file, const std::string& statements) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, statements.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

// Another connection holding the write lock (BEGIN IMMEDIATE) until destroyed.
class LockHolder {
 public:
  explicit LockHolder(const fs::path& file) {
    EXPECT_EQ(sqlite3_open(file.c_str(), &db_), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db_);
  }
  ~LockHolder() {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
  }
  LockHolder(const LockHolder&) = delete;
  LockHolder& operator=(const LockHolder&) = delete;

 private:
  sqlite3* db_ = nullptr;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(FindDbWrites, SavedStoresSayHowManyRows) {
  TempDir dir;
  FindDb db({dir.path() / "finddb.sqlite", {}});
  const WriteResult r = db.store("k", kId, list(testing::kFast));
  EXPECT_TRUE(r.saved);
  EXPECT_TRUE(r.reason.empty()) << r.reason;
  EXPECT_EQ(r.rows, 2u);
  EXPECT_EQ(db.unsaved_stores().count, 0u);
}

TEST(FindDbWrites, InMemoryDbNeverCountsAsSaved) {
  FindDb db({{}, {}});
  const WriteResult r = db.store("k", kId, list(testing::kFast));
  EXPECT_FALSE(r.saved);
  EXPECT_NE(r.reason.find("no find-db file"), std::string::npos) << r.reason;
  EXPECT_FALSE(db.clear().saved);
  EXPECT_EQ(db.lookup("k", kId).size(), 2u);
}

TEST(FindDbWrites, HeldWriteLockCostsOneBoundedWaitThenMemory) {
  TempDir dir;
  const fs::path file = dir.path() / "finddb.sqlite";
  FindDb db({file, {}});
  ASSERT_TRUE(db.store("before", kId, list(testing::kFast)).saved);
  ::testing::internal::CaptureStderr();
  {
    LockHolder holder(file);
    auto start = std::chrono::steady_clock::now();
    const WriteResult first = db.store("during", kId, list(testing::kFast));
    const double first_s = seconds_since(start);
    EXPECT_FALSE(first.saved);
    EXPECT_NE(first.reason.find("write lock"), std::string::npos) << first.reason;
    EXPECT_NE(first.reason.find(file.string()), std::string::npos) << first.reason;
    EXPECT_GE(first_s, kLockWaitMs / 1000 * 0.9);
    EXPECT_LT(first_s, kLockWaitMs / 1000 + 1.5);
    // Later writes, and other FindDb objects of this process on the file, do not wait again.
    start = std::chrono::steady_clock::now();
    for (int i = 0; i < 5; ++i)
      EXPECT_FALSE(db.store("later" + std::to_string(i), kId, list(testing::kFast)).saved);
    FindDb another({file, {}});
    EXPECT_TRUE(another.in_memory());
    EXPECT_FALSE(another.store("other", kId, list(testing::kFast)).saved);
    EXPECT_LT(seconds_since(start), 1.0);
    EXPECT_EQ(db.unsaved_stores().count, 6u);
    // What the file held is still served, and so are this process's own results.
    EXPECT_EQ(db.lookup("before", kId).size(), 2u);
    EXPECT_EQ(db.lookup("during", kId).size(), 2u);
    EXPECT_EQ(another.lookup("before", kId).size(), 2u);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_of(err, "galley[warn]"), 1u) << err;
  EXPECT_NE(err.find("not saved"), std::string::npos) << err;
  // Nothing committed was lost, and nothing unsaved slipped into the file.
  sqlite3* check = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &check), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(
      sqlite3_prepare_v2(check, "SELECT group_concat(DISTINCT problem) FROM find_rows", -1, &s, nullptr),
      SQLITE_OK);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "before");
  sqlite3_finalize(s);
  sqlite3_close(check);
}

TEST(FindDbWrites, LockReleasedWithinTheBoundIsWaitedFor) {
  TempDir dir;
  const fs::path file = dir.path() / "finddb.sqlite";
  FindDb db({file, {}});
  ASSERT_TRUE(db.store("before", kId, list(testing::kFast)).saved);
  auto holder = std::make_unique<LockHolder>(file);
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(kLockWaitMs / 4)));
    holder.reset();
  });
  const WriteResult r = db.store("after", kId, list(testing::kFast));
  release.join();
  EXPECT_TRUE(r.saved) << r.reason;
  EXPECT_FALSE(db.in_memory());
}

TEST(FindDbWrites, AbortingTriggerIsNotSaved) {
  TempDir dir;
  const fs::path file = dir.path() / "finddb.sqlite";
  { FindDb(FindDbPaths{file, {}}).store("kept", kId, list(testing::kFast)); }
  sql(file,
      "CREATE TRIGGER frozen BEFORE INSERT ON find_rows BEGIN SELECT RAISE(ABORT, 'find-db frozen'); END;"
      "CREATE TRIGGER no_delete BEFORE DELETE ON find_rows BEGIN SELECT RAISE(ABORT, 'no deleting'); END;");
  ::testing::internal::CaptureStderr();
  FindDb db({file, {}});
  const WriteResult r = db.store("new", kId, list(testing::kFast));
  EXPECT_FALSE(r.saved);
  EXPECT_NE(r.reason.find("find-db frozen"), std::string::npos) << r.reason;
  ASSERT_EQ(db.unsaved_stores().count, 1u);
  EXPECT_EQ(db.unsaved_stores().last_reason, r.reason);
  EXPECT_EQ(db.lookup("new", kId).size(), 2u);   // this process keeps its result
  EXPECT_EQ(db.lookup("kept", kId).size(), 2u);  // and still reads the file
  EXPECT_FALSE(db.store("newer", kId, list(testing::kFast)).saved);
  EXPECT_EQ(db.unsaved_stores().count, 2u);
  const WriteResult cleared = FindDb(FindDbPaths{file, {}}).clear();
  EXPECT_FALSE(cleared.saved);
  EXPECT_NE(cleared.reason.find("no deleting"), std::string::npos) << cleared.reason;
  (void)::testing::internal::GetCapturedStderr();
  EXPECT_EQ(FindDb(FindDbPaths{file, {}}).rows().size(), 2u);  // "kept" only
}

TEST(FindDbWrites, ForeignTableIsNotSaved) {
  TempDir dir;
  const fs::path file = dir.path() / "finddb.sqlite";
  // Someone else's table under our name, at our schema version.
  sql(file,
      "CREATE TABLE find_rows (name TEXT, value INTEGER); INSERT INTO find_rows VALUES ('theirs', 1);"
      "PRAGMA user_version=2;");
  ::testing::internal::CaptureStderr();
  FindDb db({file, {}});
  const WriteResult r = db.store("k", kId, list(testing::kFast));
  (void)::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(r.saved);
  EXPECT_NE(r.reason.find(file.string()), std::string::npos) << r.reason;
  EXPECT_EQ(db.unsaved_stores().count, 1u);
}

TEST(FindDbWrites, NewerSchemaIsNotSaved) {
  TempDir dir;
  const fs::path file = dir.path() / "finddb.sqlite";
  sql(file, "CREATE TABLE find_rows (x); PRAGMA user_version=99;");
  ::testing::internal::CaptureStderr();
  FindDb db({file, {}});
  const WriteResult r = db.store("k", kId, list(testing::kFast));
  (void)::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(r.saved);
  EXPECT_NE(r.reason.find("schema version 99"), std::string::npos) << r.reason;
}

TEST(FindDbWrites, UnwritablePathClearsNothingAndSaysWhy) {
  TempDir dir;
  fs::create_directories(dir.path() / "finddb.sqlite");  // a folder where the file should be
  ::testing::internal::CaptureStderr();
  FindDb db({dir.path() / "finddb.sqlite", {}});
  const WriteResult stored = db.store("k", kId, list(testing::kFast));
  const WriteResult cleared = db.clear();
  (void)::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(stored.saved);
  EXPECT_FALSE(cleared.saved);
  EXPECT_EQ(cleared.rows, 0u);
  EXPECT_NE(cleared.reason.find("cannot be written"), std::string::npos) << cleared.reason;
  EXPECT_EQ(db.lookup("k", kId).size(), 2u);  // the in-memory db was not "cleared" in the file's place
}

// A file size limit (RLIMIT_FSIZE) is a full disk for this process: writes past it fail (EFBIG),
// with SIGXFSZ ignored so that the process lives to report it.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &old_);
    rlimit limit = old_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  sighandler_t old_handler_ = SIG_DFL;
};

TEST(FindDbWrites, FullDiskLosesNoCommittedRowAndSaysNotSaved) {
  TempDir dir;
  const fs::path file = dir.path() / "finddb.sqlite";
  std::vector<FindRow> rows;
  for (int i = 0; i < 3000; ++i) {
    rows.push_back(FindRow{testing::small_problem(i % 50).key() + "-" + std::to_string(i), kId,
                           FindRecord{testing::kFast, 1.0, 0, 0, std::string(40, 'p')}, 1700000000});
  }
  {
    FindDb db({file, {}});
    ASSERT_TRUE(db.store("committed", kId, list(testing::kFast)).saved);
  }
  const auto size_before = fs::file_size(file);
  ::testing::internal::CaptureStderr();
  WriteResult r;
  {
    FileSizeLimit limit(size_before + 64 * 1024);
    FindDb db({file, {}});
    r = db.store_rows(rows);
    EXPECT_FALSE(db.store("later", kId, list(testing::kFast)).saved);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(r.saved);
  EXPECT_EQ(r.rows, 0u);
  EXPECT_NE(r.reason.find("cannot be written"), std::string::npos) << r.reason << "\n" << err;
  // All or nothing: the file has the committed list and none of the 3000.
  FindDb after({file, {}});
  EXPECT_FALSE(after.in_memory());
  EXPECT_EQ(after.rows().size(), 2u);
  EXPECT_EQ(after.lookup("committed", kId).size(), 2u);
}

}  // namespace
}  // namespace galley::tuning
