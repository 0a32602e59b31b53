// run.cpp - execute_run: store record -> config.toml -> train -> finished / interrupted / failed.
// In a data-parallel job (launcher environment, see host/rendezvous.hpp) rank 0 alone keeps the record,
// config.toml and report.jsonl; the other ranks train with nothing but console output.
#include "host/run.hpp"

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "bertx/error.hpp"
#include "base/fs_util.hpp"
#include "host/plugin_host.hpp"
#include "host/report.hpp"
#include "base/signals.hpp"
#include "store/store.hpp"
#include "host/progress.hpp"
#include "host/train_options.hpp"

namespace bertx {

namespace {

// Adds the missing "checkpoint" artifact rows of the run's complete checkpoint folders.
void register_checkpoints(RunStore& store, std::int64_t run_id, const std::string& root) {
  const std::vector<Artifact> known = store.artifacts(run_id);
  for (std::int64_t step : checkpoint_steps(root)) {
    const std::string dir = checkpoint_dir(root, step);
    const bool listed = std::any_of(known.begin(), known.end(),
                                    [&](const Artifact& a) { return a.kind == "checkpoint" && a.path == dir; });
    if (!listed) store.add_artifact(run_id, "checkpoint", dir, step);
  }
}

// A run the same command may start over in: interrupted (killed or stopped) before any checkpoint, with the
// same name, config and sweep.
bool restartable(const RunStore& store, const RunRecord& run, const ResolvedConfig& config,
                 std::optional<std::int64_t> sweep_id) {
  if (run.status != RunStatus::Interrupted || run.name != config.run.name || run.config_hash != config.hash ||
      run.sweep_id != sweep_id)
    return false;
  const std::vector<Artifact> artifacts = store.artifacts(run.id);
  return std::none_of(artifacts.begin(), artifacts.end(), [](const Artifact& a) { return a.kind == "checkpoint"; });
}

}  // namespace

int execute_run(const ResolvedConfig& config, const PluginHost& host, const TrainFn& train,
                std::optional<std::int64_t> sweep_id) {
  const Rendezvous rendezvous = rendezvous_from_env();
  const bool writer = rendezvous.rank == 0;
  std::unique_ptr<RunStore> store;
  std::int64_t run_id = 0;
  bool fresh = false;
  std::int64_t restart_from = -1;  // a continued run record: the step it logs again after
  if (writer) {
    // A read-only or missing-permission output folder is an error now, before any record or file is made.
    require_writable_dir(config.run.output_dir, "[run] output_dir");
    store = RunStore::open(config.run.store);
    store->reap_stale_runs();
    if (sweep_id && !store->get_sweep(*sweep_id))
      throw Error("--sweep-id " + std::to_string(*sweep_id) + ": no such sweep in " + store->path() +
                  " (bertx sweep sets it)");
    NewRun nr;
    nr.name = config.run.name;
    nr.experiment = config.experiment;
    nr.config = config.text;
    nr.config_hash = config.hash;
    nr.seed = config.run.seed;
    nr.output_dir = config.run.output_dir;
    nr.plugins = host.plugins_json();
    nr.world_size = rendezvous.world_size;
    nr.sweep_id = sweep_id;
    // A checkpoint of this phase means a restarted job: continue its run record instead of starting another.
    const std::optional<Progress> resume = resumable(config);
    if (resume && store->reopen_run(resume->run_id, resume->step)) {
      run_id = resume->run_id;
      restart_from = resume->step;
      spdlog::info("continuing run {} from its checkpoint at step {}", run_id, resume->step);
      // What the stopped process logged after that step is replayed: its report.jsonl records go like its
      // store rows did. Its newest checkpoints may lack their store rows (killed right after the rename).
      if (const std::size_t n = drop_report_steps_after(config.run.output_dir + "/report.jsonl", run_id, resume->step))
        spdlog::info("report.jsonl: {} record(s) after step {} dropped (they are logged again)", n, resume->step);
      register_checkpoints(*store, run_id, checkpoint_root(config));
      if (resume->config_hash != config.hash)
        spdlog::warn("the config changed since that checkpoint was written (hash {} -> {})", resume->config_hash,
                     config.hash);
    }
    // Killed before its first checkpoint, the same command starts over in the same record (one record per
    // run, however often it was killed); a failed run, a changed config or another sweep gets a new one.
    if (run_id == 0 && !resume && config.sections.count("train") &&
        train_fields().read(config.sections.at("train")).resume == Resume::Auto)
      if (auto last = store->last_run_in(config.run.output_dir); last && restartable(*store, *last, config, sweep_id)) {
        store->reopen_run(last->id, 0);
        run_id = last->id;
        restart_from = 0;
        drop_report_steps_after(config.run.output_dir + "/report.jsonl", run_id, 0);
        spdlog::info("continuing run {} from the start: it was interrupted before its first checkpoint", run_id);
      }
    fresh = run_id == 0;
    if (fresh) run_id = store->begin_run(nr);
  }

  install_stop_handlers();
  const std::string out = config.run.output_dir;
  int code = 1;
  try {
    if (writer)
      write_file_atomic(out + "/config.toml", "# bertx run " + std::to_string(run_id) + " of " + config.experiment +
                                                  " (config hash " + config.hash + ")\n" + config.text);
    const std::int64_t total =
        config.sections.count("train") ? train_fields().read(config.sections.at("train")).max_steps : 0;
    Reporter report(store.get(), run_id, out + "/report.jsonl", total, rendezvous.rank);
    if (config.run.tensorboard) report.write_tensorboard(out, restart_from);
    if (fresh) {
      store->add_artifact(run_id, "config", out + "/config.toml", 0);
      store->add_artifact(run_id, "report", out + "/report.jsonl", 0);
    }
    report.event("start", "run " + std::to_string(run_id) + " '" + config.run.name + "' seed " +
                              std::to_string(config.run.seed) + (store ? ", store " + store->path() : "") +
                              (rendezvous.distributed() ? ", " + rendezvous.describe() : ""));
    RunContext ctx{config, host, store.get(), report, run_id, rendezvous};
    const TrainResult result = train(ctx);
    if (result == TrainResult::Interrupted || stop_requested()) {
      const int sig = stop_signal();
      if (store)
        store->finish_run(run_id, RunStatus::Interrupted, sig ? "stopped by signal " + std::to_string(sig) : "stopped");
      report.summary("interrupted", {});
      code = 128 + (sig ? sig : 2);
    } else {
      if (store) store->finish_run(run_id, RunStatus::Finished);
      report.summary("finished", {});
      code = 0;
    }
  } catch (const std::exception& e) {
    if (writer)
      spdlog::error("run {} failed: {}", run_id, e.what());
    else
      spdlog::error("rank {} of run '{}' failed: {}", rendezvous.rank, config.run.name, e.what());
    try {
      if (store) store->finish_run(run_id, RunStatus::Failed, e.what());
    } catch (const std::exception& e2) {  // e.g. the store's disk is full too: the next start marks it interrupted
      spdlog::error("run {}: the failure could not be recorded in the run store: {}", run_id, e2.what());
    }
    code = 1;
  }
  return code;
}

}  // namespace bertx
