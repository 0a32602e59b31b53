// store.cpp - the SQLite run store (see store.hpp for the schema and the durability story).
// Plain SQLite C API: RAII statements with bound parameters, every write in BEGIN IMMEDIATE...COMMIT
// retried on BUSY/LOCKED, schema migrations as an ordered list of SQL scripts keyed by PRAGMA user_version.
#include "store/store.hpp"

#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>
#include <thread>

#include "bertx/error.hpp"
#include "base/build_info.hpp"
#include "base/fs_util.hpp"
#include "store/store_sql.hpp"

namespace bertx {
using namespace store_detail;
namespace {

// Migration i takes user_version from i to i+1. Append new scripts; never edit one that has shipped.
const char* const kMigrations[] = {
    // 1: the initial schema. metrics.value is nullable: SQLite stores a NaN double as NULL.
    R"sql(
CREATE TABLE sweeps(
  id INTEGER PRIMARY KEY,
  experiment TEXT NOT NULL,
  created_at REAL NOT NULL,
  spec TEXT NOT NULL);
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  experiment TEXT NOT NULL,
  config TEXT NOT NULL,
  config_hash TEXT NOT NULL,
  seed INTEGER NOT NULL,
  status TEXT NOT NULL CHECK(status IN ('running', 'finished', 'failed', 'interrupted')),
  started_at REAL NOT NULL,
  ended_at REAL,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  world_size INTEGER NOT NULL,
  bertx_version TEXT NOT NULL,
  torch_version TEXT NOT NULL,
  git_rev TEXT NOT NULL,
  output_dir TEXT NOT NULL,
  plugins TEXT NOT NULL,
  message TEXT NOT NULL DEFAULT '',
  sweep_id INTEGER REFERENCES sweeps(id));
CREATE TABLE metrics(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  name TEXT NOT NULL,
  value REAL,
  time REAL NOT NULL);
CREATE TABLE artifacts(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  path TEXT NOT NULL,
  step INTEGER NOT NULL,
  time REAL NOT NULL);
CREATE INDEX metrics_run_name_step ON metrics(run_id, name, step);
CREATE INDEX artifacts_run ON artifacts(run_id);
CREATE INDEX runs_name ON runs(name);
CREATE INDEX runs_status ON runs(status);
CREATE INDEX runs_started_at ON runs(started_at);
)sql",
    // 2: the host of every data-parallel rank (comma-separated, index = rank), set once the ranks joined.
    R"sql(
ALTER TABLE runs ADD COLUMN hosts TEXT NOT NULL DEFAULT '';
)sql",
    // 3: run history queries (bertx runs table --sweep, bertx sweep's per-seed look-up).
    R"sql(
CREATE INDEX IF NOT EXISTS runs_sweep_seed ON runs(sweep_id, seed);
CREATE INDEX IF NOT EXISTS sweeps_experiment ON sweeps(experiment);
)sql",
    // 4: how the process was set up for speed (threads, BLAS, OpenMP wait policy, malloc): a JSON object.
    R"sql(
ALTER TABLE runs ADD COLUMN process TEXT NOT NULL DEFAULT '';
)sql",
};
constexpr int kSchemaVersion = static_cast<int>(std::size(kMigrations));

int read_user_version(sqlite3* db, const std::string& path) {
  Stmt st(db, path, "PRAGMA user_version");
  return st.step() ? static_cast<int>(st.i64(0)) : 0;
}

void require_run(sqlite3* db, const std::string& path, std::int64_t run_id) {
  Stmt st(db, path, "SELECT 1 FROM runs WHERE id = ?1");
  if (!st.bind(1, run_id).step()) throw Error(path + ": no run with id " + std::to_string(run_id));
}

const char* const kRunColumns =
    "id, name, experiment, config, config_hash, seed, status, started_at, ended_at, host, pid, world_size, "
    "bertx_version, torch_version, git_rev, output_dir, plugins, message, sweep_id, hosts, process";

RunRecord read_run(Stmt& st) {
  RunRecord r;
  r.id = st.i64(0);
  r.name = st.text(1);
  r.experiment = st.text(2);
  r.config = st.text(3);
  r.config_hash = st.text(4);
  r.seed = st.i64(5);
  r.status = parse_run_status(st.text(6));
  r.started_at = st.f64(7);
  r.ended_at = st.is_null(8) ? 0.0 : st.f64(8);
  r.host = st.text(9);
  r.pid = st.i64(10);
  r.world_size = static_cast<int>(st.i64(11));
  r.bertx_version = st.text(12);
  r.torch_version = st.text(13);
  r.git_rev = st.text(14);
  r.output_dir = st.text(15);
  r.plugins = st.text(16);
  r.message = st.text(17);
  if (!st.is_null(18)) r.sweep_id = st.i64(18);
  const std::string hosts = st.text(19);
  for (std::size_t at = 0; !hosts.empty() && at <= hosts.size();) {
    const std::size_t comma = std::min(hosts.find(',', at), hosts.size());
    r.hosts.push_back(hosts.substr(at, comma - at));
    at = comma + 1;
  }
  r.process = st.text(20);
  return r;
}

}  // namespace

