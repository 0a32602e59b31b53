// history/export.hpp - `bertx runs export`: the store's rows for pandas & co. Metrics in long format (one
// row per run, step and metric: run, name, seed, sweep, status, step, metric, value, time) or one row per
// run (its record and the final value of each metric), as CSV with a header or as JSON lines; or TensorBoard event
// files, a folder per run, so that TensorBoard shows the seeds of a sweep side by side.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace bertx {
class RunStore;
struct RunRecord;
}  // namespace bertx

namespace bertx::history {

enum class ExportFormat { Csv, JsonLines, TensorBoard };
ExportFormat parse_export_format(const std::string& name);  // csv | jsonl | tensorboard; throws naming --format

// `metrics` empty: every metric. Returns the number of rows written.
std::size_t export_metrics(const RunStore& store, const std::vector<RunRecord>& runs,
                           const std::vector<std::string>& metrics, ExportFormat format, std::ostream& out);
// TensorBoard: below `folder`, one folder per run, run<id>-<name>-seed<seed>, holding one event file with an Event
// per logged step (its metrics as scalars, the row's time as wall time). A folder from an earlier export is
// replaced whole (written beside it as <name>.part, then swapped in). Returns the number of scalars written.
std::size_t export_tensorboard(const RunStore& store, const std::vector<RunRecord>& runs,
                               const std::vector<std::string>& metrics, const std::string& folder);
std::size_t export_runs(const RunStore& store, const std::vector<RunRecord>& runs, ExportFormat format,
                        std::ostream& out);

}  // namespace bertx::history
