// The find-db: opening with fallbacks, lookups through the layers, stores in one transaction, and
// the recovery paths (corrupt file moved aside, unwritable file replaced by an in-memory db).
#include "galley/tuning/find_db.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include "galley/core/error.hpp"
#include "galley/core/log.hpp"
#include "galley/core/version.hpp"
#include "sqlite.hpp"

namespace galley::tuning {
namespace {

namespace fs = std::filesystem;
using sqlite::Connection;
using sqlite::Failure;
using sqlite::SqliteError;

// Bump when the table changes; a file with a newer schema is left alone (read by nobody here).
// 2: `params`, a solver's inner choice (a TunableSolver's config as text), added to version 1.
constexpr int kSchemaVersion = 2;

constexpr const char* kCreateTable = R"(
CREATE TABLE IF NOT EXISTS find_rows (
  problem  TEXT    NOT NULL,
  device   TEXT    NOT NULL,
  arch     TEXT    NOT NULL,
  units    INTEGER NOT NULL,
  driver   TEXT    NOT NULL,
  galley   TEXT    NOT NULL,
  rank     INTEGER NOT NULL,
  solver   TEXT    NOT NULL,
  ms       REAL,
  workspace INTEGER NOT NULL,
  tuned_at INTEGER NOT NULL,
  params   TEXT    NOT NULL DEFAULT '',
  PRIMARY KEY (problem, device, arch, units, driver, galley, rank)
) WITHOUT ROWID)";

constexpr const char* kSelectRecords =
    "SELECT solver, ms, workspace, rank, params FROM find_rows WHERE problem=?1 AND device=?2 AND arch=?3 AND units=?4 "
    "AND driver=?5 AND galley=?6 ORDER BY rank";

constexpr const char* kSelectAll =
    "SELECT problem, device, arch, units, driver, galley, rank, solver, ms, workspace, tuned_at, params FROM find_rows "
    "ORDER BY problem, device, arch, units, driver, galley, rank";

void bind_identity(sqlite::Statement& s, std::string_view problem, const DeviceIdentity& d) {
  s.bind(1, problem).bind(2, d.name).bind(3, d.arch).bind(4, std::int64_t{d.compute_units});
  s.bind(5, d.driver_version).bind(6, d.galley_version);
}

std::vector<FindRecord> select_records(Connection& c, std::string_view problem, const DeviceIdentity& d) {
  auto s = c.prepare(kSelectRecords);
  bind_identity(s, problem, d);
  std::vector<FindRecord> out;
  while (s.step()) {
    out.push_back(FindRecord{s.column_text(0), s.column_double(1), static_cast<std::size_t>(s.column_int(2)),
                             static_cast<int>(s.column_int(3)), s.column_text(4)});
  }
  return out;
}

// Every row of one identity, at most `cap` + 1 (the caller gives up on snapshots beyond `cap`).
std::vector<std::pair<std::string, FindRecord>> select_identity(Connection& c, const DeviceIdentity& d,
                                                                std::size_t cap) {
  auto s = c.prepare(
      "SELECT problem, solver, ms, workspace, rank, params FROM find_rows WHERE device=?1 AND arch=?2 AND units=?3 AND "
      "driver=?4 AND galley=?5 ORDER BY problem, rank LIMIT ?6");
  s.bind(1, d.name).bind(2, d.arch).bind(3, std::int64_t{d.compute_units}).bind(4, d.driver_version);
  s.bind(5, d.galley_version).bind(6, static_cast<std::int64_t>(cap + 1));
  std::vector<std::pair<std::string, FindRecord>> out;
  while (s.step()) {
    out.emplace_back(s.column_text(0), FindRecord{s.column_text(1), s.column_double(2),
                                                  static_cast<std::size_t>(s.column_int(3)),
                                                  static_cast<int>(s.column_int(4)), s.column_text(5)});
  }
  return out;
}

std::string identity_text(const DeviceIdentity& d) {
  return d.name + '\x1f' + d.arch + '\x1f' + std::to_string(d.compute_units) + '\x1f' + d.driver_version + '\x1f' +
         d.galley_version;
}

std::vector<FindRow> select_all(Connection& c) {
  auto s = c.prepare(kSelectAll);
  std::vector<FindRow> out;
  while (s.step()) {
    FindRow row;
    row.problem = s.column_text(0);
    row.device = DeviceIdentity{s.column_text(1), s.column_text(2), static_cast<int>(s.column_int(3)),
                                s.column_text(4), s.column_text(5)};
    row.record = FindRecord{s.column_text(7), s.column_double(8), static_cast<std::size_t>(s.column_int(9)),
                            static_cast<int>(s.column_int(6)), s.column_text(11)};
    row.tuned_at = s.column_int(10);
    out.push_back(std::move(row));
  }
  return out;
}

// One statement of the writer waits this long inside SQLite; with_busy_retry then checks how long
// the whole write has waited against kLockWaitMs, so that bound holds to within this much.
constexpr int kWriterBusyTimeoutMs = 250;

// Files whose write lock another process held past kLockWaitMs. Every FindDb of this process then
// opens them in memory at once: a held lock costs one wait per process, not one per write.
std::mutex g_held_mutex;
std::set<std::string> g_held_files;

std::string held_key(const fs::path& path) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(path, ec);
  return ec ? path.string() : canonical.string();
}

