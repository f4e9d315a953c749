// `FindDb::import_json` trusts nothing in the file: every row is checked (types, ranges, canonical
// problem keys, known solvers) before anything is written, each bad row is named by index with its
// reason, and a file with any bad row imports nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

#include "galley/core/error.hpp"
#include "galley/tuning/find_db.hpp"
#include "tuning_fixtures.hpp"

namespace galley::tuning {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

json good_row(int variant = 0, int rank = 0) {
  return {{"problem", testing::small_problem(variant).key()},
          {"device", "Test CPU"},
          {"arch", "avx2"},
          {"compute_units", 2},
          {"driver_version", "Linux 6.1"},
          {"galley_version", "0.1.0"},
          {"rank", rank},
          {"solver", testing::kFast},
          {"workspace_bytes", 4096},
          {"tuned_at", 1700000000},
          {"params", ""},
          {"ms", 1.25}};
}

json export_of(json rows) { return {{"format", "galley-finddb"}, {"version", 1}, {"rows", std::move(rows)}}; }
// A list of rows: a braced list of one json would copy that row under clang, not make an array.
json export_of(std::initializer_list<json> rows) {
  json array = json::array();
  for (const json& row : rows) array.push_back(row);
  return export_of(std::move(array));
}

fs::path write_json(const TempDir& dir, const json& doc, const std::string& name = "import.json") {
  const fs::path file = dir.path() / name;
  std::ofstream(file) << doc.dump();
  return file;
}

// The message of the Error that importing `doc` throws, or a failure when it imports.
std::string import_error(FindDb& db, const TempDir& dir, const json& doc) {
  try {
    const WriteResult r = db.import_json(write_json(dir, doc));
    ADD_FAILURE() << "imported " << r.rows << " rows of " << doc.dump().substr(0, 300);
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

// One good row at index 0 and `bad` at index 1: the error names row 1 with `reason`, nothing imported.
void expect_rejected(const json& bad, const std::string& reason) {
  TempDir dir;
  FindDb db({dir.path() / "finddb.sqlite", {}});
  const std::string message = import_error(db, dir, export_of({good_row(), bad}));
  EXPECT_NE(message.find("row 1: "), std::string::npos) << message;
  EXPECT_EQ(message.find("row 0: "), std::string::npos) << message;
  EXPECT_NE(message.find(reason), std::string::npos) << "want '" << reason << "' in: " << message;
  EXPECT_NE(message.find("nothing was imported"), std::string::npos) << message;
  EXPECT_TRUE(db.rows().empty()) << "a rejected file wrote rows";
}

json with(json row, const std::string& field, json value) {
  row[field] = std::move(value);
  return row;
}

json without(json row, const std::string& field) {
  row.erase(field);
  return row;
}

TEST(FindDbImport, GoodRowsRoundTripExactly) {
  TempDir dir;
  FindDb db({dir.path() / "finddb.sqlite", {}});
  json untimed = with(good_row(1), "ms", nullptr);
  untimed["solver"] = testing::kRef;
  // A row of a backend this build has no solvers of travels unchecked by name (it is not run here).
  json elsewhere = with(good_row(2), "solver", "nosuchbackend.conv.some_solver");
  const WriteResult r = db.import_json(write_json(
      dir, export_of({good_row(0, 0), with(good_row(0, 1), "solver", testing::kSlow), untimed, elsewhere})));
  ASSERT_TRUE(r.saved) << r.reason;
  EXPECT_EQ(r.rows, 4u);
  const DeviceIdentity id{"Test CPU", "avx2", 2, "Linux 6.1", "0.1.0"};
  const auto list = db.lookup(testing::small_problem(0).key(), id);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].solver, testing::kFast);
  EXPECT_EQ(list[0].workspace_bytes, 4096u);
  EXPECT_DOUBLE_EQ(list[0].ms, 1.25);
  EXPECT_EQ(list[1].solver, testing::kSlow);
  EXPECT_TRUE(std::isnan(db.lookup(testing::small_problem(1).key(), id)[0].ms));
  for (const FindRow& row : db.rows()) EXPECT_EQ(row.tuned_at, 1700000000);
}

TEST(FindDbImport, SizesAndCountsOutOfRangeAreRejected) {
  expect_rejected(with(good_row(), "workspace_bytes", -1), "\"workspace_bytes\" -1 is out of range");
  expect_rejected(with(good_row(), "workspace_bytes", std::uint64_t{1} << 63),
                  "\"workspace_bytes\" 9223372036854775808");
  expect_rejected(with(good_row(), "workspace_bytes", 1.5), "not an integer");
  expect_rejected(with(good_row(), "workspace_bytes", "4096"), "not an integer");
  expect_rejected(with(good_row(), "compute_units", 1e12),
                  "\"compute_units\" is 1000000000000.0, not an integer");
  expect_rejected(with(good_row(), "compute_units", std::int64_t{1000000000000}),
                  "\"compute_units\" 1000000000000 is out of range");
  expect_rejected(with(good_row(), "compute_units", 0),
                  "\"compute_units\" 0 is out of range (valid: 1 to 2147483647)");
  expect_rejected(with(good_row(), "rank", -1), "\"rank\" -1 is out of range");
}

TEST(FindDbImport, TimesMustBeTimes) {
  expect_rejected(with(good_row(), "ms", -0.5), "\"ms\" -0.5 is not a time");
  expect_rejected(with(good_row(), "ms", "NaN"), "not a number or null");
  expect_rejected(without(good_row(), "ms"), "has no \"ms\"");
  expect_rejected(with(good_row(), "tuned_at", -5), "\"tuned_at\" -5 is out of range");
  const auto next_year = static_cast<std::int64_t>(std::time(nullptr)) + 366 * 24 * 3600;
  expect_rejected(with(good_row(), "tuned_at", next_year), "\"tuned_at\"");
}

TEST(FindDbImport, MalformedOrForeignKeysAreRejected) {
  expect_rejected(with(good_row(), "problem", "k1"), "names no known op kind");
  expect_rejected(with(good_row(), "problem", "conv-F-f32-nchw-n1"), "malformed conv key");
  expect_rejected(with(good_row(), "problem", "conv-F-f32-nchw-n0-c8-h8-w8-k8-y3-x3-p1-q1-u1-v1-l1-j1-g1"),
                  "problem key");
  expect_rejected(with(good_row(), "problem", std::string(100000, 'c')), "100000 characters long");
  expect_rejected(with(good_row(), "problem", 7), "\"problem\" is 7, not a string");
  // Not as this build writes keys (no lookup would ever match it).
  std::string key = testing::small_problem(0).key();
  key.replace(key.find("-n1-"), 4, "-n01-");
  expect_rejected(with(good_row(), "problem", key), "'n01' is not 'n<integer>'");
  key = testing::small_problem(0).key();
  key.replace(key.find("nchw"), 4, "NCHW");
  expect_rejected(with(good_row(), "problem", key), "problem key");
}

TEST(FindDbImport, UnknownSolversAreRejected) {
  expect_rejected(with(good_row(), "solver", "cpu.conv.nosuch"), "unknown solver \"cpu.conv.nosuch\"");
  expect_rejected(with(good_row(), "solver", "a"), "unknown solver \"a\"");
  expect_rejected(with(good_row(), "solver", "nosuchbackend.conv.Bad Name"), "<backend>.<op>.<name>");
  expect_rejected(with(good_row(), "solver", ""), "unknown solver");
}

TEST(FindDbImport, MissingFieldsWrongTypesAndDuplicatesAreRejected) {
  expect_rejected(without(good_row(), "device"), "has no \"device\"");
  expect_rejected(with(good_row(), "arch", nullptr), "\"arch\" is null, not a string");
  expect_rejected(with(good_row(), "params", 3), "\"params\" is 3, not a string");
  expect_rejected(json(5), "is 5, not an object");
  expect_rejected(json::array(), "not an object");
  expect_rejected(good_row(), "repeats rank 0 of row 0");
}

TEST(FindDbImport, EveryBadRowIsNamedAndNothingIsWritten) {
  TempDir dir;
  FindDb db({dir.path() / "finddb.sqlite", {}});
  ASSERT_TRUE(
      db.store("kept", DeviceIdentity{"x", "y", 1, "d", "g"}, {FindRecord{testing::kFast, 1.0, 0, 0}}).saved);
  json rows = json::array();
  for (int i = 0; i < 40; ++i)
    rows.push_back(i % 3 == 1 ? with(good_row(i), "workspace_bytes", -1) : good_row(i));
  const std::string message = import_error(db, dir, export_of(rows));
  EXPECT_NE(message.find("13 of 40 rows are invalid"), std::string::npos) << message;
  EXPECT_NE(message.find("row 1: "), std::string::npos) << message;
  EXPECT_NE(message.find("row 4: "), std::string::npos) << message;
  EXPECT_NE(message.find("and 3 more"), std::string::npos) << message;
  EXPECT_NE(message.find("import.json"), std::string::npos) << message;
  ASSERT_EQ(db.rows().size(), 1u);
  EXPECT_EQ(db.rows()[0].problem, "kept");
}

TEST(FindDbImport, TheFileMustBeAnExportWithARowsArray) {
  TempDir dir;
  FindDb db({dir.path() / "finddb.sqlite", {}});
  EXPECT_NE(import_error(db, dir, export_of(nullptr)).find("\"rows\" is null, not an array"),
            std::string::npos);
  EXPECT_NE(import_error(db, dir, export_of(json::object())).find("not an array"), std::string::npos);
  EXPECT_NE(import_error(db, dir, without(export_of(json::array()), "rows")).find("has no \"rows\""),
            std::string::npos);
  EXPECT_NE(import_error(db, dir, with(export_of(json::array()), "version", 2)).find("version 2"),
            std::string::npos);
  EXPECT_NE(
      import_error(db, dir, with(export_of(json::array()), "format", 1)).find("not a galley find-db export"),
      std::string::npos);
  EXPECT_NE(import_error(db, dir, json::array()).find("not a galley find-db export"), std::string::npos);
  // An empty export is fine: nothing to add.
  const WriteResult empty = db.import_json(write_json(dir, export_of(json::array())));
  EXPECT_TRUE(empty.saved) << empty.reason;
  EXPECT_EQ(empty.rows, 0u);
}

TEST(FindDbImport, AFolderIsNamedAsOne) {
  TempDir dir;
  FindDb db({dir.path() / "finddb.sqlite", {}});
  try {
    db.import_json(dir.path());
    FAIL() << "imported a folder";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("is a folder"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir.path().string()), std::string::npos) << e.what();
  }
}

TEST(FindDbImport, UnwritableDbImportsNothingAndSaysWhy) {
  TempDir dir;
  fs::create_directories(dir.path() / "finddb.sqlite");  // a folder where the file should be
  ::testing::internal::CaptureStderr();
  FindDb db({dir.path() / "finddb.sqlite", {}});
  const WriteResult r = db.import_json(write_json(dir, export_of({good_row()})));
  (void)::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(r.saved);
  EXPECT_EQ(r.rows, 0u);
  EXPECT_NE(r.reason.find("cannot be written"), std::string::npos) << r.reason;
  EXPECT_TRUE(db.rows().empty());  // not imported into memory in the file's place either
}

}  // namespace
}  // namespace galley::tuning
