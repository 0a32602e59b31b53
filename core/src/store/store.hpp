// store.hpp - the experiment store: one SQLite file that records every run, its metrics and artifacts.
//
// Schema (version in PRAGMA user_version, migrated forward on open):
//   runs(id, name, experiment, config, config_hash, seed, status, started_at, ended_at, host, pid,
//        world_size, bertx_version, torch_version, git_rev, output_dir, plugins, message, sweep_id, hosts, process)
//   metrics(run_id, step, name, value, time)       -- one row per (step, name) logged
//   artifacts(run_id, kind, path, step, time)      -- checkpoints, prediction files, reports
//   sweeps(id, experiment, created_at, spec)       -- one row per `bertx sweep` (spec: JSON, see history/sweep.hpp)
// WAL journal, busy timeout, every write in one BEGIN IMMEDIATE transaction: several processes may write
// at once without losing rows, and a process killed mid-write leaves a consistent file (SQLite's own
// journal guarantees it; synchronous=NORMAL in WAL mode survives process crashes, not power loss).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct sqlite3;

namespace bertx {

enum class RunStatus { Running, Finished, Failed, Interrupted };
const char* run_status_name(RunStatus s);
RunStatus parse_run_status(const std::string& s);  // throws bertx::Error listing the valid names

struct NewRun {
  std::string name;         // [run] name
  std::string experiment;   // path of the experiment file as given
  std::string config;       // fully resolved config (TOML text)
  std::string config_hash;  // hash of `config`
  std::int64_t seed = 0;
  std::string output_dir;
  std::string plugins;  // JSON array of {name, version, path} of the loaded plugins
  int world_size = 1;
  std::optional<std::int64_t> sweep_id;
};

struct RunRecord {
  std::int64_t id = 0;
  std::string name, experiment, config, config_hash;
  std::int64_t seed = 0;
  RunStatus status = RunStatus::Running;
  double started_at = 0, ended_at = 0;  // unix seconds; ended_at 0 while running
  std::string host;
  std::int64_t pid = 0;
  int world_size = 1;
  std::string bertx_version, torch_version, git_rev, output_dir, plugins, message;
  std::optional<std::int64_t> sweep_id;
  std::vector<std::string> hosts;  // host of every data-parallel rank (index = rank); empty until set_ranks
  std::string process;             // JSON: threads, BLAS, OpenMP wait policy, malloc settings (set_process)
};

struct MetricRow {
  std::int64_t step;
  std::string name;
  double value;
  double time;  // unix seconds
};

struct MetricSummary {
  std::string name;
  std::int64_t count;
  std::int64_t last_step;
  double last, min, max;
};

struct Artifact {
  std::string kind, path;
  std::int64_t step;
  double time;
};

struct SweepRecord {
  std::int64_t id = 0;
  std::string experiment;  // experiment file (absolute path)
  double created_at = 0;
  std::string spec;  // JSON
};

// How one metric of one run becomes one number (runs table --final / --best).
enum class MetricReduce { Final, Min, Max };

struct RunFilter {
  std::optional<std::string> name;  // exact [run] name
  std::optional<std::int64_t> sweep_id;
  std::optional<RunStatus> status;
  std::optional<double> since;  // started_at >= since
  std::size_t limit = 0;        // 0 = all; newest first
};

class RunStore {
 public:
  // Opens (creating the file and its folder if needed) and migrates the schema. Throws bertx::Error
  // naming the path on failure (not a database, newer schema than this bertx knows, unwritable).
  static std::unique_ptr<RunStore> open(const std::string& path);
  ~RunStore();
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  const std::string& path() const { return path_; }
  int schema_version() const;

  // Inserts a run with status running, this host, this pid, build versions. Returns its id.
  std::int64_t begin_run(const NewRun& run);
  // Appends metrics of one step in one transaction.
  void log_metrics(std::int64_t run_id, std::int64_t step, const std::vector<std::pair<std::string, double>>& values);
  void add_artifact(std::int64_t run_id, const std::string& kind, const std::string& path, std::int64_t step);
  // The ranks of a (data-parallel) run once they joined: world_size = hosts.size(), hosts[r] = rank r's host.
  void set_ranks(std::int64_t run_id, const std::vector<std::string>& hosts);
  // How rank 0's process was set up for speed (process_setup.hpp), as one JSON object.
  void set_process(std::int64_t run_id, const std::string& settings_json);
  void finish_run(std::int64_t run_id, RunStatus status, const std::string& message = "");

  // Continues a run after a resume from its checkpoint at `after_step`: status running again, this host and
  // pid, and metric rows logged after that step (by the killed process) deleted, so the resumed process
  // logs them once. Returns false when the store has no such run.
  bool reopen_run(std::int64_t run_id, std::int64_t after_step);
  // The newest run record whose output folder is output_dir (what a restart without checkpoints may continue).
  std::optional<RunRecord> last_run_in(const std::string& output_dir) const;
  // Marks runs of this host still 'running' whose process is gone as interrupted. Returns how many.
  // LockWait::Skip (readers: `bertx runs`) reaps only if the write lock is free now and otherwise leaves the
  // records to the next caller, so a reader never queues behind a writer.
  enum class LockWait { Wait, Skip };
  int reap_stale_runs(LockWait wait = LockWait::Wait);

  std::vector<RunRecord> list_runs(const RunFilter& filter = {}) const;
  std::optional<RunRecord> get_run(std::int64_t id) const;
  std::vector<MetricRow> metrics(std::int64_t run_id, const std::string& name = "") const;
  std::vector<MetricSummary> metric_summary(std::int64_t run_id) const;
  std::vector<Artifact> artifacts(std::int64_t run_id) const;
  std::int64_t count_metrics(std::int64_t run_id) const;

  // store_history.cpp: what `bertx runs table|gc` and `bertx sweep` need.
  // Final: the value at the highest step (latest row if a step was logged twice; NaN if that was NaN).
  // Min/Max: over the non-NaN values. nullopt when the run has no such row.
  std::optional<double> metric_value(std::int64_t run_id, const std::string& name, MetricReduce how) const;
  std::int64_t create_sweep(const std::string& experiment, const std::string& spec);
  std::optional<SweepRecord> get_sweep(std::int64_t id) const;
  std::vector<SweepRecord> list_sweeps(const std::string& experiment = "") const;  // oldest first; "" = all
  // Deletes the artifact row(s) of this run with this kind and path; returns how many.
  int remove_artifact(std::int64_t run_id, const std::string& kind, const std::string& path);

 private:
  RunStore(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  std::string path_;
  sqlite3* db_;
};

}  // namespace bertx