void mark_held(const fs::path& path) {
  std::lock_guard lock(g_held_mutex);
  g_held_files.insert(held_key(path));
}

bool is_held(const fs::path& path) {
  std::lock_guard lock(g_held_mutex);
  return g_held_files.count(held_key(path)) != 0;
}

std::string held_reason() {
  return "another process held its write lock for more than " +
         std::to_string(static_cast<int>(kLockWaitMs / 1000)) + " s";
}

// Creates the table on a writable connection. WAL lets readers proceed while one process writes.
void setup_schema(Connection& c) {
  sqlite::with_busy_retry([&] { (void)c.query_text("PRAGMA journal_mode=WAL"); }, kLockWaitMs);
  c.exec("PRAGMA synchronous=NORMAL");
  int version = 0;
  sqlite::with_busy_retry([&] { version = std::stoi(c.query_text("PRAGMA user_version").value_or("0")); },
                          kLockWaitMs);
  if (version > kSchemaVersion) {
    throw Error(Status::unsupported, "its schema version " + std::to_string(version) +
                                         " is newer than this Galley's (" + std::to_string(kSchemaVersion) + ")");
  }
  if (version < kSchemaVersion) {
    sqlite::with_busy_retry(
        [&] {
          sqlite::Transaction t(c);
          // Version 1 files keep their rows; they gain an empty `params` (their solvers search again).
          if (version == 1) c.exec("ALTER TABLE find_rows ADD COLUMN params TEXT NOT NULL DEFAULT ''");
          c.exec(kCreateTable);
          c.exec("PRAGMA user_version=" + std::to_string(kSchemaVersion));
          t.commit();
        },
        kLockWaitMs);
  }
}

// file: URIs need '?', '#' and '%' escaped.
std::string file_uri(const fs::path& path, std::string_view query) {
  std::string uri = "file:";
  for (char ch : path.string()) {
    if (ch == '?' || ch == '#' || ch == '%') {
      char buffer[4];
      std::snprintf(buffer, sizeof buffer, "%%%02X", static_cast<unsigned char>(ch));
      uri += buffer;
    } else {
      uri += ch;
    }
  }
  return uri + "?" + std::string(query);
}

// A read-only layer (system db, or a user db this process cannot write). mode=ro first; a WAL file in
// an unwritable folder cannot be opened that way (no -shm can be made), so then immutable=1, which
// reads the file as it is without locking.
std::optional<Connection> open_read_layer(const fs::path& path) {
  std::error_code ec;
  if (path.empty() || !fs::is_regular_file(path, ec)) return std::nullopt;
  for (const char* query : {"mode=ro", "immutable=1"}) {
    try {
      Connection c(file_uri(path, query), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX);
      (void)c.query_text("SELECT count(*) FROM find_rows");  // proves it is readable and ours
      return c;
    } catch (const SqliteError&) {
      continue;
    }
  }
  return std::nullopt;
}

std::string timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y%m%d-%H%M%S", &tm);
  return buffer;
}

struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool valid = false;
};

FileId file_id(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return FileId{st.st_dev, st.st_ino, true};
}

}  // namespace

DeviceIdentity DeviceIdentity::of(const runtime::Device& device) {
  const auto p = device.properties();
  return DeviceIdentity{p.name, p.arch, p.compute_units, p.driver_version, version_string()};
}

std::string DeviceIdentity::to_string() const {
  return name + " " + arch + " x" + std::to_string(compute_units) + ", driver " + driver_version + ", galley " +
         galley_version;
}