const char* run_status_name(RunStatus s) {
  switch (s) {
    case RunStatus::Running:
      return "running";
    case RunStatus::Finished:
      return "finished";
    case RunStatus::Failed:
      return "failed";
    case RunStatus::Interrupted:
      return "interrupted";
  }
  return "unknown";
}

RunStatus parse_run_status(const std::string& s) {
  for (RunStatus v : {RunStatus::Running, RunStatus::Finished, RunStatus::Failed, RunStatus::Interrupted})
    if (s == run_status_name(v)) return v;
  throw Error("unknown run status '" + s + "' (expected running, finished, failed or interrupted)");
}

std::unique_ptr<RunStore> RunStore::open(const std::string& path) {
  if (path.empty()) throw Error("run store path is empty (expected a file path such as runs/bertx.db)");
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) throw Error(path + ": cannot create folder " + parent.string() + ": " + ec.message());
  }
  // SQLite's WAL and shared-memory files live beside the database: a read-only folder fails here, by name.
  require_writable_dir(parent.empty() ? "." : parent.string(), path + ": the run store's folder");

  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  std::unique_ptr<RunStore> store(new RunStore(path, raw));  // owns raw from here, even on failure
  if (rc != SQLITE_OK) {
    const int os_errno = raw ? sqlite3_system_errno(raw) : 0;  // e.g. "Read-only file system" for a read-only folder
    throw Error(path + ": cannot open run store: " + sqlite3_errstr(rc) +
                (os_errno ? std::string(" (") + std::strerror(os_errno) + ")" : ""));
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);

  // journal_mode=WAL is the first statement that reads the file: garbage fails here with NOTADB.
  // Switching to WAL briefly needs an exclusive lock, hence the retry.
  with_retry(path, [&] {
    Stmt st(raw, path, "PRAGMA journal_mode=WAL");
    while (st.step()) {
    }
  });
  exec(raw, path, "PRAGMA synchronous=NORMAL");
  exec(raw, path, "PRAGMA foreign_keys=ON");

  const int found = read_user_version(raw, path);
  if (found > kSchemaVersion)
    throw Error(path + ": run store schema version " + std::to_string(found) +
                " is newer than this bertx understands (" + std::to_string(kSchemaVersion) + "); upgrade bertx");
  // Each migration in its own transaction; the version is re-read under the write lock because another
  // process may be migrating the same file right now. A current schema takes no write lock: a reader
  // (`bertx runs`) never queues behind the writers of a busy store.
  for (bool done = found >= kSchemaVersion; !done;) {
    write_txn(raw, path, [&] {
      const int v = read_user_version(raw, path);
      if (v >= kSchemaVersion) {
        done = true;
        return;
      }
      exec(raw, path, kMigrations[v]);
      exec(raw, path, ("PRAGMA user_version = " + std::to_string(v + 1)).c_str());  // a code constant
    });
  }
  return store;
}

RunStore::~RunStore() { sqlite3_close_v2(db_); }

int RunStore::schema_version() const { return read_user_version(db_, path_); }

std::int64_t RunStore::begin_run(const NewRun& run) {
  std::int64_t id = 0;
  write_txn(db_, path_, [&] {
    Stmt st(db_, path_,
            "INSERT INTO runs(name, experiment, config, config_hash, seed, status, started_at, host, pid, "
            "world_size, bertx_version, torch_version, git_rev, output_dir, plugins, sweep_id) "
            "VALUES(?1, ?2, ?3, ?4, ?5, 'running', ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)");
    st.bind(1, run.name).bind(2, run.experiment).bind(3, run.config).bind(4, run.config_hash);
    st.bind(5, run.seed).bind(6, unix_seconds()).bind(7, host_name()).bind(8, std::int64_t{getpid()});
    st.bind(9, std::int64_t{run.world_size}).bind(10, bertx_version()).bind(11, torch_version());
    st.bind(12, git_revision()).bind(13, run.output_dir).bind(14, run.plugins).bind(15, run.sweep_id);
    st.step();
    id = sqlite3_last_insert_rowid(db_);
  });
  return id;
}

