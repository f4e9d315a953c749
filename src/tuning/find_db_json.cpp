// `galley db export/import`: the find-db as a JSON file, so a tuned db moves to another machine
// with the same device (rows of other devices or versions travel too and stay unmatched there).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>
#include <tuple>

#include "galley/core/error.hpp"
#include "galley/tuning/find_db.hpp"
#include "tuning/find_row_json.hpp"

namespace galley::tuning {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "galley-finddb";
constexpr int kFormatVersion = 1;
// Bad rows named in one message; the rest are counted.
constexpr std::size_t kBadRowsShown = 10;

// Only called on regular files: reading a pipe or a terminal would block.
bool is_sqlite_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  char header[16] = {};
  in.read(header, sizeof header);
  return in.gcount() == sizeof header && std::memcmp(header, "SQLite format 3", sizeof header) == 0;
}

// The same file, whether or not the names differ (links, relative paths, "./").
bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec) && !ec;
  const fs::path ca = fs::weakly_canonical(a, ec);
  const fs::path cb = fs::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

// Where an export goes: a regular file is written beside `path` and renamed over it (a failed
// write, a full disk, leaves no half file and an existing file as it was); a pipe or a terminal
// (`db export /dev/stdout`) is written in place, as it replaces nothing.
struct ExportTarget {
  fs::path path;
  bool in_place = false;
};

// Export must never destroy what it exports (nor any other database), and replaces a file only
// when asked to.
ExportTarget export_target(const fs::path& file, bool overwrite, const fs::path& user_db,
                           const fs::path& system_db) {
  if (file.empty()) throw Error(Status::invalid_argument, "db export needs a file name");
  for (const fs::path& db : {user_db, system_db}) {
    if (db.empty()) continue;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      if (same_file(file, db.string() + suffix)) {
        throw Error(Status::invalid_argument,
                    "refusing to export onto " + file.string() + ": it is the live find-db" +
                        (*suffix != '\0' ? std::string(" (its ") + suffix + " file)" : "") +
                        "; choose another file");
      }
    }
  }
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  if (!fs::exists(status)) return {file, false};
  if (fs::is_directory(status)) {
    throw Error(Status::invalid_argument, "cannot export to " + file.string() + ": it is a folder; name a file");
  }
  if (fs::is_fifo(status) || fs::is_character_file(status)) return {file, true};
  if (!fs::is_regular_file(status)) {
    throw Error(Status::invalid_argument, "refusing to export onto " + file.string() +
                                              ": it is not a regular file, a pipe or a terminal");
  }
  if (is_sqlite_file(file)) {
    throw Error(Status::invalid_argument,
                "refusing to export onto " + file.string() +
                    ": it is a SQLite database, and an export is JSON; choose another file");
  }
  if (!overwrite) {
    throw Error(Status::invalid_argument,
                "refusing to export onto " + file.string() + ": it exists (--force replaces it)");
  }
  // Through a symbolic link, the file it names is replaced and the link kept.
  const fs::path resolved = fs::canonical(file, ec);
  return {ec ? file : resolved, false};
}

std::string read_export(const fs::path& file) {
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  if (!fs::exists(status))
    throw Error(Status::not_found, "cannot read find-db export " + file.string() + ": no such file");
  if (fs::is_directory(status)) {
    throw Error(Status::invalid_argument,
                file.string() + " is a folder, not a find-db export (name the .json file)");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw Error(Status::io_error,
                "cannot read find-db export " + file.string() + ": " + std::strerror(errno));
  }
  try {
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (in.bad()) throw Error(Status::io_error, "reading " + file.string() + " failed");
    return text;
  } catch (const std::ios_base::failure& e) {  // libstdc++ throws from a failed read() even without a mask
    throw Error(Status::io_error, "reading " + file.string() + " failed: " + e.what());
  }
}

