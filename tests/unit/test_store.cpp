// test_store.cpp - the SQLite run store: round trip, concurrent writer processes, a writer killed with
// SIGKILL mid-run, schema version/garbage refusal. Each test works in its own mkdtemp folder; children are
// forked before the parent opens any store, and leave with _exit so doctest's state is never torn down twice.
#include <doctest/doctest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "bertx/error.hpp"
#include "base/build_info.hpp"
#include "store/store.hpp"

using namespace bertx;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/bertx_test_store_XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

NewRun make_run(const std::string& name) {
  NewRun r;
  r.name = name;
  r.experiment = "experiments/" + name + ".toml";
  r.config = "[run]\nname = \"" + name + "\"\n";
  r.config_hash = "hash-" + name;
  r.seed = 1234;
  r.output_dir = "out/" + name;
  r.plugins = "[]";
  r.world_size = 2;
  return r;
}

// Runs SQL on the file with raw sqlite3 and returns the first column of the first row as text.
std::string raw_query(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  std::string out;
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

std::string open_error(const std::string& path) {
  try {
    RunStore::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void wait_ok(pid_t pid) {
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace

TEST_CASE("run store: status names round trip, unknown names are refused") {
  for (RunStatus s : {RunStatus::Running, RunStatus::Finished, RunStatus::Failed, RunStatus::Interrupted})
    CHECK(parse_run_status(run_status_name(s)) == s);
  CHECK(std::string(run_status_name(RunStatus::Interrupted)) == "interrupted");
  CHECK_THROWS_WITH_AS(parse_run_status("done"), doctest::Contains("'done'"), Error);
}

TEST_CASE("run store: round trip of runs, metrics, artifacts") {
  TempDir dir;
  const std::string path = dir.path + "/nested/folder/runs.db";  // parent folders are created
  auto store = RunStore::open(path);
  CHECK(store->path() == path);
  CHECK(store->schema_version() == 4);

  const auto a = store->begin_run(make_run("alpha"));
  const auto b = store->begin_run(make_run("beta"));
  CHECK(a != b);
  for (int step = 1; step <= 3; ++step) store->log_metrics(a, step * 10, {{"loss", 4.0 - step}, {"lr", 1e-4 * step}});
  store->log_metrics(a, 40, {{"loss", 2.5}});  // loss min 1.0 at step 30, last 2.5 at step 40
  store->log_metrics(b, 0, {{"loss", std::nan("")}});
  store->add_artifact(a, "checkpoint", "out/alpha/step30.pt", 30);
  store->add_artifact(a, "predictions", "out/alpha/pred.jsonl", 40);
  store->finish_run(a, RunStatus::Finished, "done");
  store->finish_run(b, RunStatus::Failed, "diverged");

  const auto ra = store->get_run(a);
  REQUIRE(ra.has_value());
  CHECK(ra->name == "alpha");
  CHECK(ra->experiment == "experiments/alpha.toml");
  CHECK(ra->config == "[run]\nname = \"alpha\"\n");
  CHECK(ra->config_hash == "hash-alpha");
  CHECK(ra->seed == 1234);
  CHECK(ra->status == RunStatus::Finished);
  CHECK(ra->message == "done");
  CHECK(ra->host == host_name());
  CHECK(ra->pid == getpid());
  CHECK(ra->world_size == 2);
  CHECK(ra->output_dir == "out/alpha");
  CHECK(ra->plugins == "[]");
  CHECK(ra->bertx_version == bertx_version());
  CHECK(!ra->bertx_version.empty());
  CHECK(!ra->torch_version.empty());
  CHECK(!ra->git_rev.empty());
  CHECK(!ra->sweep_id.has_value());
  CHECK(ra->hosts.empty());  // until the ranks joined
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(ra->started_at > now - 60);
  CHECK(ra->ended_at >= ra->started_at);
  CHECK(ra->started_at != std::floor(ra->started_at));  // sub-second resolution
  CHECK(!store->get_run(9999).has_value());

  const auto all = store->list_runs();
  REQUIRE(all.size() == 2);
  CHECK(all[0].id == b);  // newest first
  CHECK(all[1].id == a);
  RunFilter by_status;
  by_status.status = RunStatus::Failed;
  const auto failed = store->list_runs(by_status);
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].id == b);
  CHECK(failed[0].message == "diverged");
  RunFilter by_name;
  by_name.name = "alpha";
  const auto alphas = store->list_runs(by_name);
  REQUIRE(alphas.size() == 1);
  CHECK(alphas[0].id == a);
  RunFilter limited;
  limited.limit = 1;
  REQUIRE(store->list_runs(limited).size() == 1);
  CHECK(store->list_runs(limited)[0].id == b);
  RunFilter future;
  future.since = now + 3600;
  CHECK(store->list_runs(future).empty());

  const auto m = store->metrics(a);
  REQUIRE(m.size() == 7);
  CHECK(m[0].step == 10);
  CHECK(m[0].name == "loss");
  CHECK(m[0].value == 3.0);
  CHECK(m[1].name == "lr");
  CHECK(m[1].value == doctest::Approx(1e-4));
  CHECK(m[6].step == 40);
  CHECK(m[6].value == 2.5);
  CHECK(m[6].time >= ra->started_at);
  const auto lr = store->metrics(a, "lr");
  REQUIRE(lr.size() == 3);
  CHECK(lr[2].step == 30);
  CHECK(lr[2].value == doctest::Approx(3e-4));
  CHECK(store->count_metrics(a) == 7);
  CHECK(store->count_metrics(b) == 1);
  REQUIRE(store->metrics(b).size() == 1);
  CHECK(std::isnan(store->metrics(b)[0].value));  // NaN survives (stored as NULL)

  const auto sum = store->metric_summary(a);
  REQUIRE(sum.size() == 2);
  CHECK(sum[0].name == "loss");
  CHECK(sum[0].count == 4);
  CHECK(sum[0].last_step == 40);
  CHECK(sum[0].last == 2.5);
  CHECK(sum[0].min == 1.0);
  CHECK(sum[0].max == 3.0);
  CHECK(sum[1].name == "lr");
  CHECK(sum[1].count == 3);
  CHECK(sum[1].last_step == 30);
  CHECK(sum[1].last == doctest::Approx(3e-4));
  CHECK(sum[1].min == doctest::Approx(1e-4));

  const auto arts = store->artifacts(a);
  REQUIRE(arts.size() == 2);
  CHECK(arts[0].kind == "checkpoint");
  CHECK(arts[0].path == "out/alpha/step30.pt");
  CHECK(arts[0].step == 30);
  CHECK(arts[1].kind == "predictions");
  CHECK(arts[1].step == 40);
  CHECK(store->artifacts(b).empty());

  // Writes to a run that does not exist are refused, naming the store.
  CHECK_THROWS_WITH_AS(store->log_metrics(9999, 1, {{"loss", 1.0}}), doctest::Contains(path.c_str()), Error);
  CHECK_THROWS_WITH_AS(store->finish_run(9999, RunStatus::Finished), doctest::Contains("no run with id 9999"), Error);
  CHECK_THROWS_AS(store->add_artifact(9999, "x", "y", 0), Error);

  // Reopening sees the same data.
  store.reset();
  store = RunStore::open(path);
  CHECK(store->list_runs().size() == 2);
  CHECK(store->count_metrics(a) == 7);
}

TEST_CASE("run store: two processes writing at once lose nothing") {
  TempDir dir;
  const std::string path = dir.path + "/runs.db";
  constexpr int kSteps = 1500;
  pid_t kids[2];
  for (int k = 0; k < 2; ++k) {
    kids[k] = fork();
    REQUIRE(kids[k] >= 0);
    if (kids[k] == 0) {
      int code = 0;
      try {
        auto store = RunStore::open(path);  // both may create/migrate the fresh file at once
        const auto id = store->begin_run(make_run("writer" + std::to_string(k)));
        for (int step = 0; step < kSteps; ++step)
          store->log_metrics(id, step, {{"loss", k + step * 0.001}, {"acc", step * 1e-4}});
        store->finish_run(id, RunStatus::Finished);
      } catch (const std::exception& e) {
        fprintf(stderr, "child %d: %s\n", k, e.what());
        code = 1;
      }
      _exit(code);
    }
  }
  wait_ok(kids[0]);
  wait_ok(kids[1]);

  CHECK(raw_query(path, "PRAGMA integrity_check") == "ok");
  CHECK(raw_query(path, "PRAGMA journal_mode") == "wal");
  auto store = RunStore::open(path);
  const auto runs = store->list_runs();
  REQUIRE(runs.size() == 2);
  std::set<std::int64_t> pids;
  for (const auto& r : runs) {
    CHECK(r.status == RunStatus::Finished);
    pids.insert(r.pid);
    CHECK(store->count_metrics(r.id) == 2 * kSteps);
    std::set<std::pair<std::int64_t, std::string>> distinct;
    for (const auto& row : store->metrics(r.id)) distinct.insert({row.step, row.name});
    CHECK(distinct.size() == 2 * kSteps);
    const auto sum = store->metric_summary(r.id);
    REQUIRE(sum.size() == 2);
    CHECK(sum[0].name == "acc");
    CHECK(sum[0].last_step == kSteps - 1);
  }
  CHECK(pids.count(kids[0]) == 1);
  CHECK(pids.count(kids[1]) == 1);
}

TEST_CASE("run store: a writer killed with SIGKILL leaves a readable store, its run is reaped") {
  TempDir dir;
  const std::string path = dir.path + "/runs.db";
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t kid = fork();
  REQUIRE(kid >= 0);
  if (kid == 0) {
    close(fds[0]);
    int code = 0;
    try {
      auto store = RunStore::open(path);
      const auto id = store->begin_run(make_run("victim"));
      const auto start = std::chrono::steady_clock::now();
      // "Endless" until killed; the time bound only stops an orphan if the parent died first.
      for (std::int64_t step = 0; std::chrono::steady_clock::now() - start < std::chrono::seconds(120); ++step) {
        store->log_metrics(id, step, {{"loss", 1.0 / (step + 1)}, {"lr", 1e-3}});
        if (step == 199 && write(fds[1], "!", 1) != 1) code = 2;  // 200 steps are committed
      }
    } catch (const std::exception& e) {
      fprintf(stderr, "child: %s\n", e.what());
      code = 1;
    }
    _exit(code);
  }
  close(fds[1]);
  char c = 0;
  const auto got = read(fds[0], &c, 1);
  close(fds[0]);
  kill(kid, SIGKILL);
  int status = 0;
  REQUIRE(waitpid(kid, &status, 0) == kid);
  REQUIRE(got == 1);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);

  CHECK(raw_query(path, "PRAGMA integrity_check") == "ok");
  auto store = RunStore::open(path);
  CHECK(raw_query(path, "PRAGMA integrity_check") == "ok");
  const auto runs = store->list_runs();
  REQUIRE(runs.size() == 1);
  const auto id = runs[0].id;
  CHECK(runs[0].pid == kid);
  CHECK(runs[0].status == RunStatus::Running);
  CHECK(runs[0].ended_at == 0.0);
  const auto n = store->count_metrics(id);
  CHECK(n >= 400);    // >= 200 steps x 2 names
  CHECK(n % 2 == 0);  // a step is all-or-nothing
  CHECK(static_cast<std::int64_t>(store->metrics(id).size()) == n);
  CHECK(store->metrics(id, "loss").size() >= 200);

  CHECK(store->reap_stale_runs() == 1);
  const auto r = store->get_run(id);
  REQUIRE(r.has_value());
  CHECK(r->status == RunStatus::Interrupted);
  CHECK(r->ended_at > 0);
  CHECK(r->ended_at >= r->started_at);
  CHECK(r->message == "process " + std::to_string(kid) + " exited without finishing (killed?)");
  CHECK(store->reap_stale_runs() == 0);  // idempotent

  // A live run of this process is never reaped.
  const auto mine = store->begin_run(make_run("alive"));
  CHECK(store->reap_stale_runs() == 0);
  CHECK(store->get_run(mine)->status == RunStatus::Running);
}

// Waits for child `kid` up to 10 s after t0 (SIGKILL after that); its status in `status`, the seconds since t0 returned.
static double wait_or_kill(pid_t kid, std::chrono::steady_clock::time_point t0, int& status) {
  while (waitpid(kid, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
    usleep(10000);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (seconds >= 10) {
    kill(kid, SIGKILL);
    waitpid(kid, &status, 0);
  }
  return seconds;
}

TEST_CASE("run store: a reader opens, reaps and lists while another process holds the write lock") {
  TempDir dir;
  const std::string path = dir.path + "/runs.db";
  RunStore::open(path)->begin_run(make_run("alive"));  // this process: never reaped
  sqlite3* writer = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &writer) == SQLITE_OK);
  REQUIRE(sqlite3_exec(writer,
                       "BEGIN IMMEDIATE; INSERT INTO sweeps(experiment, created_at, spec) VALUES('held', 0, '{}')",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  // The reader is a child, so a reader that waits for the lock (30 s busy timeout, retried) is stopped here.
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t kid = fork();
  REQUIRE(kid >= 0);
  if (kid == 0) {
    int code = 0;
    try {
      auto store = RunStore::open(path);
      if (store->reap_stale_runs() != 0 || store->list_runs().size() != 1 || !store->list_sweeps().empty()) code = 2;
    } catch (const std::exception& e) {
      fprintf(stderr, "reader: %s\n", e.what());
      code = 1;
    }
    _exit(code);
  }
  int status = 0;
  const double seconds = wait_or_kill(kid, t0, status);
  sqlite3_exec(writer, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(writer);
  CHECK(seconds < 10);  // the lock is held until after this check: a reader waiting for it takes 30 s or more
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("run store: a reader leaves a dead run to the next caller while another process holds the write lock") {
  TempDir dir;
  const std::string path = dir.path + "/runs.db";
  const pid_t dead = fork();  // begins a run and exits without finishing it
  REQUIRE(dead >= 0);
  if (dead == 0) {
    int code = 0;
    try {
      RunStore::open(path)->begin_run(make_run("dead"));
    } catch (const std::exception&) {
      code = 1;
    }
    _exit(code);
  }
  int status = 0;
  REQUIRE(waitpid(dead, &status, 0) == dead);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  sqlite3* writer = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &writer) == SQLITE_OK);
  REQUIRE(sqlite3_exec(writer, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t kid = fork();  // a reader: reaps without waiting, so it finds the dead run still 'running'
  REQUIRE(kid >= 0);
  if (kid == 0) {
    int code = 0;
    try {
      auto store = RunStore::open(path);
      if (store->reap_stale_runs(RunStore::LockWait::Skip) != 0) code = 2;
      const auto runs = store->list_runs();
      if (runs.size() != 1 || runs[0].status != RunStatus::Running) code = 3;
    } catch (const std::exception& e) {
      fprintf(stderr, "reader: %s\n", e.what());
      code = 1;
    }
    _exit(code);
  }
  const double seconds = wait_or_kill(kid, t0, status);
  sqlite3_exec(writer, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(writer);
  CHECK(seconds < 10);  // a reader waiting for the lock would take the 30 s busy timeout
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The lock is free again: the next reader reaps the dead run.
  auto store = RunStore::open(path);
  CHECK(store->reap_stale_runs(RunStore::LockWait::Skip) == 1);
  const auto runs = store->list_runs();
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].status == RunStatus::Interrupted);
  CHECK(runs[0].pid == dead);
  CHECK(store->reap_stale_runs() == 0);
}

TEST_CASE("run store: set_ranks records world size and every rank's host") {
  TempDir dir;
  auto store = RunStore::open(dir.path + "/runs.db");
  const auto id = store->begin_run(make_run("dp"));
  store->set_ranks(id, {"node01", "node01", "node02"});
  const auto r = store->get_run(id);
  REQUIRE(r.has_value());
  CHECK(r->world_size == 3);
  CHECK(r->hosts == std::vector<std::string>{"node01", "node01", "node02"});
  CHECK_THROWS_WITH_AS(store->set_ranks(id + 1, {"a"}), doctest::Contains("no run with id"), Error);
  CHECK_THROWS_WITH_AS(store->set_ranks(id, {"a,b"}), doctest::Contains("contains a comma"), Error);
}

TEST_CASE("run store: a version 1 file gains the hosts and process columns and keeps its runs") {
  TempDir dir;
  const std::string path = dir.path + "/runs.db";
  std::int64_t id = 0;
  {
    auto store = RunStore::open(path);
    id = store->begin_run(make_run("old"));
  }
  raw_query(path, "ALTER TABLE runs DROP COLUMN process");  // back to the shipped version 1 layout
  raw_query(path, "ALTER TABLE runs DROP COLUMN hosts");
  raw_query(path, "PRAGMA user_version = 1");
  auto store = RunStore::open(path);
  CHECK(store->schema_version() == 4);
  const auto r = store->get_run(id);
  REQUIRE(r.has_value());
  CHECK(r->name == "old");
  CHECK(r->hosts.empty());
  CHECK(r->process.empty());
}

TEST_CASE("run store: schema versions and non-database files") {
  TempDir dir;
  const std::string path = dir.path + "/runs.db";
  {
    auto store = RunStore::open(path);
    CHECK(store->schema_version() == 4);
  }
  CHECK(raw_query(path, "PRAGMA user_version") == "4");
  CHECK(raw_query(path, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name LIKE 'metrics%'") == "1");
  {
    auto store = RunStore::open(path);  // reopening an up-to-date store is a no-op
    CHECK(store->schema_version() == 4);
  }

  raw_query(path, "PRAGMA user_version = 999");
  CHECK(raw_query(path, "PRAGMA user_version") == "999");
  const std::string newer = open_error(path);
  CHECK(newer.find(path) != std::string::npos);
  CHECK(newer.find("newer") != std::string::npos);
  CHECK(newer.find("999") != std::string::npos);
  CHECK(newer.find('\n') == std::string::npos);

  for (std::size_t size : {std::size_t{13}, std::size_t{4096}}) {
    const std::string junk = dir.path + "/junk" + std::to_string(size) + ".db";
    {
      std::ofstream f(junk, std::ios::binary);
      for (std::size_t i = 0; i < size; ++i) f.put(static_cast<char>((i * 131 + 7) % 251));
    }
    const std::string err = open_error(junk);
    CHECK(err.find(junk) != std::string::npos);
    CHECK(err.find("not a bertx run store") != std::string::npos);
    CHECK(fs::file_size(junk) == size);  // left untouched
  }

  const std::string folder_err = open_error(dir.path);  // a directory is not a store either
  CHECK(folder_err.find(dir.path) != std::string::npos);
  CHECK(open_error("").find("empty") != std::string::npos);
}

TEST_CASE("run store: text that looks like SQL is stored as text (every statement binds its values)") {
  TempDir dir;
  auto store = RunStore::open(dir.path + "/runs.db");
  const std::string evil = "x'); DROP TABLE runs; --\" OR 1=1";
  NewRun nr;
  nr.name = evil;
  nr.experiment = evil;
  nr.output_dir = evil;
  const auto id = store->begin_run(nr);
  store->log_metrics(id, 1, {{evil, 1.5}});
  store->add_artifact(id, evil, evil, 1);
  store->finish_run(id, RunStatus::Failed, evil);
  RunFilter f;
  f.name = evil;
  const auto runs = store->list_runs(f);
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].experiment == evil);
  CHECK(runs[0].message == evil);
  CHECK(store->last_run_in(evil)->id == id);
  REQUIRE(store->metrics(id, evil).size() == 1);
  CHECK(store->artifacts(id)[0].path == evil);
  CHECK(store->metric_value(id, evil, MetricReduce::Final) == 1.5);
}
