// report.hpp - one logging call site for a run: a human line on the console (spdlog), a JSON object in the
// run's report.jsonl (DLLogger-like; every record carries "run": the run id), metric rows in the run store, and the
// same scalars in a TensorBoard event file when asked (tboard/events.hpp). In a data-parallel job only rank 0
// writes the files and the store; the other ranks' lines go to the console at debug level (`-v` shows them).
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace bertx {

namespace tboard {
class EventWriter;
}
class RunStore;
using Metrics = std::vector<std::pair<std::string, double>>;

class Reporter {
 public:
  // store may be null (dry runs, tools); jsonl_path empty = no JSON file. total_steps 0 = unknown (no ETA).
  // rank > 0: store and jsonl_path are ignored (nothing is written), lines are "rank N: ..." at debug level.
  Reporter(RunStore* store, std::int64_t run_id, const std::string& jsonl_path, std::int64_t total_steps, int rank = 0);
  ~Reporter();
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // Metrics at training step `step` (1-based count of finished steps). progress = false for lines that are
  // not training progress (evaluation, benchmark summary): no rate/ETA, and they do not move the rate window.
  void step(std::int64_t step, const Metrics& metrics, bool progress = true);
  // The number of steps the run will take, once known (epoch-based runs learn it from the reader).
  void set_total_steps(std::int64_t total_steps) { total_steps_ = total_steps; }
  // A free-form event line ("checkpoint", "eval", "start", ...).
  void event(const std::string& type, const std::string& message);
  // From now on every step()'s metrics also go to a new events.out.tfevents.* file in `folder` (rank 0; other
  // ranks: nothing). restart_from >= 0: a restarted run that logs again after step restart_from; its file opens
  // with a SessionLog START at restart_from + 1, so TensorBoard drops what the stopped process logged after it.
  // A failed write later warns once and stops the file; the store keeps every value (`bertx runs export --format
  // tensorboard` writes them again).
  void write_tensorboard(const std::string& folder, std::int64_t restart_from);
  // Final summary: written once at the end, also as {"type":"summary",...}.
  void summary(const std::string& status, const Metrics& final_metrics);

  // "1h02m03s"-style duration.
  static std::string format_duration(double seconds);

 private:
  void write_json(const std::string& line);
  void console(const std::string& line) const;
  RunStore* store_;
  std::int64_t run_id_;
  std::int64_t total_steps_;
  std::int64_t first_step_ = -1;
  int rank_ = 0;
  std::FILE* jsonl_ = nullptr;
  std::string jsonl_path_;
  std::unique_ptr<tboard::EventWriter> events_;
  std::chrono::steady_clock::time_point start_, first_step_time_;
};

// A resumed run replays the steps after its checkpoint: drops run `run_id`'s "step" and "metrics" records of
// report.jsonl with a step after `after_step` (logged by the process that was stopped) and torn lines, so that
// every step of the run is in the file once (other runs' records, e.g. phase 1's, stay). Rewrites the file
// atomically, only when something is dropped; returns how many lines were. A missing file is nothing to do.
std::size_t drop_report_steps_after(const std::string& jsonl_path, std::int64_t run_id, std::int64_t after_step);

}  // namespace bertx