struct FindDb::State {
  std::mutex mutex;
  FindDbPaths paths;
  Connection writer;               // the user file, or :memory: after a fallback
  bool writer_is_file = false;
  FileId writer_file;              // which file the writer opened (recovery must not move another's)
  std::optional<Connection> user_read_only;  // the unwritable user file, still consulted
  std::optional<Connection> system;
  bool corrupt_recovered = false;  // one move-aside per process; a second corruption falls back
  std::string memory_reason;  // why the writer is in memory: what a write that did not reach the file says
  UnsavedStores unsaved;

  // A process's first call on each problem should cost a map lookup, not a SQL query: the first
  // lookup for a device identity reads all of its rows (all layers, user over system) at once.
  // Rows stored later by other processes are found by the direct queries a snapshot miss makes.
  struct Snapshot {
    bool usable = false;  // false when the identity has too many rows to hold
    std::unordered_map<std::string, std::pair<std::vector<FindRecord>, bool>> lists;  // key -> (list, from system)
  };
  std::unordered_map<std::string, Snapshot> snapshots;  // by identity_text
  static constexpr std::size_t kSnapshotCap = 20000;    // rows per identity and layer

  void open_writer() {
    writer_is_file = false;
    if (paths.user.empty()) {
      memory_reason = "no find-db file is configured (in-memory find-db)";
      return open_memory();
    }
    if (is_held(paths.user)) return fall_back_to_memory(held_reason());
    const fs::path dir = paths.user.has_parent_path() ? paths.user.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::exists(dir, ec)) {
      fs::create_directories(dir, ec);
      // Tuning results reveal what a user runs; the folder is private, as XDG asks of cache dirs.
      if (!ec) fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
      if (ec) return fall_back_to_memory("cannot create folder " + dir.string() + ": " + ec.message());
    }
    try {
      Connection c(paths.user.string(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX);
      writer_file = file_id(paths.user);  // before any statement: recovery must know which file this is
      if (c.read_only()) throw SqliteError(SQLITE_READONLY, "the file is write-protected");
      c.set_busy_timeout(kWriterBusyTimeoutMs);
      setup_schema(c);
      writer = std::move(c);
      writer_is_file = true;
    } catch (const SqliteError& e) {
      if (e.failure() == Failure::corrupt) return recover_corrupt(e.what());
      if (e.failure() == Failure::busy) {
        mark_held(paths.user);
        return fall_back_to_memory(held_reason() + ": " + e.what());
      }
      fall_back_to_memory(e.what());
    } catch (const Error& e) {  // a newer schema
      fall_back_to_memory(e.what());
    }
  }

  void open_memory() {
    writer = Connection(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX);
    setup_schema(writer);
    writer_is_file = false;
  }

  void fall_back_to_memory(const std::string& why) {
    snapshots.clear();
    memory_reason = "find-db " + paths.user.string() + " cannot be written (" + why + ")";
    log::warn_once("finddb-unwritable:" + paths.user.string(),
                   memory_reason + "; this process keeps its tuning results in memory only (not saved)");
    writer.close();
    user_read_only = open_read_layer(paths.user);
    open_memory();
  }

  void recover_corrupt(const std::string& why) {
    snapshots.clear();
    writer.close();
    if (corrupt_recovered) return fall_back_to_memory("still corrupt after a fresh start: " + why);
    corrupt_recovered = true;
    const FileId now = file_id(paths.user);
    // Another process may have moved the file aside and started a fresh one already: then that new
    // file is not ours to move, we just open it.
    const bool same_file = !writer_file.valid || (now.valid && now.dev == writer_file.dev && now.ino == writer_file.ino);
    if (now.valid && same_file) {
      const std::string aside = paths.user.string() + ".corrupt-" + timestamp();
      std::error_code ec;
      fs::rename(paths.user, aside, ec);
      if (ec) return fall_back_to_memory("corrupt (" + why + ") and cannot be moved aside: " + ec.message());
      for (const char* suffix : {"-wal", "-shm"}) {
        const fs::path side = paths.user.string() + suffix;
        if (fs::exists(side, ec)) fs::rename(side, aside + suffix, ec);
      }
      log::warn_once("finddb-corrupt:" + paths.user.string(),
                     "find-db " + paths.user.string() + " is corrupt (" + why + "); moved aside as " + aside +
                         ", starting a fresh one");
    }
    open_writer();
  }

