// cmd_runs.cpp - `bertx runs list|show|compare`: read the experiment store (table, plot, export and gc:
// cmd_runs_history.cpp).
#include <cstdio>
#include <ctime>
#include <iostream>

#include "bertx/error.hpp"
#include "commands.hpp"
#include "history/compare.hpp"
#include "history/format.hpp"
#include "host/report.hpp"
#include "store/store.hpp"

namespace bertx::cli {

using history::local_time;

static std::string duration_of(const RunRecord& r) {
  if (r.ended_at <= 0) return "-";
  return Reporter::format_duration(r.ended_at - r.started_at);
}

// "node01 x2, node02" - the ranks' hosts, consecutive repeats counted.
static std::string join_hosts(const std::vector<std::string>& hosts) {
  std::string out;
  for (std::size_t i = 0; i < hosts.size();) {
    std::size_t j = i;
    while (j < hosts.size() && hosts[j] == hosts[i]) ++j;
    out += (out.empty() ? "" : ", ") + hosts[i] + (j - i > 1 ? " x" + std::to_string(j - i) : "");
    i = j;
  }
  return out;
}

// "2026-12-01" or "2026-12-01 10:00:00" (local time) -> unix seconds.
static double parse_since(const std::string& s) {
  std::tm tm{};
  const char* end = strptime(s.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  if (!end || *end) {
    tm = {};
    end = strptime(s.c_str(), "%Y-%m-%d", &tm);
  }
  if (!end || *end) throw Error("--since '" + s + "': expected YYYY-MM-DD or \"YYYY-MM-DD HH:MM:SS\"");
  tm.tm_isdst = -1;
  return static_cast<double>(std::mktime(&tm));
}

void add_runs_command(CLI::App& app, int& exit_code) {
  auto store_path = std::make_shared<std::string>("runs/bertx.db");
  CLI::App* runs = app.add_subcommand("runs", "query the experiment store");
  runs->add_option("--store", *store_path, "SQLite store file")->capture_default_str();
  runs->require_subcommand(1);

  struct ListArgs {
    std::string name, status, since;
    std::size_t limit = 0;
  };
  auto la = std::make_shared<ListArgs>();
  CLI::App* list = runs->add_subcommand("list", "one line per run, newest first");
  list->add_option("--experiment,--name", la->name, "only runs with this [run] name");
  list->add_option("--status", la->status, "running | finished | failed | interrupted");
  list->add_option("--since", la->since, "only runs started at or after this local time (YYYY-MM-DD[ HH:MM:SS])");
  list->add_option("--limit", la->limit, "at most this many runs");
  list->callback([store_path, la, &exit_code] {
    auto store = RunStore::open(*store_path);
    store->reap_stale_runs(RunStore::LockWait::Skip);  // a reader: never waits for the write lock
    RunFilter f;
    if (!la->name.empty()) f.name = la->name;
    if (!la->status.empty()) f.status = parse_run_status(la->status);
    if (!la->since.empty()) f.since = parse_since(la->since);
    f.limit = la->limit;
    const auto rows = store->list_runs(f);
    std::printf("%-6s %-24s %-12s %8s %-19s %9s %-16s %s\n", "id", "name", "status", "seed", "started", "duration",
                "config", "host");
    for (const auto& r : rows)
      std::printf("%-6lld %-24s %-12s %8lld %-19s %9s %-16s %s\n", static_cast<long long>(r.id), r.name.c_str(),
                  run_status_name(r.status), static_cast<long long>(r.seed), local_time(r.started_at).c_str(),
                  duration_of(r).c_str(), r.config_hash.c_str(), r.host.c_str());
    std::printf("%zu run(s) in %s\n", rows.size(), store->path().c_str());
    exit_code = 0;
  });

  auto id = std::make_shared<std::int64_t>(0);
  CLI::App* show = runs->add_subcommand("show", "everything recorded about one run");
  show->add_option("id", *id, "run id (see `bertx runs list`)")->required();
  show->callback([store_path, id, &exit_code] {
    auto store = RunStore::open(*store_path);
    store->reap_stale_runs(RunStore::LockWait::Skip);  // a reader: never waits for the write lock
    auto r = store->get_run(*id);
    if (!r) throw Error(*store_path + ": no run with id " + std::to_string(*id) + " (see `bertx runs list`)");
    std::cout << "run " << r->id << ": " << r->name << "\n"
              << "  status      " << run_status_name(r->status) << (r->message.empty() ? "" : " (" + r->message + ")")
              << "\n"
              << "  experiment  " << r->experiment << "\n"
              << "  seed        " << r->seed << "\n"
              << "  started     " << local_time(r->started_at) << "\n"
              << "  ended       " << local_time(r->ended_at) << "  (" << duration_of(*r) << ")\n"
              << "  host        " << r->host << " pid " << r->pid << ", world size " << r->world_size
              << (r->hosts.empty() ? std::string() : " (ranks on " + join_hosts(r->hosts) + ")") << "\n"
              << "  versions    bertx " << r->bertx_version << ", LibTorch " << r->torch_version << ", git "
              << r->git_rev << "\n"
              << "  output_dir  " << r->output_dir << "\n"
              << "  plugins     " << r->plugins << "\n"
              << (r->process.empty() ? std::string() : "  process     " + r->process + "\n") << "  config hash "
              << r->config_hash << "\n";
    const auto summary = store->metric_summary(r->id);
    std::cout << "metrics (" << summary.size() << "):\n";
    for (const auto& m : summary)
      std::printf("  %-24s n=%-8lld last@%-8lld %-12.6g min %-12.6g max %-12.6g\n", m.name.c_str(),
                  static_cast<long long>(m.count), static_cast<long long>(m.last_step), m.last, m.min, m.max);
    const auto arts = store->artifacts(r->id);
    std::cout << "artifacts (" << arts.size() << "):\n";
    for (const auto& a : arts) std::cout << "  " << a.kind << " step " << a.step << "  " << a.path << "\n";
    std::cout << "config:\n" << r->config;
    exit_code = 0;
  });

  struct CompareArgs {
    std::int64_t a = 0, b = 0;
    std::string format = "text";
  };
  auto ca = std::make_shared<CompareArgs>();
  CLI::App* compare = runs->add_subcommand(
      "compare", "two runs side by side: recorded facts, config keys and final metrics that differ");
  compare->add_option("a", ca->a, "run id")->required();
  compare->add_option("b", ca->b, "run id")->required();
  compare->add_option("--format", ca->format, "text | json")->capture_default_str();
  compare->callback([store_path, ca, &exit_code] {
    const auto format = history::parse_format(ca->format);
    auto store = RunStore::open(*store_path);
    store->reap_stale_runs(RunStore::LockWait::Skip);  // a reader: never waits for the write lock
    std::cout << history::compare_runs(*store, ca->a, ca->b, format);
    exit_code = 0;
  });

  add_runs_history_commands(*runs, store_path, exit_code);
}

}  // namespace bertx::cli
