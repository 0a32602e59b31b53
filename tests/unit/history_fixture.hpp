// history_fixture.hpp - a run store filled with fixed, hand-picked values for the run history tests
// (test_history.cpp through the library, test_runs_cli.cpp through the binary), so that every expected
// table cell can be derived by hand:
//   sweep 1 ("/x/exp.toml"), runs named "squad":
//     run 1 seed 0 finished  f1 @10 0.75 @20 0.25   exact_match @20 60   loss @10 2.0 @20 1.5
//     run 2 seed 1 failed    f1 @10 0.125
//     run 3 seed 1 finished  f1 @10 0.125 @20 0.25  exact_match @20 70
//     run 4 seed 2 finished  f1 @20 0.25            exact_match @20 80
//     run 5 seed 3 finished  f1 @20 1.25            (no exact_match)
//     run 6 seed 4 failed    (no metrics)
//   sweep 2, run 7 "other" seed 0 finished f1 @20 100 - must never show up in sweep 1's table.
// final f1 = {0.25, 0.25, 0.25, 1.25}: mean 0.5, ss 0.75, sample var 0.25, std 0.5, min 0.25, max 1.25
// final exact_match = {60, 70, 80}: mean 70, std 10, min 60, max 80
// best f1 = {0.75, 0.25, 0.25, 1.25}: mean 0.625
#pragma once
#include <string>

#include "store/store.hpp"

namespace bertx::test {

inline void fill_history_store(const std::string& path) {
  auto store = RunStore::open(path);
  const auto sweep = store->create_sweep("/x/exp.toml", "{}");
  const auto other_sweep = store->create_sweep("/x/other.toml", "{}");
  auto run = [&](const std::string& name, std::int64_t seed, std::int64_t sweep_id) {
    NewRun nr;
    nr.name = name;
    nr.experiment = "/x/exp.toml";
    nr.config = "[run]\nname = \"" + name + "\"\nseed = " + std::to_string(seed) + "\n";
    nr.config_hash = "hash" + std::to_string(seed);
    nr.seed = seed;
    nr.plugins = "[]";
    nr.sweep_id = sweep_id;
    return store->begin_run(nr);
  };
  const auto r1 = run("squad", 0, sweep);
  store->log_metrics(r1, 10, {{"f1", 0.75}, {"loss", 2.0}});
  store->log_metrics(r1, 20, {{"f1", 0.25}, {"exact_match", 60}, {"loss", 1.5}});
  store->finish_run(r1, RunStatus::Finished);
  const auto r2 = run("squad", 1, sweep);
  store->log_metrics(r2, 10, {{"f1", 0.125}});
  store->finish_run(r2, RunStatus::Failed, "diverged");
  const auto r3 = run("squad", 1, sweep);
  store->log_metrics(r3, 10, {{"f1", 0.125}});
  store->log_metrics(r3, 20, {{"f1", 0.25}, {"exact_match", 70}});
  store->finish_run(r3, RunStatus::Finished);
  const auto r4 = run("squad", 2, sweep);
  store->log_metrics(r4, 20, {{"f1", 0.25}, {"exact_match", 80}});
  store->finish_run(r4, RunStatus::Finished);
  const auto r5 = run("squad", 3, sweep);
  store->log_metrics(r5, 20, {{"f1", 1.25}});
  store->finish_run(r5, RunStatus::Finished);
  const auto r6 = run("squad", 4, sweep);
  store->finish_run(r6, RunStatus::Failed, "out of memory");
  const auto r7 = run("other", 0, other_sweep);
  store->log_metrics(r7, 20, {{"f1", 100}});
  store->finish_run(r7, RunStatus::Finished);
}

// Expected outputs of `runs table --sweep 1 --metric f1 --metric exact_match` (derived above).
inline const char* kExpectedMarkdown =
    "| seed | run | f1 | exact_match |\n"
    "|---|---:|---:|---:|\n"
    "| 0 | 1 | 0.2500 | 60.0000 |\n"
    "| 1 | 3 | 0.2500 | 70.0000 |\n"
    "| 2 | 4 | 0.2500 | 80.0000 |\n"
    "| 3 | 5 | 1.2500 | - |\n"
    "| mean |  | 0.5000 | 70.0000 |\n"
    "| std |  | 0.5000 | 10.0000 |\n"
    "| min |  | 0.2500 | 60.0000 |\n"
    "| max |  | 1.2500 | 80.0000 |\n";

inline const char* kExpectedCsv =
    "seed,run,f1,exact_match\n"
    "0,1,0.25,60\n"
    "1,3,0.25,70\n"
    "2,4,0.25,80\n"
    "3,5,1.25,\n"
    "mean,,0.5,70\n"
    "std,,0.5,10\n"
    "min,,0.25,60\n"
    "max,,1.25,80\n";

}  // namespace bertx::test
