// history/export.hpp - `bertx runs export`: the store's rows for pandas & co. Metrics in long format (one
// row per run, step and metric: run, name, seed, sweep, status, step, metric, value, time) or one row per
// run (its record and the final value of each metric), as CSV with a header or as JSON lines.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace bertx {
class RunStore;
struct RunRecord;
}  // namespace bertx

namespace bertx::history {

enum class ExportFormat { Csv, JsonLines };
ExportFormat parse_export_format(const std::string& name);  // csv | jsonl; throws naming --format

// `metrics` empty: every metric. Returns the number of rows written.
std::size_t export_metrics(const RunStore& store, const std::vector<RunRecord>& runs,
                           const std::vector<std::string>& metrics, ExportFormat format, std::ostream& out);
std::size_t export_runs(const RunStore& store, const std::vector<RunRecord>& runs, ExportFormat format,
                        std::ostream& out);

}  // namespace bertx::history
