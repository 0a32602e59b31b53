// test_sweep_plan.cpp - the torch-free half of `bertx sweep` (core/src/history/sweep.*): seed lists, the
// sweep found again on a re-run, which seeds still need a run, each seed's command, the SLURM script.
#include <doctest/doctest.h>

#include <functional>

#include "bertx/error.hpp"
#include "history/sweep.hpp"
#include "store/store.hpp"
#include "test_util.hpp"

using namespace bertx;
using bertx::test::error_of;
using namespace bertx::history;

namespace {

SweepSpec spec_of(const std::string& out, std::vector<std::string> sets = {}) {
  SweepSpec s;
  s.experiment = "/x/exp.toml";
  s.name = "tiny";
  s.sets = std::move(sets);
  s.output_dir = out;
  s.seeds = {0, 1, 2};
  return s;
}

std::int64_t add_run(RunStore& store, std::int64_t sweep, std::int64_t seed, std::optional<RunStatus> end) {
  NewRun nr;
  nr.name = "tiny";
  nr.seed = seed;
  nr.plugins = "[]";
  nr.sweep_id = sweep;
  const auto id = store.begin_run(nr);
  if (end) store.finish_run(id, *end);
  return id;
}

}  // namespace

TEST_CASE("seed lists: ranges and lists and negative seeds and one-line errors") {
  CHECK(parse_seeds("0-9") == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(parse_seeds("5,1,3-4,1") == std::vector<std::int64_t>{1, 3, 4, 5});
  CHECK(parse_seeds("-2-0") == std::vector<std::int64_t>{-2, -1, 0});
  CHECK(parse_seeds("42") == std::vector<std::int64_t>{42});
  CHECK(format_seeds({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8");
  CHECK(error_of([] { parse_seeds("0-x"); }) ==
        "--seeds '0-x': 'x' is not an integer (expected seeds and ranges such as 0-9 or 1,3,5-7)");
  CHECK(error_of([] { parse_seeds("1,,2"); }).rfind("--seeds '1,,2': '' is not an integer", 0) == 0);
  CHECK(error_of([] { parse_seeds("9-3"); }) == "--seeds '9-3': range 9-3 ends before it starts");
  CHECK(error_of([] { parse_seeds("0-1000000"); }).find("more than 100000") != std::string::npos);
}

TEST_CASE("a re-run finds its sweep again and another sweep may not share its folder") {
  test::TempDir d;
  auto store = RunStore::open(d / "s.db");
  const auto a = find_or_create_sweep(*store, spec_of("/o/a"));
  auto more_seeds = spec_of("/o/a");
  more_seeds.seeds = {0, 1, 2, 3, 4};
  CHECK(find_or_create_sweep(*store, more_seeds) == a);
  const auto b = find_or_create_sweep(*store, spec_of("/o/b", {"train.learning_rate=1e-4"}));
  CHECK(b != a);
  CHECK(store->list_sweeps().size() == 2);
  const std::string clash = error_of([&] { find_or_create_sweep(*store, spec_of("/o/a", {"train.max_steps=3"})); });
  CHECK(clash.rfind("run.output_dir /o/a already holds the seeds of sweep 1", 0) == 0);
}

TEST_CASE("seed plan: finished seeds skipped and failed or interrupted ones retried and running ones left alone") {
  test::TempDir d;
  auto store = RunStore::open(d / "s.db");
  const auto sweep = find_or_create_sweep(*store, spec_of("/o/a"));
  const auto other = find_or_create_sweep(*store, spec_of("/o/b", {"x.y=1"}));
  add_run(*store, sweep, 0, RunStatus::Failed);
  const auto fin0 = add_run(*store, sweep, 0, RunStatus::Finished);  // a retry that finished
  const auto int1 = add_run(*store, sweep, 1, RunStatus::Interrupted);
  const auto run2 = add_run(*store, sweep, 2, std::nullopt);  // this process: alive
  add_run(*store, other, 3, RunStatus::Finished);             // another sweep's seed 3
  const auto plan = plan_seeds(*store, sweep, {0, 1, 2, 3});
  REQUIRE(plan.size() == 4);
  CHECK(plan[0].action == SeedPlan::Action::Finished);
  CHECK(plan[0].run_id == fin0);
  CHECK(plan[1].action == SeedPlan::Action::Run);
  CHECK(plan[1].note == "run " + std::to_string(int1) + " interrupted: retrying");
  CHECK(plan[2].action == SeedPlan::Action::Running);
  CHECK(plan[2].run_id == run2);
  CHECK(plan[3].action == SeedPlan::Action::Run);
  CHECK(plan[3].run_id == 0);
}

TEST_CASE("each seed's command and the SLURM array script") {
  const auto spec = spec_of("/o/my out", {"train.max_steps=5"});
  CHECK(seed_run_args(spec, 7, 3) == std::vector<std::string>{"run", "/x/exp.toml", "--set", "train.max_steps=5",
                                                              "--set", "run.seed=3", "--set",
                                                              "run.output_dir=/o/my out/seed-3", "--sweep-id", "7"});
  SlurmOptions o;
  o.bertx = "/opt/bertx/bin/bertx";
  o.workdir = "/work";
  o.sbatch = {"--time=01:00:00"};
  o.max_parallel = 2;
  const std::string s = slurm_script(spec, 7, {1, 2, 3, 8}, o);
  CHECK(s.rfind("#!/bin/bash\n", 0) == 0);
  CHECK(s.find("\n#SBATCH --array=1-3,8%2\n") != std::string::npos);
  CHECK(s.find("\n#SBATCH --time=01:00:00\n") != std::string::npos);
  CHECK(s.find("\nexec /opt/bertx/bin/bertx run /x/exp.toml --set train.max_steps=5 --set run.seed=\"$SEED\" --set "
               "'run.output_dir=/o/my out/seed-'\"$SEED\"'' --sweep-id 7\n") != std::string::npos);
  CHECK(error_of([&] { slurm_script(spec, 7, {-1, 0}, o); }).find("seed -1 is negative") != std::string::npos);
  CHECK(shell_quote("it's") == "'it'\\''s'");
}
