// The persistent find-db: benchmarked, ranked solver lists per problem and device, in SQLite.
//
// Rows are keyed by problem key + device identity (name, arch, compute units) + Galley version +
// driver version, so an upgrade, a driver update or another device never sees stale rows: they are
// simply not matched (and stay in the file, visible to `galley db list`). A read-only system db
// shipped beside the install (share/galley/finddb.sqlite) is consulted under the user db.
//
// Robustness (the pains of MIOpen's find-db): several processes may tune into one file at once
// (WAL, busy timeout plus retries; "database is locked" never reaches the caller); a corrupt file
// is reported once, moved aside as <file>.corrupt-<time> and replaced by a fresh db; an unwritable
// folder or file is reported once and the process continues with an in-memory db (the unwritable
// file, when readable, is still consulted). A write lock another process holds for longer than
// kLockWaitMs counts as unwritable, once per process: later writes do not wait on it again. No
// method throws for these conditions; every write says in a WriteResult whether it reached the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "galley/runtime/device.hpp"

namespace galley::tuning {

/// What a find-db row must match besides the problem key.
struct DeviceIdentity {
  std::string name;            ///< "NVIDIA H200", the CPU model name
  std::string arch;            ///< "sm_90", "gfx90a", "avx2"
  int compute_units = 0;       ///< SMs, CUs, cpu pool threads
  std::string driver_version;  ///< driver (GPU) or kernel (cpu) version
  std::string galley_version;  ///< version_string() of the library that tuned

  /// The identity of `device` as this build of Galley sees it.
  static DeviceIdentity of(const runtime::Device& device);
  /// "NVIDIA H200 sm_90 x132, driver 13.0, galley 0.1.0" for messages and `galley db list`.
  std::string to_string() const;
  friend bool operator==(const DeviceIdentity&, const DeviceIdentity&) = default;
};

/// One ranked entry of a problem's list.
struct FindRecord {
  std::string solver;  ///< solver name, e.g. "cpu.conv.winograd_f4x3"
  /// Time per call as tuned (the fastest sample on the cpu, the median on a GPU); NaN when not
  /// timed (the only applicable solver).
  double ms = 0;
  std::size_t workspace_bytes = 0;
  int rank = 0;        ///< 0 = fastest
  std::string params;  ///< the solver's inner choice: its config text (TunableSolver), often empty
};

/// A whole row, as listed, exported and imported.
struct FindRow {
  std::string problem;  ///< canonical problem key
  DeviceIdentity device;
  FindRecord record;
  std::int64_t tuned_at = 0;  ///< unix seconds
};

/// Where the find-db files are.
struct FindDbPaths {
  std::filesystem::path user;    ///< read-write db; empty: in-memory only
  std::filesystem::path system;  ///< read-only db consulted under the user db; empty: none
};

/// $GALLEY_CACHE_DIR, else $XDG_CACHE_HOME/galley, else $HOME/.cache/galley (not created here).
std::filesystem::path default_cache_dir();
/// <folder of libgalley>/../share/galley/finddb.sqlite (it need not exist).
std::filesystem::path default_system_db_path();
/// {default_cache_dir()/finddb.sqlite, default_system_db_path()}.
FindDbPaths default_find_db_paths();

/// How long a write waits for a lock another process holds before this process gives the file up
/// and keeps its results in memory (once per process and file, not per write).
inline constexpr double kLockWaitMs = 2000;

/// What a write did to the user db file. A caller that reports saving must look at `saved`: a
/// locked, read-only, full, corrupt-beyond-repair or foreign file takes nothing, and says why here.
struct WriteResult {
  bool saved = false;    ///< committed to the user db file
  std::string reason;    ///< why not, when !saved: names the file and the cause
  std::size_t rows = 0;  ///< rows committed (store, import_json) or deleted (clear); 0 when !saved
  explicit operator bool() const { return saved; }
};

/// The store() calls of one FindDb whose rows did not reach the file.
struct UnsavedStores {
  std::size_t count = 0;
  std::string last_reason;  ///< the reason of the latest one
};

/// The find-db. Thread-safe (one mutex); every process may hold its own FindDb on the same file.
class FindDb {
 public:
  /// Opens (creating the folder 0700 and the file when missing) or falls back as described at the top.
  explicit FindDb(FindDbPaths paths);
  ~FindDb();
  FindDb(const FindDb&) = delete;
  FindDb& operator=(const FindDb&) = delete;

  /// The ranked records of `problem` for `device`, best first: the user db's when it has any,
  /// else the system db's (then *from_system_db is set). Empty on a miss. The first lookup for a
  /// device identity reads all of that identity's rows at once, so later lookups of this object cost
  /// a hash lookup; rows other processes store later are still found (a miss queries the files),
  /// rows they delete or replace later may still be returned by this object.
  std::vector<FindRecord> lookup(std::string_view problem, const DeviceIdentity& device,
                                 bool* from_system_db = nullptr);
  /// Replaces the records of `problem` for `device` by `ranked` (ranks renumbered 0..n-1) in one
  /// transaction, so a concurrent reader sees the old list or the new one, never a mix. When the
  /// file cannot take them (result not saved), this object still returns them from lookup().
  WriteResult store(std::string_view problem, const DeviceIdentity& device,
                    const std::vector<FindRecord>& ranked);

  /// Stores many lists in one transaction: for each (problem, identity) in `rows`, the stored list is
  /// replaced by that identity's rows (ordered by rank, ranks renumbered 0..n-1), each keeping its
  /// tuned_at. All or nothing: when the file cannot take them, nothing is written anywhere (not
  /// saved, with the reason). The rows are trusted: import_json checks them first.
  WriteResult store_rows(const std::vector<FindRow>& rows);

  /// The problem keys stored for `device` in every layer (what Tuner::preload warms up), sorted.
  std::vector<std::string> problems(const DeviceIdentity& device);

  /// Every row of the user db (all devices and versions), ordered by problem, device, rank.
  std::vector<FindRow> rows();
  /// Deletes every row of the user db file (`rows` says how many). Not saved, and nothing deleted,
  /// when the file cannot be written (an in-memory db is never "cleared" in its place).
  WriteResult clear();
  /// Writes rows() as JSON ({"format": "galley-finddb", "version": 1, "rows": [...]}) and returns
  /// how many. Throws Error(invalid_argument) naming `file` when it is this db (user or system, or
  /// their -wal/-shm), any SQLite database, a folder or a device other than a terminal, and when it
  /// is an existing file and `overwrite` is false (a pipe or terminal is written without it);
  /// Error(io_error) when it cannot be written (an existing file is then left as it was).
  std::size_t export_json(const std::filesystem::path& file, bool overwrite = false);
  /// Adds the rows of an exported file; each (problem, device, versions) list in the file replaces
  /// the stored list of that problem and identity. Every row is validated first (types, ranges,
  /// canonical problem keys, known solver names): a missing, unreadable or malformed file, or any
  /// bad row, throws Error naming the file and each bad row's index and reason, before anything is
  /// written. The rows are then written in one transaction: all of them (saved, `rows` = count)
  /// or none (not saved, with the reason; an in-memory db never takes them in the file's place).
  WriteResult import_json(const std::filesystem::path& file);

  /// The user db file, or empty when none was configured.
  const std::filesystem::path& user_path() const;
  const std::filesystem::path& system_path() const;
  /// True when the user db could not be opened for writing and rows live in memory only.
  bool in_memory() const;
  /// The store() calls of this object so far that were not saved.
  UnsavedStores unsaved_stores() const;
  /// True when a system db was found and opened.
  bool has_system_db() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace galley::tuning