  // What on_writer did with a body.
  struct Ran {
    bool ran = false;      // the body completed, on the file or in memory
    bool on_file = false;  // it completed on the user db file (committed there, for a write)
    std::string reason;    // why not on the file
  };
  // Where a body goes once the file has failed. A lookup reruns in memory. A store does too, and
  // also when the file refuses it for another reason (a foreign table, a trigger that aborts): the
  // file cannot take this process's results, so it keeps them in memory, as for a read-only file.
  // Clear and import must not pretend the in-memory db is the file: they stop.
  enum class Fallback { rerun_in_memory, store_in_memory, file_only };

  // Runs `body` on the writer. Busy past kLockWaitMs: the file counts as held for the rest of the
  // process, as unwritable. Corrupt: moved aside and the body rerun on the fresh db. Unwritable:
  // in memory from now on, and the body rerun there unless `fallback` is file_only. Anything else
  // is reported once and the body given up (or, for a store, rerun in memory), or thrown as
  // Error(io_error) with `throw_other`.
  Ran on_writer(const std::function<void(Connection&)>& body, bool throw_other,
                Fallback fallback = Fallback::rerun_in_memory) {
    std::string last_error;
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (!writer_is_file && fallback == Fallback::file_only) return {false, false, memory_reason};
      const bool on_file = writer_is_file;
      try {
        sqlite::with_busy_retry([&] { body(writer); }, kLockWaitMs);
        return {true, on_file, on_file ? std::string() : memory_reason};
      } catch (const SqliteError& e) {
        last_error = e.what();
        if (!writer_is_file && e.failure() != Failure::other) {
          throw Error(Status::internal, std::string("in-memory find-db: ") + e.what());
        }
        switch (e.failure()) {
          case Failure::busy:
            mark_held(paths.user);
            fall_back_to_memory(held_reason() + ": " + e.what());
            break;
          case Failure::corrupt:
            recover_corrupt(e.what());
            break;
          case Failure::unwritable:
            fall_back_to_memory(e.what());
            break;
          case Failure::other: {
            const std::string reason = "find-db " + paths.user.string() + ": " + e.what();
            if (throw_other) throw Error(Status::io_error, reason);
            if (fallback == Fallback::store_in_memory && writer_is_file) {
              fall_back_to_memory(e.what());
              break;
            }
            log::warn_once("finddb-other:" + paths.user.string(),
                           reason + "; ignoring the find-db (results are not saved)");
            return {false, false, reason};
          }
        }
      }
    }
    return {false, false, "find-db " + paths.user.string() + " kept failing: " + last_error};
  }

  Snapshot load_snapshot(const DeviceIdentity& device) {
    Snapshot snap;
    snap.usable = true;
    auto add = [&](const std::vector<std::pair<std::string, FindRecord>>& rows, bool system_layer) {
      if (rows.size() > kSnapshotCap) snap.usable = false;
      if (!snap.usable) return;
      std::unordered_map<std::string, std::vector<FindRecord>> lists;
      for (const auto& [problem, record] : rows) lists[problem].push_back(record);
      for (auto& [problem, list] : lists) snap.lists[problem] = {std::move(list), system_layer};  // later layers win
    };
    auto read_only_rows = [&](std::optional<Connection>& layer, const fs::path& path) {
      if (!layer) return std::vector<std::pair<std::string, FindRecord>>{};
      try {
        std::vector<std::pair<std::string, FindRecord>> rows;
        sqlite::with_busy_retry([&] { rows = select_identity(*layer, device, kSnapshotCap); }, 5000);
        return rows;
      } catch (const SqliteError& e) {
        log::warn_once("finddb-read:" + path.string(),
                       "find-db " + path.string() + " cannot be read (" + e.what() + "); ignoring it");
        layer.reset();
        return std::vector<std::pair<std::string, FindRecord>>{};
      }
    };
    add(read_only_rows(system, paths.system), true);
    add(read_only_rows(user_read_only, paths.user), false);
    std::vector<std::pair<std::string, FindRecord>> rows;
    if (!on_writer([&](Connection& c) { rows = select_identity(c, device, kSnapshotCap); }, false).ran) {
      snap.usable = false;
    }
    add(rows, false);
    if (!snap.usable) snap.lists.clear();
    return snap;
  }

  // A read-only layer that fails is dropped with one warning; it can only cost a re-tune.
  std::vector<FindRecord> read_layer(std::optional<Connection>& layer, const fs::path& path, std::string_view problem,
                                     const DeviceIdentity& device) {
    if (!layer) return {};
    try {
      std::vector<FindRecord> out;
      sqlite::with_busy_retry([&] { out = select_records(*layer, problem, device); }, 5000);
      return out;
    } catch (const SqliteError& e) {
      log::warn_once("finddb-read:" + path.string(),
                     "find-db " + path.string() + " cannot be read (" + e.what() + "); ignoring it");
      layer.reset();
      return {};
    }
  }
};