void RunStore::log_metrics(std::int64_t run_id, std::int64_t step,
                           const std::vector<std::pair<std::string, double>>& values) {
  write_txn(db_, path_, [&] {
    require_run(db_, path_, run_id);
    Stmt st(db_, path_, "INSERT INTO metrics(run_id, step, name, value, time) VALUES(?1, ?2, ?3, ?4, ?5)");
    const double t = unix_seconds();
    for (const auto& [name, value] : values) {
      st.bind(1, run_id).bind(2, step).bind(3, name).bind(4, value).bind(5, t);
      st.step();
      st.reset();
    }
  });
}

void RunStore::add_artifact(std::int64_t run_id, const std::string& kind, const std::string& path, std::int64_t step) {
  write_txn(db_, path_, [&] {
    require_run(db_, path_, run_id);
    Stmt st(db_, path_, "INSERT INTO artifacts(run_id, kind, path, step, time) VALUES(?1, ?2, ?3, ?4, ?5)");
    st.bind(1, run_id).bind(2, kind).bind(3, path).bind(4, step).bind(5, unix_seconds()).step();
  });
}

void RunStore::set_ranks(std::int64_t run_id, const std::vector<std::string>& hosts) {
  std::string joined;
  for (const auto& h : hosts) {
    if (h.find(',') != std::string::npos) throw Error(path_ + ": host name '" + h + "' contains a comma");
    joined += (joined.empty() ? "" : ",") + h;
  }
  write_txn(db_, path_, [&] {
    Stmt st(db_, path_, "UPDATE runs SET world_size = ?1, hosts = ?2 WHERE id = ?3");
    st.bind(1, static_cast<std::int64_t>(hosts.size())).bind(2, joined).bind(3, run_id).step();
    if (sqlite3_changes(db_) == 0) throw Error(path_ + ": no run with id " + std::to_string(run_id));
  });
}

void RunStore::set_process(std::int64_t run_id, const std::string& settings_json) {
  write_txn(db_, path_, [&] {
    Stmt st(db_, path_, "UPDATE runs SET process = ?1 WHERE id = ?2");
    st.bind(1, settings_json).bind(2, run_id).step();
    if (sqlite3_changes(db_) == 0) throw Error(path_ + ": no run with id " + std::to_string(run_id));
  });
}

void RunStore::finish_run(std::int64_t run_id, RunStatus status, const std::string& message) {
  write_txn(db_, path_, [&] {
    Stmt st(db_, path_, "UPDATE runs SET status = ?1, ended_at = ?2, message = ?3 WHERE id = ?4");
    st.bind(1, std::string(run_status_name(status))).bind(2, unix_seconds()).bind(3, message).bind(4, run_id);
    st.step();
    if (sqlite3_changes(db_) == 0) throw Error(path_ + ": no run with id " + std::to_string(run_id));
  });
}

bool RunStore::reopen_run(std::int64_t run_id, std::int64_t after_step) {
  bool found = false;
  write_txn(db_, path_, [&] {
    Stmt upd(db_, path_,
             "UPDATE runs SET status = 'running', ended_at = NULL, message = '', host = ?1, pid = ?2 WHERE id = ?3");
    upd.bind(1, host_name()).bind(2, static_cast<std::int64_t>(getpid())).bind(3, run_id).step();
    found = sqlite3_changes(db_) > 0;
    if (!found) return;
    Stmt del(db_, path_, "DELETE FROM metrics WHERE run_id = ?1 AND step > ?2");
    del.bind(1, run_id).bind(2, after_step).step();
  });
  return found;
}

namespace {
// Runs of this host still 'running' whose process is gone.
std::vector<std::int64_t> dead_runs(sqlite3* db, const std::string& path) {
  std::vector<std::int64_t> dead;
  Stmt sel(db, path, "SELECT id, pid FROM runs WHERE status = 'running' AND host = ?1");
  sel.bind(1, host_name());
  while (sel.step()) {
    const std::int64_t pid = sel.i64(1);
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) dead.push_back(sel.i64(0));
    // a pid reused by an unrelated process keeps its run 'running': nothing cheap tells them apart
  }
  return dead;
}
}  // namespace

