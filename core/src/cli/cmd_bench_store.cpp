// cmd_bench_store.cpp - `bertx bench store [--runs 1000] [--metric-rows 10000000] [--store FILE] [--keep]`:
// fills a run store with synthetic history (sweeps of 10 seeds, 20 experiment names, loss and lr every step,
// f1 and exact_match every 100 steps) and times the queries behind `bertx runs list/show/table/compare/
// plot/export` and `bertx sweep`'s plan, through the same functions the commands call. The number to watch:
// every query stays in milliseconds at 10^3 runs and 10^7 metric rows (index metrics(run_id, name, step)).
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

#include "bertx/error.hpp"
#include "commands.hpp"
#include "history/compare.hpp"
#include "history/export.hpp"
#include "history/sweep.hpp"
#include "history/table.hpp"
#include "store/store.hpp"

namespace bertx::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kSweepSize = 10, kNames = 20, kEvalEvery = 100;

struct BenchArgs {
  std::int64_t runs = 1000, metric_rows = 10000000;
  std::string store;
  bool keep = false;
  int repeat = 5;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void check(int rc, sqlite3* db, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
    throw Error(std::string("bench store: ") + what + ": " + sqlite3_errmsg(db));
}

// Raw bulk insert in one transaction (RunStore's per-step transactions would take hours for 10^7 rows).
void fill(const std::string& path, const BenchArgs& a) {
  RunStore::open(path);  // schema and indexes, as bertx creates them
  sqlite3* db = nullptr;
  check(sqlite3_open(path.c_str(), &db), db, "open");
  std::unique_ptr<sqlite3, decltype(&sqlite3_close)> guard(db, sqlite3_close);
  check(sqlite3_exec(db, "PRAGMA synchronous=OFF; BEGIN", nullptr, nullptr, nullptr), db, "begin");
  sqlite3_stmt *sw = nullptr, *run = nullptr, *met = nullptr;
  check(sqlite3_prepare_v2(db, "INSERT INTO sweeps(id, experiment, created_at, spec) VALUES(?1, ?2, 0, '{}')", -1, &sw,
                           nullptr),
        db, "prepare");
  check(
      sqlite3_prepare_v2(
          db,
          "INSERT INTO runs(id, name, experiment, config, config_hash, seed, status, started_at, ended_at, host, pid, "
          "world_size, bertx_version, torch_version, git_rev, output_dir, plugins, sweep_id) VALUES(?1, ?2, ?3, ?4, "
          "'0123456789abcdef', ?5, ?6, ?7, ?8, 'bench', 1, 1, '0', '0', '0', '/tmp/x', '[]', ?9)",
          -1, &run, nullptr),
      db, "prepare");
  check(sqlite3_prepare_v2(db, "INSERT INTO metrics(run_id, step, name, value, time) VALUES(?1, ?2, ?3, ?4, ?5)", -1,
                           &met, nullptr),
        db, "prepare");
  // A resolved config of realistic size (~50 keys).
  std::string config;
  for (int k = 0; k < 50; ++k)
    config += (k % 8 ? "" : "[section" + std::to_string(k / 8) + "]\n") + "key_" + std::to_string(k) + " = " +
              std::to_string(k * 0.001) + "\n";
  const std::int64_t per_run = a.metric_rows / a.runs;
  // Rows per step: loss + lr, and f1 + exact_match every kEvalEvery steps.
  const std::int64_t steps = std::max<std::int64_t>(1, per_run * kEvalEvery / (2 * kEvalEvery + 2));
  std::uint64_t lcg = 12345;
  auto noise = [&] {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(lcg >> 11) / 9007199254740992.0 - 0.5;
  };
  for (std::int64_t s = 1; s <= (a.runs + kSweepSize - 1) / kSweepSize; ++s) {
    sqlite3_bind_int64(sw, 1, s);
    const std::string exp = "experiments/exp" + std::to_string((s - 1) % kNames) + ".toml";
    sqlite3_bind_text(sw, 2, exp.c_str(), -1, SQLITE_TRANSIENT);
    check(sqlite3_step(sw), db, "sweep");
    sqlite3_reset(sw);
  }
  std::int64_t rows = 0;
  for (std::int64_t r = 1; r <= a.runs; ++r) {
    const std::int64_t sweep = (r - 1) / kSweepSize + 1, seed = (r - 1) % kSweepSize;
    const std::string name = "exp" + std::to_string((sweep - 1) % kNames), file = "experiments/" + name + ".toml";
    const double t0 = 1.7e9 + static_cast<double>(r) * 3600;
    sqlite3_bind_int64(run, 1, r);
    sqlite3_bind_text(run, 2, name.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(run, 3, file.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(run, 4, config.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(run, 5, seed);
    sqlite3_bind_text(run, 6, r % 50 == 0 ? "failed" : "finished", -1, SQLITE_STATIC);
    sqlite3_bind_double(run, 7, t0);
    sqlite3_bind_double(run, 8, t0 + 3000);
    sqlite3_bind_int64(run, 9, sweep);
    check(sqlite3_step(run), db, "run");
    sqlite3_reset(run);
    auto put = [&](std::int64_t step, const char* metric, double value) {
      sqlite3_bind_int64(met, 1, r);
      sqlite3_bind_int64(met, 2, step);
      sqlite3_bind_text(met, 3, metric, -1, SQLITE_STATIC);
      sqlite3_bind_double(met, 4, value);
      sqlite3_bind_double(met, 5, t0 + static_cast<double>(step));
      check(sqlite3_step(met), db, "metric");
      sqlite3_reset(met);
      ++rows;
    };
    for (std::int64_t step = 1; step <= steps; ++step) {
      put(step, "loss", 2 + 8 * std::exp(-static_cast<double>(step) / 1000.0) + 0.1 * noise());
      put(step, "lr", 1e-4 * std::min(1.0, static_cast<double>(step) / 100.0));
      if (step % kEvalEvery == 0) {
        put(step, "f1", 88 + 2 * noise() - 10.0 / static_cast<double>(step));
        put(step, "exact_match", 81 + 2 * noise() - 10.0 / static_cast<double>(step));
      }
    }
  }
  sqlite3_finalize(sw);
  sqlite3_finalize(run);
  sqlite3_finalize(met);
  check(sqlite3_exec(db, "COMMIT; PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr), db, "commit");
  std::printf("filled: %lld runs in %lld sweeps of %d seeds, %lld metric rows (%lld steps per run)\n",
              static_cast<long long>(a.runs), static_cast<long long>((a.runs + kSweepSize - 1) / kSweepSize),
              kSweepSize, static_cast<long long>(rows), static_cast<long long>(steps));
}

// A stream that drops what it is given (export timing without disk writes).
struct NullBuf : std::streambuf {
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

void time_it(const char* what, int repeat, const std::function<std::size_t()>& fn) {
  std::vector<double> ms;
  std::size_t n = 0;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = Clock::now();
    n = fn();
    ms.push_back(seconds_since(t0) * 1000);
  }
  std::sort(ms.begin(), ms.end());
  std::printf("  %-58s %9.2f ms  (min %.2f, %zu rows)\n", what, ms[ms.size() / 2], ms.front(), n);
}

void bench_store(const BenchArgs& a) {
  if (a.runs < kSweepSize)
    throw Error("--runs " + std::to_string(a.runs) + ": expected at least " + std::to_string(kSweepSize));
  if (a.metric_rows < a.runs)
    throw Error("--metric-rows " + std::to_string(a.metric_rows) + ": expected at least --runs");
  const std::string path =
      a.store.empty() ? (fs::temp_directory_path() / ("bertx_bench_store_" + std::to_string(getpid()) + ".db")).string()
                      : a.store;
  if (fs::exists(path)) throw Error("--store " + path + ": exists already (the benchmark fills a new store)");
  struct Cleanup {
    std::string p;
    bool keep;
    ~Cleanup() {
      if (keep) return;
      std::error_code ec;
      for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(p + suffix, ec);
    }
  } cleanup{path, a.keep};
  auto t0 = Clock::now();
  fill(path, a);
  std::printf("fill: %.1f s, file %.0f MB (%s%s)\n", seconds_since(t0), static_cast<double>(fs::file_size(path)) / 1e6,
              path.c_str(), a.keep ? ", kept" : ", removed at exit");

  t0 = Clock::now();
  auto store = RunStore::open(path);
  std::printf("open (migrations checked): %.2f ms\nqueries (median of %d):\n", seconds_since(t0) * 1000, a.repeat);
  const std::int64_t mid_sweep = (a.runs / kSweepSize) / 2 + 1, mid_run = a.runs / 2;
  time_it("runs list (every run)", a.repeat, [&] { return store->list_runs().size(); });
  time_it("runs list --experiment exp3", a.repeat, [&] {
    RunFilter f;
    f.name = "exp3";
    return store->list_runs(f).size();
  });
  for (bool best : {false, true}) {
    history::TableQuery q;
    q.sweep_id = mid_sweep;
    q.metrics = {"f1", "exact_match", "loss"};
    q.best = best;
    time_it(best ? "runs table --sweep S --metric f1,exact_match,loss --best"
                 : "runs table --sweep S --metric f1,exact_match,loss --final",
            a.repeat, [&] { return history::seed_table(*store, q).rows.size(); });
  }
  {
    history::TableQuery q;
    q.experiment = "exp3";
    q.metrics = {"f1", "loss"};
    time_it("runs table --experiment exp3 --metric f1 --metric loss", a.repeat,
            [&] { return history::seed_table(*store, q).rows.size(); });
  }
  time_it("runs show ID (metric summary)", a.repeat, [&] { return store->metric_summary(mid_run).size(); });
  time_it("runs compare A B", a.repeat,
          [&] { return history::compare_runs(*store, mid_run, mid_run + 1, history::Format::Text).size(); });
  time_it("runs plot (loss rows of 10 runs)", a.repeat, [&] {
    std::size_t n = 0;
    for (std::int64_t r = mid_run; r < mid_run + 10; ++r) n += store->metrics(r, "loss").size();
    return n;
  });
  time_it("sweep re-run plan (10 seeds)", a.repeat, [&] {
    std::vector<std::int64_t> seeds(kSweepSize);
    for (int i = 0; i < kSweepSize; ++i) seeds[static_cast<std::size_t>(i)] = i;
    return history::plan_seeds(*store, mid_sweep, seeds).size();
  });
  time_it("runs export --sweep S (every metric row, CSV)", a.repeat, [&] {
    NullBuf nb;
    std::ostream out(&nb);
    RunFilter f;
    f.sweep_id = mid_sweep;
    return history::export_metrics(*store, store->list_runs(f), {}, history::ExportFormat::Csv, out);
  });
}

}  // namespace

void add_bench_store_command(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "store", "run store queries (runs list/show/table/compare/plot/export) on a synthetic history");
  cmd->add_option("--runs", a->runs, "runs in the synthetic store")->capture_default_str();
  cmd->add_option("--metric-rows", a->metric_rows, "metric rows in all")->capture_default_str();
  cmd->add_option("--store", a->store, "file to create (default: a temporary file, removed at exit)");
  cmd->add_flag("--keep", a->keep, "keep the filled store");
  cmd->add_option("--repeat", a->repeat, "timings per query (the median is printed)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->callback([a, &exit_code] {
    bench_store(*a);
    exit_code = 0;
  });
}

}  // namespace bertx::cli