FindDb::FindDb(FindDbPaths paths) : state_(std::make_unique<State>()) {
  state_->paths = std::move(paths);
  state_->open_writer();
  if (!state_->paths.system.empty() && state_->paths.system != state_->paths.user) {
    state_->system = open_read_layer(state_->paths.system);
    std::error_code ec;
    if (!state_->system && fs::exists(state_->paths.system, ec)) {
      log::warn_once("finddb-read:" + state_->paths.system.string(),
                     "system find-db " + state_->paths.system.string() + " cannot be read; ignoring it");
    }
  }
}

FindDb::~FindDb() = default;

std::vector<FindRecord> FindDb::lookup(std::string_view problem, const DeviceIdentity& device,
                                       bool* from_system_db) {
  std::lock_guard lock(state_->mutex);
  if (from_system_db != nullptr) *from_system_db = false;
  const std::string id = identity_text(device);
  if (state_->snapshots.find(id) == state_->snapshots.end()) {
    State::Snapshot snap = state_->load_snapshot(device);  // may reset `snapshots` while recovering
    state_->snapshots[id] = std::move(snap);
  }
  if (auto it = state_->snapshots.find(id); it != state_->snapshots.end() && it->second.usable) {
    if (auto hit = it->second.lists.find(std::string(problem)); hit != it->second.lists.end()) {
      if (from_system_db != nullptr) *from_system_db = hit->second.second;
      return hit->second.first;
    }
  }
  std::vector<FindRecord> out;
  bool system_layer = false;
  state_->on_writer([&](Connection& c) { out = select_records(c, problem, device); }, false);
  if (out.empty()) out = state_->read_layer(state_->user_read_only, state_->paths.user, problem, device);
  if (out.empty()) {
    out = state_->read_layer(state_->system, state_->paths.system, problem, device);
    system_layer = !out.empty();
  }
  if (from_system_db != nullptr) *from_system_db = system_layer;
  if (auto it = state_->snapshots.find(id); it != state_->snapshots.end() && it->second.usable && !out.empty()) {
    it->second.lists[std::string(problem)] = {out, system_layer};
  }
  return out;
}

