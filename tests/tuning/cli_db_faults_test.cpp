// The `galley` CLI never reports a find-db write that did not happen: `db export` will not write over
// the database (or any file, without --force), `db clear` and `db import` fail non-zero on a db they
// cannot write, `tune` and `bench conv` say "not saved" with the reason, a held write lock costs one
// bounded wait, and `db import` of a folder or of bad rows is a named error.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/run_command.hpp"
#include "galley/tuning/find_db.hpp"
#include "tuning_fixtures.hpp"

namespace galley::tuning {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
  double seconds = 0;
};

// `galley ARGS` once with `env` in front (and `prefix` before the binary, e.g. a wrapper).
CliRun galley(const TempDir& dir, const std::string& env, const std::string& args,
              const std::string& prefix = "") {
  const fs::path err_file = dir.path() / "stderr.txt";
  const auto start = std::chrono::steady_clock::now();
  const auto child = galley::testing::run_command(env + " " + prefix + GALLEY_TEST_BIN_DIR "/galley " + args +
                                                  " 2>" + err_file.string());
  CliRun r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exit_code = child.exit_code;
  r.out = child.output;
  std::ifstream in(err_file);
  r.err.assign(std::istreambuf_iterator<char>(in), {});
  return r;
}

std::string cache_env(const fs::path& cache) {
  return "GALLEY_CACHE_DIR=" + cache.string() + " GALLEY_FIND_TIME_MS=200";
}

void sql(const fs::path& file, const std::string& statements) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, statements.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

constexpr const char* kList =
    "conv -n 1 -c 8 -H 12 -W 12 -k 8 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -g 1   # small.3x3\n"
    "conv -n 1 -c 16 -H 10 -W 10 -k 8 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -g 1  # small.1x1\n";

// A cache folder whose find-db holds two tuned problems (by `galley tune`), and the list file.
struct TunedCache {
  TempDir dir;
  fs::path cache = dir.path() / "cache";
  fs::path db = cache / "finddb.sqlite";
  fs::path list = dir.path() / "list.txt";
  std::size_t rows = 0;

  TunedCache() {
    std::ofstream(list) << kList;
    const CliRun tune = galley(dir, cache_env(cache), "tune --file " + list.string());
    EXPECT_EQ(tune.exit_code, 0) << tune.out << tune.err;
    rows = db_rows();
    EXPECT_GE(rows, 2u);
  }
  std::size_t db_rows() const {
    const CliRun list_run = galley(dir, cache_env(cache), "db list --json");
    EXPECT_EQ(list_run.exit_code, 0) << list_run.err;
    return json::parse(list_run.out)["rows"].size();
  }
};

// A wrapper that runs the command with `folder` mounted read-only (a private mount namespace), so
// writes fail even for root; empty when this machine does not allow it.
std::string read_only_wrapper(const fs::path& folder) {
  const std::string wrap =
      "unshare -rm sh -c 'mount --bind -o ro \"$0\" \"$0\" && exec \"$@\"' " + folder.string() + " ";
  const auto probe =
      galley::testing::run_command(wrap + "sh -c '! touch " + (folder / "probe").string() + "' 2>/dev/null");
  return probe.exit_code == 0 ? wrap : std::string();
}

TEST(CliDbExport, NeverWritesOverTheDatabase) {
  TunedCache c;
  const std::string env = cache_env(c.cache);
  for (const std::string target :
       {c.db.string(), c.db.string() + "-wal", (c.cache / "." / "finddb.sqlite").string()}) {
    for (const std::string force : {"", " --force"}) {
      const CliRun r = galley(c.dir, env, "db export " + target + force);
      EXPECT_NE(r.exit_code, 0) << target << force;
      EXPECT_NE(r.err.find("live find-db"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(target), std::string::npos) << r.err;
    }
  }
  EXPECT_EQ(c.db_rows(), c.rows);  // still a database, every row there
  // Nor over any other SQLite database, with --force or not.
  const fs::path other = c.dir.path() / "other.sqlite";
  sql(other, "CREATE TABLE t (x); INSERT INTO t VALUES (1);");
  const auto other_size = fs::file_size(other);
  const CliRun r = galley(c.dir, env, "db export " + other.string() + " --force");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("SQLite database"), std::string::npos) << r.err;
  EXPECT_EQ(fs::file_size(other), other_size);
}

TEST(CliDbExport, ReplacesAnExistingFileOnlyWithForce) {
  TunedCache c;
  const std::string env = cache_env(c.cache);
  const fs::path file = c.dir.path() / "export.json";
  std::ofstream(file) << "precious";
  CliRun r = galley(c.dir, env, "db export " + file.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(file.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
  std::ifstream in(file);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious");
  r = galley(c.dir, env, "db export " + file.string() + " --force");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("exported " + std::to_string(c.rows) + " rows"), std::string::npos) << r.out;
  std::ifstream exported(file);
  EXPECT_EQ(json::parse(exported)["rows"].size(), c.rows);
  r = galley(c.dir, env, "db export " + c.dir.path().string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("folder"), std::string::npos) << r.err;
  // Through a link, the file it names is replaced and the link kept.
  const fs::path link = c.dir.path() / "link.json";
  fs::create_symlink(file, link);
  ASSERT_EQ(galley(c.dir, env, "db export " + link.string() + " --force").exit_code, 0);
  EXPECT_TRUE(fs::is_symlink(link));
  // A pipe or terminal replaces nothing: no --force needed.
  r = galley(c.dir, env, "db export /dev/stdout");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"galley-finddb\""), std::string::npos) << r.out;
}

