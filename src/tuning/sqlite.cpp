#include "sqlite.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

namespace galley::tuning::sqlite {
namespace {

std::string describe(sqlite3* db, int code) {
  std::string message = sqlite3_errstr(code);
  if (db != nullptr) {
    const char* detail = sqlite3_errmsg(db);
    if (detail != nullptr && message != detail) message += std::string(" (") + detail + ")";
  }
  return message;
}

void check(sqlite3* db, int code, std::string_view what) {
  if (code == SQLITE_OK || code == SQLITE_ROW || code == SQLITE_DONE) return;
  const int extended = db != nullptr ? sqlite3_extended_errcode(db) : code;
  throw SqliteError(extended != 0 ? extended : code, std::string(what) + ": " + describe(db, code));
}

}  // namespace

SqliteError::SqliteError(int code, const std::string& message) : std::runtime_error(message), code_(code) {}

Failure SqliteError::failure() const noexcept { return classify(code_); }

Failure classify(int code) noexcept {
  // A short read means the file ends before the pages its header promises: a truncated file.
  if (code == SQLITE_IOERR_SHORT_READ) return Failure::corrupt;
  switch (code & 0xff) {  // the primary result code
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Failure::busy;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Failure::corrupt;
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_AUTH:
    case SQLITE_NOLFS:
      return Failure::unwritable;
    default:
      return Failure::other;
  }
}

Statement::Statement(sqlite3* db, std::string_view sql) : db_(db) {
  const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
  check(db, rc, "prepare '" + std::string(sql.substr(0, 60)) + "'");
}

Statement::~Statement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) {
  other.stmt_ = nullptr;
}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = other.stmt_;
    other.stmt_ = nullptr;
  }
  return *this;
}

Statement& Statement::reset() {
  sqlite3_reset(stmt_);  // its code repeats the last step's error, already reported by step()
  sqlite3_clear_bindings(stmt_);
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  check(db_, sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT), "bind");
  return *this;
}

Statement& Statement::bind(int index, std::int64_t value) {
  check(db_, sqlite3_bind_int64(stmt_, index, value), "bind");
  return *this;
}

Statement& Statement::bind(int index, double value) {
  const int rc = std::isnan(value) ? sqlite3_bind_null(stmt_, index) : sqlite3_bind_double(stmt_, index, value);
  check(db_, rc, "bind");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const int code = sqlite3_extended_errcode(db_);
  const std::string message = describe(db_, rc);
  sqlite3_reset(stmt_);
  throw SqliteError(code != 0 ? code : rc, "step: " + message);
}

std::string Statement::column_text(int index) const {
  const auto* text = sqlite3_column_text(stmt_, index);
  return text == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(text));
}

std::int64_t Statement::column_int(int index) const { return sqlite3_column_int64(stmt_, index); }

double Statement::column_double(int index) const {
  if (sqlite3_column_type(stmt_, index) == SQLITE_NULL) return std::nan("");
  return sqlite3_column_double(stmt_, index);
}

Connection::Connection(const std::string& path, int flags) {
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = "open " + path + ": " + describe(db_, rc);
    const int code = db_ != nullptr ? sqlite3_extended_errcode(db_) : rc;
    close();
    throw SqliteError(code, message);
  }
  sqlite3_extended_result_codes(db_, 1);
  // Most waiting happens here, inside SQLite; with_busy_retry covers the cases where SQLite returns
  // SQLITE_BUSY at once (a WAL read transaction that cannot be upgraded, recovery in progress).
  sqlite3_busy_timeout(db_, 5000);
}

Connection::~Connection() { close(); }

Connection::Connection(Connection&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    close();
    db_ = other.db_;
    other.db_ = nullptr;
  }
  return *this;
}

void Connection::close() noexcept {
  if (db_ != nullptr) {
    sqlite3_close_v2(db_);
    db_ = nullptr;
  }
}

void Connection::exec(std::string_view sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string message = error != nullptr ? error : sqlite3_errstr(rc);
    sqlite3_free(error);
    const int code = sqlite3_extended_errcode(db_);
    throw SqliteError(code != 0 ? code : rc, "'" + std::string(sql.substr(0, 60)) + "': " + message);
  }
}

std::optional<std::string> Connection::query_text(std::string_view sql) {
  Statement statement(db_, sql);
  if (!statement.step()) return std::nullopt;
  return statement.column_text(0);
}

bool Connection::read_only() const { return db_ != nullptr && sqlite3_db_readonly(db_, "main") == 1; }

void Connection::set_busy_timeout(int ms) {
  if (db_ != nullptr) sqlite3_busy_timeout(db_, ms);
}

void with_busy_retry(const std::function<void()>& body, double deadline_ms) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Jitter keeps processes that collided once from colliding again in lock step.
  thread_local std::minstd_rand jitter(static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id()) ^
                                                            static_cast<unsigned>(start.time_since_epoch().count())));
  double backoff_ms = 1;
  for (;;) {
    try {
      body();
      return;
    } catch (const SqliteError& e) {
      if (e.failure() != Failure::busy) throw;
      const double waited = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (waited > deadline_ms) throw;
      const double sleep_ms = backoff_ms * (0.5 + std::uniform_real_distribution<double>(0, 1)(jitter));
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(sleep_ms));
      backoff_ms = std::min(backoff_ms * 2, 100.0);
    }
  }
}

Transaction::Transaction(Connection& connection) : connection_(&connection) {
  connection_->exec("BEGIN IMMEDIATE");
  open_ = true;
}

Transaction::~Transaction() {
  if (!open_) return;
  try {
    connection_->exec("ROLLBACK");
  } catch (...) {
    // A failed rollback leaves SQLite to roll back on the next statement or at close.
  }
}

void Transaction::commit() {
  connection_->exec("COMMIT");
  open_ = false;
}

}  // namespace galley::tuning::sqlite
