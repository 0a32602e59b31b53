// cmd_runs_history.cpp - `bertx runs table|plot|export|gc`: the run history built on the store's rows
// (the work is in core/src/history/; this file only parses flags and prints).
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "bertx/error.hpp"
#include "commands.hpp"
#include "base/fs_util.hpp"
#include "history/export.hpp"
#include "history/gc.hpp"
#include "history/svg.hpp"
#include "history/table.hpp"
#include "store/store.hpp"

extern char** environ;

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
  CLI::App* cmd =
      runs.add_subcommand("table", "seed stability table: one row per seed, then mean, std (n-1), min, max");
  auto* sweep = cmd->add_option("--sweep", a->sweep, "runs of this sweep (see `bertx sweep`)");
  auto* exp = cmd->add_option("--experiment,--name", a->experiment, "runs with this [run] name");
  sweep->excludes(exp);
  cmd->add_option("--metric", a->metrics, "metric column (repeatable), e.g. --metric f1 --metric exact_match")
      ->required();
  auto* fin = cmd->add_flag("--final", a->final, "each run's value at its last logged step (default)");
  cmd->add_flag("--best", a->best, "each run's best value: lowest for loss/perplexity/error, highest otherwise")
      ->excludes(fin);
  cmd->add_option("--format", a->format, "text | markdown | csv | json")->capture_default_str();
  cmd->add_option("--precision", a->precision, "decimals in text and markdown")
      ->capture_default_str()
      ->check(CLI::Range(0, 17));
  cmd->footer(
      "A seed's row is its newest finished run; seeds without one are listed on stderr. CSV and JSON "
      "carry full precision.");
  cmd->callback([store_path, a, sweep, &exit_code] {
    const auto format = history::parse_format(a->format);
    if (!sweep->count() && a->experiment.empty()) throw Error("runs table needs --sweep ID or --experiment NAME");
    auto store = RunStore::open(*store_path);
    store->reap_stale_runs(RunStore::LockWait::Skip);  // a reader: never waits for the write lock
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

// rsvg-convert -o PNG SVG; throws naming --out when the converter is missing or fails.
void svg_to_png(const std::string& svg, const std::string& png) {
  std::vector<std::string> args_s = {"rsvg-convert", "-o", png, svg};
  std::vector<char*> argv;
  for (auto& a : args_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, "rsvg-convert", nullptr, nullptr, argv.data(), environ) != 0)
    throw Error("--out " + png + ": PNG needs rsvg-convert on PATH (librsvg2-bin); the SVG is written: " + svg);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw Error("--out " + png + ": rsvg-convert failed on " + svg);
}

void add_plot(CLI::App& runs, std::shared_ptr<std::string> store_path, int& exit_code) {
  struct Args {
    std::vector<std::int64_t> ids;
    std::string metric, out, title;
    bool log_y = false;
    int width = 800, height = 480;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd =
      runs.add_subcommand("plot", "metric curves of one or more runs, overlaid, as SVG (or PNG via rsvg-convert)");
  cmd->add_option("ids", a->ids, "run ids")->required();
  cmd->add_option("--metric", a->metric, "metric to plot against the step, e.g. loss")->required();
  cmd->add_option("--out", a->out, "FILE.svg, or FILE.png (writes FILE.svg and converts it with rsvg-convert)")
      ->required();
  cmd->add_option("--title", a->title, "title above the plot (default: the metric)");
  cmd->add_flag("--log-y", a->log_y, "logarithmic y axis");
  cmd->add_option("--width", a->width, "pixels")->capture_default_str()->check(CLI::Range(200, 10000));
  cmd->add_option("--height", a->height, "pixels")->capture_default_str()->check(CLI::Range(150, 10000));
  cmd->callback([store_path, a, &exit_code] {
    auto store = RunStore::open(*store_path);
    std::vector<history::Series> series;
    for (std::int64_t id : a->ids) {
      const auto r = store->get_run(id);
      if (!r)
        throw Error("runs plot: no run with id " + std::to_string(id) + " in " + *store_path +
                    " (see bertx runs list)");
      history::Series s{"run " + std::to_string(id) + ": " + r->name + " seed " + std::to_string(r->seed), {}};
      for (const auto& m : store->metrics(id, a->metric)) s.points.emplace_back(static_cast<double>(m.step), m.value);
      if (s.points.empty()) {
        std::string known;
        for (const auto& m : store->metric_summary(id)) known += (known.empty() ? "" : ", ") + m.name;
        throw Error("--metric " + a->metric + ": run " + std::to_string(id) +
                    " has no such rows (it logged: " + (known.empty() ? "nothing" : known) + ")");
      }
      series.push_back(std::move(s));
    }
    history::PlotOptions o;
    o.title = a->title.empty() ? a->metric : a->title;
    o.y_label = a->metric;
    o.log_y = a->log_y;
    o.width = a->width;
    o.height = a->height;
    const bool png = a->out.size() > 4 && a->out.compare(a->out.size() - 4, 4, ".png") == 0;
    const std::string svg = png ? a->out.substr(0, a->out.size() - 4) + ".svg" : a->out;
    write_file_atomic(svg, history::svg_plot(series, o));
    if (png) svg_to_png(svg, a->out);
    std::printf("wrote %s (%zu run(s), metric %s)\n", a->out.c_str(), series.size(), a->metric.c_str());
    exit_code = 0;
  });
}

void add_export(CLI::App& runs, std::shared_ptr<std::string> store_path, int& exit_code) {
  struct Args {
    std::vector<std::int64_t> ids;
    std::string experiment, status, format = "csv", out;
    std::int64_t sweep = 0;
    std::vector<std::string> metrics;
    bool per_run = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = runs.add_subcommand(
      "export", "metrics (long format) or runs as CSV or JSON lines, for pandas & co.; or TensorBoard event files");
  cmd->add_option("ids", a->ids, "run ids (default: every run the filters select)");
  cmd->add_option("--experiment,--name", a->experiment, "only runs with this [run] name");
  auto* sweep = cmd->add_option("--sweep", a->sweep, "only runs of this sweep");
  cmd->add_option("--status", a->status, "only runs with this status");
  cmd->add_option("--metric", a->metrics, "only this metric (repeatable; default all)");
  cmd->add_flag("--runs", a->per_run, "one row per run (its record and final metric values) instead of metric rows");
  cmd->add_option("--format", a->format, "csv | jsonl | tensorboard (a folder per run below --out)")
      ->capture_default_str();
  cmd->add_option("--out", a->out, "output file (default: standard output); the folder for tensorboard");
  cmd->footer(
      "pandas: pd.read_csv(\"metrics.csv\") or pd.read_json(\"metrics.jsonl\", lines=True); "
      "df.pivot_table(index=\"step\", columns=\"run\", values=\"value\") for one metric's curves. "
      "TensorBoard: bertx runs export --sweep 3 --format tensorboard --out tb && tensorboard --logdir tb");
  cmd->callback([store_path, a, sweep, &exit_code] {
    const auto format = history::parse_export_format(a->format);
    auto store = RunStore::open(*store_path);
    store->reap_stale_runs(RunStore::LockWait::Skip);  // a reader: never waits for the write lock
    RunFilter f;
    if (!a->experiment.empty()) f.name = a->experiment;
    if (!a->status.empty()) f.status = parse_run_status(a->status);
    if (sweep->count()) f.sweep_id = a->sweep;
    auto selected = store->list_runs(f);
    std::reverse(selected.begin(), selected.end());  // oldest first
    if (!a->ids.empty()) {
      for (std::int64_t id : a->ids)
        if (!store->get_run(id))
          throw Error("runs export: no run with id " + std::to_string(id) + " in " + *store_path);
      std::erase_if(selected,
                    [&](const RunRecord& r) { return std::find(a->ids.begin(), a->ids.end(), r.id) == a->ids.end(); });
    }
    if (format == history::ExportFormat::TensorBoard) {
      if (a->out.empty()) throw Error("runs export --format tensorboard: --out FOLDER is required (a folder per run)");
      if (a->per_run) throw Error("runs export: --runs writes CSV or JSON lines; --format tensorboard takes metrics");
      const std::size_t n = history::export_tensorboard(*store, selected, a->metrics, a->out);
      std::fprintf(stderr, "exported %zu scalar(s) of %zu run(s) to %s (tensorboard --logdir %s)\n", n, selected.size(),
                   a->out.c_str(), a->out.c_str());
      exit_code = 0;
      return;
    }
    std::ofstream file;
    if (!a->out.empty()) {
      file.open(a->out, std::ios::binary | std::ios::trunc);
      if (!file) throw Error("--out " + a->out + ": cannot write (" + std::strerror(errno) + ")");
    }
    std::ostream& out = a->out.empty() ? std::cout : file;
    const std::size_t n = a->per_run ? history::export_runs(*store, selected, format, out)
                                     : history::export_metrics(*store, selected, a->metrics, format, out);
    out.flush();
    if (!out)
      throw Error("runs export: writing " + (a->out.empty() ? std::string("standard output") : a->out) + " failed");
    std::fprintf(stderr, "exported %zu %s of %zu run(s)%s\n", n, a->per_run ? "run row(s)" : "metric row(s)",
                 selected.size(), a->out.empty() ? "" : (" to " + a->out).c_str());
    exit_code = 0;
  });
}

void add_gc(CLI::App& runs, std::shared_ptr<std::string> store_path, int& exit_code) {
  struct Args {
    std::string experiment, status;
    std::size_t keep_last = 0;
    std::vector<std::int64_t> runs;
    bool dry_run = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = runs.add_subcommand("gc", "remove checkpoints of selected runs (never the newest of a running run)");
  cmd->add_option("--experiment,--name", a->experiment, "only runs with this [run] name");
  auto* keep = cmd->add_option("--keep-last", a->keep_last,
                               "keep the checkpoints of the N newest runs of each name; older runs lose theirs");
  cmd->add_option("--status", a->status, "only runs with this status, e.g. failed");
  cmd->add_option("--run", a->runs, "only this run (repeatable)");
  cmd->add_flag("--dry-run", a->dry_run, "list what would be removed, remove nothing");
  cmd->callback([store_path, a, keep, &exit_code] {
    auto store = RunStore::open(*store_path);
    store->reap_stale_runs(RunStore::LockWait::Skip);  // a reader: never waits for the write lock
    history::GcQuery q;
    q.experiment = a->experiment;
    if (!a->status.empty()) q.status = parse_run_status(a->status);
    if (keep->count()) q.keep_last = a->keep_last;
    q.runs = a->runs;
    const auto items = history::plan_gc(*store, q);
    if (!a->dry_run) history::apply_gc(*store, items);
    std::cout << history::format_gc(items, a->dry_run);
    exit_code = 0;
  });
}

}  // namespace

void add_runs_history_commands(CLI::App& runs, std::shared_ptr<std::string> store_path, int& exit_code) {
  add_table(runs, store_path, exit_code);
  add_plot(runs, store_path, exit_code);
  add_export(runs, store_path, exit_code);
  add_gc(runs, store_path, exit_code);
}

}  // namespace bertx::cli
