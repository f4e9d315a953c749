// A thin RAII layer over the SQLite C API for the find-db: connections, prepared statements, and
// the error classes the find-db reacts to (busy, corrupt, unwritable). Internal to libgalley.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace galley::tuning::sqlite {

/// How the find-db reacts to a failed SQLite call.
enum class Failure {
  busy,        ///< locked by another connection: wait and retry
  corrupt,     ///< not a database, or a malformed one: move aside and start fresh
  unwritable,  ///< read-only file or folder, permission, disk full, I/O: fall back to memory
  other,       ///< a bug or something unexpected (bad SQL, misuse)
};

/// A failed SQLite call: the extended result code, its class and SQLite's message.
class SqliteError : public std::runtime_error {
 public:
  SqliteError(int code, const std::string& message);
  int code() const noexcept { return code_; }
  Failure failure() const noexcept;

 private:
  int code_;
};

Failure classify(int code) noexcept;

/// A prepared statement. Reset and re-bound for each use.
class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, std::string_view sql);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  explicit operator bool() const { return stmt_ != nullptr; }
  /// Resets the statement and clears its bindings.
  Statement& reset();
  Statement& bind(int index, std::string_view text);
  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, double value);  ///< NaN binds NULL
  /// Steps once: true when a row is available, false when done. Throws SqliteError.
  bool step();
  std::string column_text(int index) const;
  std::int64_t column_int(int index) const;
  /// NULL reads as NaN.
  double column_double(int index) const;

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

/// One open database connection.
class Connection {
 public:
  Connection() = default;
  /// Opens `path` (":memory:" for an in-memory db) with sqlite3_open_v2 flags. Throws SqliteError.
  Connection(const std::string& path, int flags);
  ~Connection();
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  explicit operator bool() const { return db_ != nullptr; }
  sqlite3* handle() const { return db_; }
  /// Runs statements without results. Throws SqliteError.
  void exec(std::string_view sql);
  /// The first column of the first row of a one-value query (e.g. a PRAGMA).
  std::optional<std::string> query_text(std::string_view sql);
  Statement prepare(std::string_view sql) { return Statement(db_, sql); }
  /// True when SQLite opened the main database read-only (e.g. a write-protected file).
  bool read_only() const;
  /// How long one statement waits inside SQLite for another connection's lock (5000 ms at open).
  void set_busy_timeout(int ms);
  void close() noexcept;

 private:
  sqlite3* db_ = nullptr;
};

/// Runs `body` (typically one transaction) and retries it while it fails with Failure::busy,
/// with a growing, jittered back-off, until `deadline_ms` has passed; then rethrows the last error.
/// A transaction body must roll back on failure before the next attempt (see Transaction).
void with_busy_retry(const std::function<void()>& body, double deadline_ms = 60000);

/// BEGIN IMMEDIATE ... COMMIT; rolls back when destroyed uncommitted.
class Transaction {
 public:
  explicit Transaction(Connection& connection);
  ~Transaction();
  void commit();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

 private:
  Connection* connection_;
  bool open_ = false;
};

}  // namespace galley::tuning::sqlite