// The rows of an export, every one checked; throws naming each bad row (nothing is written then).
std::vector<FindRow> checked_rows(const fs::path& file, const std::string& text) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(Status::corrupt_data, file.string() + ": malformed find-db export: " + e.what());
  }
  const auto fail = [&](Status status, const std::string& why) {
    throw Error(status, file.string() + ": " + why);
  };
  if (!doc.is_object()) fail(Status::corrupt_data, "not a galley find-db export (not a JSON object)");
  if (const auto it = doc.find("format"); it == doc.end() || *it != kFormat) {
    fail(Status::corrupt_data, "not a galley find-db export (\"format\" is not \"galley-finddb\")");
  }
  if (const auto it = doc.find("version"); it == doc.end() || *it != kFormatVersion) {
    fail(Status::unsupported, "export format version " +
                                  (it == doc.end() ? std::string("(none)") : it->dump()) +
                                  " (this Galley reads 1)");
  }
  const auto rows_it = doc.find("rows");
  if (rows_it == doc.end()) fail(Status::corrupt_data, "has no \"rows\" (want an array of rows)");
  if (!rows_it->is_array()) {
    fail(Status::corrupt_data, std::string("\"rows\" is ") + rows_it->type_name() + ", not an array of rows");
  }

  const FindRowReader reader;
  std::vector<FindRow> rows;
  std::vector<std::string> bad;
  std::size_t bad_count = 0;
  // The same rank of one list twice is ambiguous: which one was tuned?
  using RankKey = std::tuple<std::string, std::string, std::string, int, std::string, std::string, int>;
  std::map<RankKey, std::size_t> first_index;
  for (std::size_t i = 0; i < rows_it->size(); ++i) {
    try {
      FindRow row = reader.read((*rows_it)[i]);
      const RankKey key{row.problem,
                        row.device.name,
                        row.device.arch,
                        row.device.compute_units,
                        row.device.driver_version,
                        row.device.galley_version,
                        row.record.rank};
      if (const auto [it, fresh] = first_index.emplace(key, i); !fresh) {
        throw Error(Status::corrupt_data, "repeats rank " + std::to_string(row.record.rank) + " of row " +
                                              std::to_string(it->second) +
                                              " (same problem, device and versions)");
      }
      rows.push_back(std::move(row));
    } catch (const Error& e) {
      if (++bad_count <= kBadRowsShown) bad.push_back("row " + std::to_string(i) + ": " + e.what());
    }
  }
  if (bad_count > 0) {
    std::string message = file.string() + ": " + std::to_string(bad_count) + " of " +
                          std::to_string(rows_it->size()) + " rows are invalid, nothing was imported";
    for (const std::string& b : bad) message += "\n  " + b;
    if (bad_count > bad.size()) message += "\n  ... and " + std::to_string(bad_count - bad.size()) + " more";
    throw Error(Status::corrupt_data, message);
  }
  return rows;
}

}  // namespace

std::size_t FindDb::export_json(const std::filesystem::path& file, bool overwrite) {
  const ExportTarget target = export_target(file, overwrite, user_path(), system_path());
  nlohmann::json rows = nlohmann::json::array();
  for (const FindRow& row : this->rows()) rows.push_back(find_row_to_json(row));
  const std::size_t count = rows.size();
  const nlohmann::json doc = {{"format", kFormat}, {"version", kFormatVersion}, {"rows", std::move(rows)}};
  const fs::path written =
      target.in_place ? target.path : fs::path(target.path.string() + ".tmp-" + std::to_string(::getpid()));
  std::error_code ec;
  {
    std::ofstream out(written, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(Status::io_error, "cannot write " + file.string() + ": " + std::strerror(errno));
    out << doc.dump(1) << '\n';
    out.close();
    if (!out) {
      if (!target.in_place) fs::remove(written, ec);
      throw Error(Status::io_error, "writing " + file.string() + " failed (disk full?)");
    }
  }
  if (target.in_place) return count;
  fs::rename(written, target.path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(written, ignored);
    throw Error(Status::io_error, "cannot write " + file.string() + ": " + ec.message());
  }
  return count;
}

WriteResult FindDb::import_json(const std::filesystem::path& file) {
  const std::vector<FindRow> rows = checked_rows(file, read_export(file));
  return store_rows(rows);
}

}  // namespace galley::tuning