TEST(CliDbExport, AFailedWriteLeavesTheOldFileAsItWas) {
  TunedCache c;
  const fs::path file = c.dir.path() / "export.json";
  std::ofstream(file) << "previous export";
  // A disk that fills up (a 512-byte file size limit, SIGXFSZ ignored) while the export is written.
  const CliRun r = galley(c.dir, cache_env(c.cache), "db export " + file.string() + " --force",
                          "sh -c \"trap '' XFSZ; ulimit -f 1; exec \\$0 \\$*\" ");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.err.find(file.string()), std::string::npos) << r.err;
  std::ifstream in(file);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "previous export");
  for (const auto& entry : fs::directory_iterator(c.dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

TEST(CliDbUnwritable, ClearAndImportOfAReadOnlyDbFailAndKeepEveryRow) {
  TunedCache c;
  const std::string env = cache_env(c.cache);
  const fs::path file = c.dir.path() / "export.json";
  ASSERT_EQ(galley(c.dir, env, "db export " + file.string()).exit_code, 0);
  const std::string read_only = read_only_wrapper(c.cache);
  if (read_only.empty()) GTEST_SKIP() << "cannot mount a folder read-only here (no user namespaces)";
  CliRun r = galley(c.dir, env, "db clear", read_only);
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find("deleted"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("nothing deleted"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(c.db.string()), std::string::npos) << r.err;
  r = galley(c.dir, env, "db import " + file.string(), read_only);
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find("imported"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("nothing imported"), std::string::npos) << r.err;
  r = galley(c.dir, env, "tune --force --file " + c.list.string(), read_only);
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("not saved"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("2 tuned results not saved: find-db " + c.db.string() + " cannot be written"),
            std::string::npos)
      << r.err;
  // Listing still works read-only and shows every row.
  r = galley(c.dir, env, "db list --json", read_only);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["rows"].size(), c.rows);
  EXPECT_EQ(c.db_rows(), c.rows);
}

TEST(CliDbUnwritable, ClearAndImportFailWhereTheDbCannotBeOpened) {
  TempDir dir;
  fs::create_directories(dir.path() / "cache" / "finddb.sqlite");  // a folder where the file should be
  const std::string env = cache_env(dir.path() / "cache");
  CliRun r = galley(dir, env, "db clear");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("nothing deleted"), std::string::npos) << r.err;
  const fs::path file = dir.path() / "empty.json";
  std::ofstream(file) << R"({"format": "galley-finddb", "version": 1, "rows": []})";
  r = galley(dir, env, "db import " + file.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("nothing imported"), std::string::npos) << r.err;
}

TEST(CliDbUnwritable, AbortingTriggerMeansNotSavedEverywhere) {
  TunedCache c;
  const std::string env = cache_env(c.cache);
  const fs::path file = c.dir.path() / "export.json";
  ASSERT_EQ(galley(c.dir, env, "db export " + file.string()).exit_code, 0);
  sql(c.db,
      "CREATE TRIGGER frozen_insert BEFORE INSERT ON find_rows BEGIN SELECT RAISE(ABORT, 'db frozen'); END;"
      "CREATE TRIGGER frozen_delete BEFORE DELETE ON find_rows BEGIN SELECT RAISE(ABORT, 'db frozen'); END;");
  CliRun r = galley(c.dir, env, "tune --force --file " + c.list.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("not saved"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("2 tuned results not saved"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("db frozen"), std::string::npos) << r.err;
  r = galley(c.dir, env, "tune --force --json --file " + c.list.string());
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc["not_saved"], 2);
  for (const auto& p : doc["problems"]) {
    EXPECT_EQ(p["saved"], false) << p.dump();
    EXPECT_NE(p["not_saved"].get<std::string>().find("db frozen"), std::string::npos) << p.dump();
  }
  // bench conv tunes a problem the db does not have, and says the result was not saved.
  r = galley(c.dir, env, "bench conv -n 2 -c 8 -H 12 -W 12 -k 8 -y 3 -x 3 -p 1 -q 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("not saved: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("db frozen"), std::string::npos) << r.out;
  r = galley(c.dir, env, "bench conv -n 3 -c 8 -H 12 -W 12 -k 8 -y 3 -x 3 -p 1 -q 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(json::parse(r.out)["problems"][0]["tuner"]["not_saved"].get<std::string>().find("db frozen"),
            std::string::npos)
      << r.out;
  r = galley(c.dir, env, "db clear");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("db frozen"), std::string::npos) << r.err;
  r = galley(c.dir, env, "db import " + file.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("db frozen"), std::string::npos) << r.err;
  EXPECT_EQ(c.db_rows(), c.rows);
}

TEST(CliDbUnwritable, SavedResultsAreNotCalledUnsaved) {
  TempDir dir;
  const std::string env = cache_env(dir.path() / "cache");
  const CliRun r = galley(dir, env, "bench conv -n 2 -c 8 -H 12 -W 12 -k 8 -y 3 -x 3 -p 1 -q 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json tuner = json::parse(r.out)["problems"][0]["tuner"];
  EXPECT_EQ(tuner["source"], "tuned") << r.out;
  EXPECT_TRUE(tuner["not_saved"].is_null()) << r.out;
}

TEST(CliDbLock, HeldWriteLockCostsOneBoundedWait) {
  TunedCache c;
  const std::string env = cache_env(c.cache);
  // How long tuning takes here with nothing in the way.
  const CliRun free_run = galley(c.dir, env, "tune --force --file " + c.list.string());
  ASSERT_EQ(free_run.exit_code, 0) << free_run.err;
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(c.db.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  const CliRun held = galley(c.dir, env, "tune --force --file " + c.list.string());
  const CliRun clear = galley(c.dir, env, "db clear");
  sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(holder);

  EXPECT_NE(held.exit_code, 0);
  EXPECT_NE(held.out.find("not saved"), std::string::npos) << held.out;
  EXPECT_NE(held.err.find("write lock"), std::string::npos) << held.err;
  EXPECT_EQ(count_of(held.err, "galley[warn]"), 1u) << held.err;
  // One bounded wait. FindDbWrites.HeldWriteLockCostsOneBoundedWaitThenMemory proves that later
  // stores do not wait again; the slack here allows for a loaded machine.
  EXPECT_LT(held.seconds, free_run.seconds + kLockWaitMs / 1000 + 3.0) << held.err;
  EXPECT_NE(clear.exit_code, 0);
  EXPECT_NE(clear.err.find("write lock"), std::string::npos) << clear.err;
  EXPECT_LT(clear.seconds, kLockWaitMs / 1000 + 2.0);
  EXPECT_EQ(c.db_rows(), c.rows);
}

TEST(CliDbImport, BadRowsFoldersAndFullDisksAreNamedAndImportNothing) {
  TempDir dir;
  const fs::path cache = dir.path() / "cache";
  const std::string env = cache_env(cache);
  CliRun r = galley(dir, env, "db import " + dir.path().string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("is a folder"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("underflow"), std::string::npos) << r.err;

  json row = {{"problem", testing::small_problem(0).key()},
              {"device", "Test CPU"},
              {"arch", "avx2"},
              {"compute_units", 2},
              {"driver_version", "Linux 6.1"},
              {"galley_version", "0.1.0"},
              {"rank", 0},
              {"solver", "cpu.conv.direct"},
              {"workspace_bytes", 0},
              {"tuned_at", 1700000000},
              {"ms", 1.0}};
  json rows = json::array();
  for (int i = 0; i < 3000; ++i) {
    row["device"] = "Test CPU " + std::to_string(i);
    rows.push_back(row);
  }
  json bad_rows = rows;
  bad_rows[17]["workspace_bytes"] = -1;
  bad_rows[2999]["rows"] = nullptr;  // an unknown field is fine; this row stays good
  bad_rows[2998]["compute_units"] = 1e12;
  const fs::path bad = dir.path() / "bad.json";
  std::ofstream(bad) << json{{"format", "galley-finddb"}, {"version", 1}, {"rows", bad_rows}}.dump();
  r = galley(dir, env, "db import " + bad.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("2 of 3000 rows are invalid"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("row 17: \"workspace_bytes\" -1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("row 2998: \"compute_units\""), std::string::npos) << r.err;
  EXPECT_TRUE(json::parse(galley(dir, env, "db list --json").out)["rows"].empty());

  // A disk that fills up part way (a file size limit, with SIGXFSZ ignored): all or nothing.
  const fs::path good = dir.path() / "good.json";
  std::ofstream(good) << json{{"format", "galley-finddb"}, {"version", 1}, {"rows", rows}}.dump();
  r = galley(dir, env, "db import " + good.string(), "sh -c \"trap '' XFSZ; ulimit -f 64; exec \\$0 \\$*\" ");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find("imported"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("nothing imported"), std::string::npos) << r.err;
  EXPECT_TRUE(json::parse(galley(dir, env, "db list --json").out)["rows"].empty());
  // With room, the same file imports whole.
  r = galley(dir, env, "db import " + good.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("imported 3000 rows"), std::string::npos) << r.out;
  EXPECT_EQ(json::parse(galley(dir, env, "db list --json").out)["rows"].size(), 3000u);
}

}  // namespace
}  // namespace galley::tuning
