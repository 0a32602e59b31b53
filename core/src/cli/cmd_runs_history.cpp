// cmd_runs_history.cpp - `bertx runs table|plot|export|gc`: the run history built on the store's rows
// (the work is in core/src/history/; this file only parses flags and prints).
#include <cstdio>
#include <iostream>

#include "bertx/error.hpp"
#include "commands.hpp"
#include "history/table.hpp"
#include "store.hpp"

namespace bertx::cli {

namespace {

void add_table(CLI::App& runs, std::shared_ptr<std::string> store_path, int& exit_code) {
  struct Args {
    std::int64_t sweep = 0;
    std::string experiment, format = "text";
    std::vector<std::string> metrics;
    bool final = false, best = false;
    int precision = 4;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = runs.add_subcommand("table", "seed stability table: one row per seed, then mean, std (n-1), min, max");
  auto* sweep = cmd->add_option("--sweep", a->sweep, "runs of this sweep (see `bertx sweep`)");
  auto* exp = cmd->add_option("--experiment,--name", a->experiment, "runs with this [run] name");
  sweep->excludes(exp);
  cmd->add_option("--metric", a->metrics, "metric column (repeatable), e.g. --metric f1 --metric exact_match")->required();
  auto* fin = cmd->add_flag("--final", a->final, "each run's value at its last logged step (default)");
  cmd->add_flag("--best", a->best, "each run's best value: lowest for loss/perplexity/error, highest otherwise")->excludes(fin);
  cmd->add_option("--format", a->format, "text | markdown | csv | json")->capture_default_str();
  cmd->add_option("--precision", a->precision, "decimals in text and markdown")->capture_default_str()->check(CLI::Range(0, 17));
  cmd->footer("A seed's row is its newest finished run; seeds without one are listed on stderr. CSV and JSON "
              "carry full precision.");
  cmd->callback([store_path, a, sweep, &exit_code] {
    const auto format = history::parse_format(a->format);
    if (!sweep->count() && a->experiment.empty()) throw Error("runs table needs --sweep ID or --experiment NAME");
    auto store = RunStore::open(*store_path);
    store->reap_stale_runs();
    history::TableQuery q;
    if (sweep->count()) q.sweep_id = a->sweep;
    q.experiment = a->experiment;
    q.metrics = a->metrics;
    q.best = a->best;
    const auto table = history::seed_table(*store, q);
    std::cout << history::format_seed_table(table, format, a->precision);
    for (const auto& s : table.left_out) std::fprintf(stderr, "left out (no finished run): %s\n", s.c_str());
    exit_code = 0;
  });
}

}  // namespace

void add_runs_history_commands(CLI::App& runs, std::shared_ptr<std::string> store_path, int& exit_code) {
  add_table(runs, store_path, exit_code);
}

}  // namespace bertx::cli
