// store_history.cpp - RunStore queries for the run history commands (runs table/gc, sweep): one number
// per metric of a run, the sweeps table, artifact removal. Kept apart from store.cpp (life cycle writes).
#include <sqlite3.h>

#include "store/store.hpp"
#include "store/store_sql.hpp"

namespace bertx {
using namespace store_detail;

std::optional<double> RunStore::metric_value(std::int64_t run_id, const std::string& name, MetricReduce how) const {
  // Each statement is an index range scan of metrics(run_id, name, step); Final reads one row of it.
  const char* sql = nullptr;
  switch (how) {
    case MetricReduce::Final:
      sql = "SELECT value, 1 FROM metrics WHERE run_id = ?1 AND name = ?2 ORDER BY step DESC, rowid DESC LIMIT 1";
      break;
    case MetricReduce::Min:  // MIN/MAX skip NULLs (stored NaNs); COUNT(*) tells "no rows" from "only NaNs"
      sql = "SELECT MIN(value), COUNT(*) FROM metrics WHERE run_id = ?1 AND name = ?2";
      break;
    case MetricReduce::Max:
      sql = "SELECT MAX(value), COUNT(*) FROM metrics WHERE run_id = ?1 AND name = ?2";
      break;
  }
  Stmt st(db_, path_, sql);
  st.bind(1, run_id).bind(2, name);
  if (!st.step() || st.i64(1) == 0) return std::nullopt;
  return st.f64(0);  // NULL (NaN, or only NaNs) reads back as NaN
}

std::int64_t RunStore::create_sweep(const std::string& experiment, const std::string& spec) {
  std::int64_t id = 0;
  write_txn(db_, path_, [&] {
    Stmt st(db_, path_, "INSERT INTO sweeps(experiment, created_at, spec) VALUES(?1, ?2, ?3)");
    st.bind(1, experiment).bind(2, unix_seconds()).bind(3, spec).step();
    id = sqlite3_last_insert_rowid(db_);
  });
  return id;
}

std::optional<SweepRecord> RunStore::get_sweep(std::int64_t id) const {
  Stmt st(db_, path_, "SELECT id, experiment, created_at, spec FROM sweeps WHERE id = ?1");
  if (!st.bind(1, id).step()) return std::nullopt;
  return SweepRecord{st.i64(0), st.text(1), st.f64(2), st.text(3)};
}

std::vector<SweepRecord> RunStore::list_sweeps(const std::string& experiment) const {
  Stmt st(db_, path_,
          "SELECT id, experiment, created_at, spec FROM sweeps WHERE ?1 = '' OR experiment = ?1 ORDER BY id");
  st.bind(1, experiment);
  std::vector<SweepRecord> out;
  while (st.step()) out.push_back({st.i64(0), st.text(1), st.f64(2), st.text(3)});
  return out;
}

int RunStore::remove_artifact(std::int64_t run_id, const std::string& kind, const std::string& path) {
  int removed = 0;
  write_txn(db_, path_, [&] {
    Stmt st(db_, path_, "DELETE FROM artifacts WHERE run_id = ?1 AND kind = ?2 AND path = ?3");
    st.bind(1, run_id).bind(2, kind).bind(3, path).step();
    removed = sqlite3_changes(db_);
  });
  return removed;
}

}  // namespace bertx
