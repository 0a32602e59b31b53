// store_sql.hpp - internal to the run store (store.cpp, store_history.cpp): RAII SQLite statements,
// error mapping, and the retried BEGIN IMMEDIATE write transaction. Not part of the SDK.
#pragma once
#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <thread>

#include "base/clock.hpp"
#include "bertx/error.hpp"

namespace bertx::store_detail {

inline constexpr int kBusyTimeoutMs = 30000;
inline constexpr int kMaxAttempts = 8;  // on top of busy_timeout's own waiting

// Raised when SQLite still answers BUSY/LOCKED after busy_timeout; with_retry catches it and retries.
struct Busy : Error {
  using Error::Error;
};

[[noreturn]] inline void fail(sqlite3* db, const std::string& path, int rc) {
  const std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_NOTADB:
      throw Error(path + ": not a bertx run store (file is not an SQLite database)");
    case SQLITE_CORRUPT:
      throw Error(path + ": run store is corrupt (" + msg + ")");
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      throw Busy(path + ": run store is locked by another process (" + msg + ")");
    default:
      throw Error(path + ": run store error: " + msg);
  }
}

inline void exec(sqlite3* db, const std::string& path, const char* sql) {
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(db, path, rc);
}

// A prepared statement, finalized on scope exit. Parameters are 1-based, columns 0-based (as in SQLite).
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& path, const char* sql) : db_(db), path_(path) {
    const int rc = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr);
    if (rc != SQLITE_OK) fail(db_, path_, rc);
  }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, std::int64_t v) { return check(sqlite3_bind_int64(st_, i, v)); }
  Stmt& bind(int i, double v) { return check(sqlite3_bind_double(st_, i, v)); }
  Stmt& bind(int i, const std::string& v) {
    return check(sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  Stmt& bind(int i, std::optional<std::int64_t> v) { return v ? bind(i, *v) : check(sqlite3_bind_null(st_, i)); }

  // true: a row is ready; false: done.
  bool step() {
    const int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, path_, rc);
  }
  void reset() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }

  std::int64_t i64(int c) { return sqlite3_column_int64(st_, c); }
  double f64(int c) {  // NULL reads back as NaN (how a NaN was stored)
    return sqlite3_column_type(st_, c) == SQLITE_NULL ? std::numeric_limits<double>::quiet_NaN()
                                                      : sqlite3_column_double(st_, c);
  }
  std::string text(int c) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, c));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, c))) : std::string();
  }
  bool is_null(int c) { return sqlite3_column_type(st_, c) == SQLITE_NULL; }

 private:
  Stmt& check(int rc) {
    if (rc != SQLITE_OK) fail(db_, path_, rc);
    return *this;
  }
  sqlite3* db_;
  const std::string& path_;
  sqlite3_stmt* st_ = nullptr;
};

// Runs fn, retrying a bounded number of times with growing sleeps while SQLite reports BUSY/LOCKED.
template <class F>
void with_retry(const std::string& path, F&& fn) {
  for (int attempt = 1;; ++attempt) {
    try {
      fn();
      return;
    } catch (const Busy&) {
      if (attempt == kMaxAttempts)
        throw Error(path + ": run store stayed locked by other processes (gave up after " +
                    std::to_string(kMaxAttempts) + " attempts of " + std::to_string(kBusyTimeoutMs / 1000) + " s)");
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * attempt));
    }
  }
}

// body, then COMMIT, inside a transaction already begun; any exception rolls it back and is rethrown.
template <class F>
void commit_or_roll_back(sqlite3* db, const std::string& path, F&& body) {
  try {
    body();
    exec(db, path, "COMMIT");
  } catch (...) {
    if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

// One write transaction: BEGIN IMMEDIATE takes the write lock up front, so body never deadlocks with
// another writer half way; any exception rolls back and a BUSY/LOCKED one retries the whole body.
template <class F>
void write_txn(sqlite3* db, const std::string& path, F&& body) {
  with_retry(path, [&] {
    exec(db, path, "BEGIN IMMEDIATE");
    commit_or_roll_back(db, path, body);
  });
}

// One write transaction only if the write lock is free right now: false (nothing done, nothing waited for)
// when another process holds it. For work a reader may leave to the next caller (reaping stale runs).
template <class F>
bool try_write_txn(sqlite3* db, const std::string& path, F&& body) {
  sqlite3_busy_timeout(db, 0);
  try {
    exec(db, path, "BEGIN IMMEDIATE");
  } catch (const Busy&) {
    sqlite3_busy_timeout(db, kBusyTimeoutMs);
    return false;
  }
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  commit_or_roll_back(db, path, body);
  return true;
}

}  // namespace bertx::store_detail