int RunStore::reap_stale_runs(LockWait wait) {
  // Looked for without the write lock first: every `bertx runs` and every start reaps, and most find nothing.
  if (dead_runs(db_, path_).empty()) return 0;
  int reaped = 0;
  const auto body = [&] {
    reaped = 0;  // the body may run again after a BUSY rollback
    const std::vector<std::int64_t> dead =
        dead_runs(db_, path_);  // again under the lock: another process may have reaped them
    Stmt upd(db_, path_,
             "UPDATE runs SET status = 'interrupted', ended_at = ?1, "
             "message = 'process ' || pid || ' exited without finishing (killed?)' WHERE id = ?2");
    for (std::int64_t id : dead) {
      upd.bind(1, unix_seconds()).bind(2, id).step();
      upd.reset();
      ++reaped;
    }
  };
  if (wait == LockWait::Wait) {
    write_txn(db_, path_, body);
  } else if (!try_write_txn(db_, path_, body)) {
    return 0;
  }
  return reaped;
}

std::vector<RunRecord> RunStore::list_runs(const RunFilter& filter) const {
  const std::string sql = std::string("SELECT ") + kRunColumns +
                          " FROM runs WHERE (?1 IS NULL OR name = ?1) AND (?2 IS NULL OR status = ?2) "
                          "AND (?3 IS NULL OR started_at >= ?3) AND (?5 IS NULL OR sweep_id = ?5) "
                          "ORDER BY started_at DESC, id DESC LIMIT ?4";
  Stmt st(db_, path_, sql.c_str());
  if (filter.name) st.bind(1, *filter.name);
  if (filter.status) st.bind(2, std::string(run_status_name(*filter.status)));
  if (filter.since) st.bind(3, *filter.since);
  if (filter.sweep_id) st.bind(5, *filter.sweep_id);
  st.bind(4, filter.limit ? static_cast<std::int64_t>(filter.limit) : std::int64_t{-1});  // -1: no limit
  std::vector<RunRecord> out;
  while (st.step()) out.push_back(read_run(st));
  return out;
}

std::optional<RunRecord> RunStore::get_run(std::int64_t id) const {
  const std::string sql = std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?1";
  Stmt st(db_, path_, sql.c_str());
  if (!st.bind(1, id).step()) return std::nullopt;
  return read_run(st);
}

std::optional<RunRecord> RunStore::last_run_in(const std::string& output_dir) const {
  const std::string sql =
      std::string("SELECT ") + kRunColumns + " FROM runs WHERE output_dir = ?1 ORDER BY id DESC LIMIT 1";
  Stmt st(db_, path_, sql.c_str());
  if (!st.bind(1, output_dir).step()) return std::nullopt;
  return read_run(st);
}

std::vector<MetricRow> RunStore::metrics(std::int64_t run_id, const std::string& name) const {
  // Two fixed statements rather than `(?2 = '' OR name = ?2)`, so a named read uses the index.
  Stmt st(db_, path_,
          name.empty() ? "SELECT step, name, value, time FROM metrics WHERE run_id = ?1 ORDER BY step, rowid"
                       : "SELECT step, name, value, time FROM metrics WHERE run_id = ?1 AND name = ?2 "
                         "ORDER BY step, rowid");
  st.bind(1, run_id);
  if (!name.empty()) st.bind(2, name);
  std::vector<MetricRow> out;
  while (st.step()) out.push_back({st.i64(0), st.text(1), st.f64(2), st.f64(3)});
  return out;
}

std::vector<MetricSummary> RunStore::metric_summary(std::int64_t run_id) const {
  // The last value is the one at the highest step (latest row if a step was logged twice).
  Stmt st(db_, path_,
          "SELECT m.name, COUNT(*), MAX(m.step), "
          "  (SELECT l.value FROM metrics l WHERE l.run_id = m.run_id AND l.name = m.name "
          "   ORDER BY l.step DESC, l.rowid DESC LIMIT 1), MIN(m.value), MAX(m.value) "
          "FROM metrics m WHERE m.run_id = ?1 GROUP BY m.name ORDER BY m.name");
  st.bind(1, run_id);
  std::vector<MetricSummary> out;
  while (st.step()) out.push_back({st.text(0), st.i64(1), st.i64(2), st.f64(3), st.f64(4), st.f64(5)});
  return out;
}

std::vector<Artifact> RunStore::artifacts(std::int64_t run_id) const {
  Stmt st(db_, path_, "SELECT kind, path, step, time FROM artifacts WHERE run_id = ?1 ORDER BY rowid");
  st.bind(1, run_id);
  std::vector<Artifact> out;
  while (st.step()) out.push_back({st.text(0), st.text(1), st.i64(2), st.f64(3)});
  return out;
}

std::int64_t RunStore::count_metrics(std::int64_t run_id) const {
  Stmt st(db_, path_, "SELECT COUNT(*) FROM metrics WHERE run_id = ?1");
  st.bind(1, run_id).step();
  return st.i64(0);
}

}  // namespace bertx