WriteResult FindDb::store(std::string_view problem, const DeviceIdentity& device,
                          const std::vector<FindRecord>& ranked) {
  std::lock_guard lock(state_->mutex);
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  const State::Ran ran = state_->on_writer(
      [&](Connection& c) {
        sqlite::Transaction t(c);
        auto del = c.prepare(
            "DELETE FROM find_rows WHERE problem=?1 AND device=?2 AND arch=?3 AND units=?4 AND driver=?5 AND galley=?6");
        bind_identity(del, problem, device);
        del.step();
        auto ins = c.prepare(
            "INSERT INTO find_rows (problem, device, arch, units, driver, galley, rank, solver, ms, workspace, "
            "tuned_at, params) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
        for (std::size_t rank = 0; rank < ranked.size(); ++rank) {
          ins.reset();
          bind_identity(ins, problem, device);
          ins.bind(7, static_cast<std::int64_t>(rank)).bind(8, ranked[rank].solver).bind(9, ranked[rank].ms);
          ins.bind(10, static_cast<std::int64_t>(ranked[rank].workspace_bytes)).bind(11, now);
          ins.bind(12, ranked[rank].params);
          ins.step();
        }
        t.commit();
      },
      false, State::Fallback::store_in_memory);
  // This process's view follows its own writes even when the file could not take them.
  if (auto it = state_->snapshots.find(identity_text(device)); it != state_->snapshots.end() && it->second.usable) {
    std::vector<FindRecord> list = ranked;
    for (std::size_t rank = 0; rank < list.size(); ++rank) list[rank].rank = static_cast<int>(rank);
    it->second.lists[std::string(problem)] = {std::move(list), false};
  }
  if (!ran.on_file) {
    ++state_->unsaved.count;
    state_->unsaved.last_reason = ran.reason;
    return WriteResult{false, ran.reason, 0};
  }
  return WriteResult{true, {}, ranked.size()};
}

WriteResult FindDb::store_rows(const std::vector<FindRow>& rows) {
  // Lists are replaced whole, as store() does, so each (problem, identity) is grouped in rank order.
  using ListKey = std::pair<std::string, std::string>;  // problem, identity_text
  std::map<ListKey, std::map<int, const FindRow*>> lists;
  for (const FindRow& row : rows) lists[{row.problem, identity_text(row.device)}][row.record.rank] = &row;
  std::lock_guard lock(state_->mutex);
  const State::Ran ran = state_->on_writer(
      [&](Connection& c) {
        sqlite::Transaction t(c);
        auto del = c.prepare(
            "DELETE FROM find_rows WHERE problem=?1 AND device=?2 AND arch=?3 AND units=?4 AND driver=?5 AND "
            "galley=?6");
        auto ins = c.prepare(
            "INSERT INTO find_rows (problem, device, arch, units, driver, galley, rank, solver, ms, "
            "workspace, tuned_at, params) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
        for (const auto& [key, by_rank] : lists) {
          const FindRow& first = *by_rank.begin()->second;
          del.reset();
          bind_identity(del, first.problem, first.device);
          del.step();
          std::int64_t rank = 0;
          for (const auto& [stored_rank, row] : by_rank) {
            ins.reset();
            bind_identity(ins, row->problem, row->device);
            ins.bind(7, rank++).bind(8, row->record.solver).bind(9, row->record.ms);
            ins.bind(10, static_cast<std::int64_t>(row->record.workspace_bytes)).bind(11, row->tuned_at);
            ins.bind(12, row->record.params);
            ins.step();
          }
        }
        t.commit();
      },
      false, State::Fallback::file_only);
  state_->snapshots.clear();  // many lists changed: the next lookup reads them again
  if (!ran.on_file) return WriteResult{false, ran.reason, 0};
  return WriteResult{true, {}, rows.size()};
}

std::vector<std::string> FindDb::problems(const DeviceIdentity& device) {
  std::lock_guard lock(state_->mutex);
  const std::string id = identity_text(device);
  if (state_->snapshots.find(id) == state_->snapshots.end()) {
    State::Snapshot snap = state_->load_snapshot(device);
    state_->snapshots[id] = std::move(snap);
  }
  std::vector<std::string> out;
  if (auto it = state_->snapshots.find(id); it != state_->snapshots.end() && it->second.usable) {
    for (const auto& [problem, list] : it->second.lists) out.push_back(problem);
  } else {
    // Too many rows to hold: the writer's distinct keys (read-only layers are not walked then).
    state_->on_writer(
        [&](Connection& c) {
          out.clear();
          auto s = c.prepare(
              "SELECT DISTINCT problem FROM find_rows WHERE device=?1 AND arch=?2 AND units=?3 AND driver=?4 AND "
              "galley=?5");
          s.bind(1, device.name).bind(2, device.arch).bind(3, std::int64_t{device.compute_units});
          s.bind(4, device.driver_version).bind(5, device.galley_version);
          while (s.step()) out.push_back(s.column_text(0));
        },
        false);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<FindRow> FindDb::rows() {
  std::lock_guard lock(state_->mutex);
  std::vector<FindRow> out;
  state_->on_writer([&](Connection& c) { out = select_all(c); }, true);
  if (state_->user_read_only) {
    try {
      auto more = select_all(*state_->user_read_only);
      out.insert(out.end(), more.begin(), more.end());
    } catch (const SqliteError& e) {
      log::warn_once("finddb-read:" + state_->paths.user.string(),
                     "find-db " + state_->paths.user.string() + " cannot be read (" + e.what() + ")");
    }
  }
  return out;
}

WriteResult FindDb::clear() {
  std::lock_guard lock(state_->mutex);
  std::size_t count = 0;
  const State::Ran ran = state_->on_writer(
      [&](Connection& c) {
        sqlite::Transaction t(c);
        c.exec("DELETE FROM find_rows");
        count = static_cast<std::size_t>(sqlite3_changes(c.handle()));
        t.commit();
      },
      false, State::Fallback::file_only);
  state_->snapshots.clear();
  if (!ran.on_file) return WriteResult{false, ran.reason, 0};
  return WriteResult{true, {}, count};
}

const std::filesystem::path& FindDb::user_path() const { return state_->paths.user; }
const std::filesystem::path& FindDb::system_path() const { return state_->paths.system; }

bool FindDb::in_memory() const {
  std::lock_guard lock(state_->mutex);
  return !state_->writer_is_file;
}

UnsavedStores FindDb::unsaved_stores() const {
  std::lock_guard lock(state_->mutex);
  return state_->unsaved;
}

bool FindDb::has_system_db() const {
  std::lock_guard lock(state_->mutex);
  return state_->system.has_value();
}

}  // namespace galley::tuning
