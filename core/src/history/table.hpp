// history/table.hpp - seed stability tables (`bertx runs table`): one row per seed of a sweep or an
// experiment name (the newest finished run of that seed), one column per metric reduced to one number
// (final value, or best: lowest for loss-like names, highest otherwise), then mean, sample standard
// deviation (n-1), min and max of each column. Column wall_s is each run's wall time (kWallColumn).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "history/format.hpp"

namespace bertx {
class RunStore;
}

namespace bertx::history {

struct ColumnStats {
  std::size_t n = 0;                             // values present (NaN values count and make the results NaN)
  double mean = 0, stdev = 0, min = 0, max = 0;  // NaN when n == 0; stdev (sample, n-1) NaN when n < 2
};
ColumnStats column_stats(const std::vector<double>& values);

// The column `--metric wall_s` names: each run's wall time from its record (ended_at - started_at, seconds; a
// resumed run's includes the pause), not a logged metric.
inline constexpr const char* kWallColumn = "wall_s";

// --best direction: true for names containing "loss", "perplexity", "ppl" or "error" (case-insensitive).
bool lower_is_better(const std::string& metric);

struct TableQuery {
  std::optional<std::int64_t> sweep_id;  // either a sweep ...
  std::string experiment;                // ... or a [run] name
  std::vector<std::string> metrics;      // at least one
  bool best = false;                     // false: final values
};

struct SeedRow {
  std::int64_t seed = 0, run_id = 0;
  std::vector<std::optional<double>> values;  // per metric; nullopt: the run never logged it
};

struct SeedTable {
  std::string title;  // "sweep 3 (squad): final values, 5 seeds"
  std::vector<std::string> metrics;
  std::string reduce;                 // "final" | "best"
  std::vector<SeedRow> rows;          // ascending seed
  std::vector<ColumnStats> stats;     // per metric
  std::vector<std::string> left_out;  // "seed 4: run 12 failed" - seeds without a finished run
};

// Throws bertx::Error for an unknown sweep, a name without runs, no finished run, or a metric that no
// selected run logged (naming the flag and listing the metrics that exist).
SeedTable seed_table(const RunStore& store, const TableQuery& query);
std::string format_seed_table(const SeedTable& table, Format format, int precision);

}  // namespace bertx::history
