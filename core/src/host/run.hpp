// run.hpp - the life cycle of one run around a training function: record it in the store, write the
// resolved config next to its outputs, report, react to SIGINT/SIGTERM, record how it ended.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "host/config.hpp"
#include "host/rendezvous.hpp"

namespace bertx {

class PluginHost;
class Reporter;
class RunStore;

struct RunContext {
  const ResolvedConfig& config;
  const PluginHost& host;
  RunStore* store;  // null on data-parallel ranks other than 0 (they record nothing)
  Reporter& report;
  std::int64_t run_id;           // 0 on ranks other than 0
  const Rendezvous& rendezvous;  // this process's rank in the job (world size 1 without a launcher)
};

enum class TrainResult { Finished, Interrupted };

// The training function checks bertx::stop_requested() between steps and returns Interrupted after saving.
using TrainFn = std::function<TrainResult(RunContext&)>;

// Returns the process exit code: 0 finished, 128+signal interrupted, 1 failed (error logged and recorded).
// Writes <output_dir>/config.toml (atomically) and appends to <output_dir>/report.jsonl - on rank 0 only
// when the environment describes a multi-process job (rendezvous_from_env).
// `sweep_id` (bertx sweep's children) links a new run record to that sweep; it must exist in the store.
int execute_run(const ResolvedConfig& config, const PluginHost& host, const TrainFn& train,
                std::optional<std::int64_t> sweep_id = std::nullopt);

}  // namespace bertx
