// test_run.cpp - the run life cycle (store record, config.toml, report.jsonl, finished / failed /
// interrupted by SIGTERM), a data-parallel rank other than 0 writing nothing, and the Reporter's three
// outputs from one call.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "host/plugin_host.hpp"
#include "host/report.hpp"
#include "host/run.hpp"
#include "base/signals.hpp"
#include "store/store.hpp"
#include "test_util.hpp"

using namespace bertx;

static ResolvedConfig config_in(const test::TempDir& d, const std::string& name) {
  test::write_text(d / "exp.toml", "[run]\nname = \"" + name + "\"\nseed = 7\n");
  PluginHost host;
  return resolve(Experiment::load(d / "exp.toml", {"run.output_dir=" + (d / "out"), "run.store=" + (d / "runs.db")}),
                 host);
}

TEST_CASE("Reporter writes the console line, one JSON object per step and the store rows from one call") {
  test::TempDir d;
  auto store = RunStore::open(d / "s.db");
  NewRun nr;
  nr.name = "rep";
  const auto id = store->begin_run(nr);
  {
    Reporter r(store.get(), id, d / "report.jsonl", 10);
    r.step(1, {{"loss", 2.5}, {"lr", 1e-4}});
    r.step(2, {{"loss", 2.0}, {"lr", 2e-4}});
    r.summary("finished", {{"loss", 2.0}});
  }
  std::istringstream lines(test::read_text(d / "report.jsonl"));
  std::vector<nlohmann::json> objs;
  for (std::string line; std::getline(lines, line);) objs.push_back(nlohmann::json::parse(line));
  REQUIRE(objs.size() == 3);
  CHECK(objs[0]["type"] == "step");
  CHECK(objs[0]["step"] == 1);
  CHECK(objs[1]["metrics"]["loss"].get<double>() == 2.0);
  CHECK(objs[1]["metrics"]["lr"].get<double>() == 2e-4);
  CHECK(objs[2]["type"] == "summary");
  CHECK(store->count_metrics(id) == 4);
  const auto loss = store->metrics(id, "loss");
  REQUIRE(loss.size() == 2);
  CHECK(loss[1].step == 2);
  CHECK(loss[1].value == 2.0);
}

TEST_CASE("format_duration") {
  CHECK(Reporter::format_duration(5) == "5s");
  CHECK(Reporter::format_duration(65) == "1m05s");
  CHECK(Reporter::format_duration(3723) == "1h02m03s");
  CHECK(Reporter::format_duration(-1) == "?");
}

TEST_CASE("a finished run is recorded with its config, metrics and artifacts") {
  test::TempDir d;
  const ResolvedConfig rc = config_in(d, "ok");
  PluginHost host;
  int code = execute_run(rc, host, [](RunContext& ctx) {
    for (int s = 1; s <= 3; ++s) ctx.report.step(s, {{"loss", 1.0 / s}});
    return TrainResult::Finished;
  });
  CHECK(code == 0);
  auto store = RunStore::open(d / "runs.db");
  auto runs = store->list_runs();
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].status == RunStatus::Finished);
  CHECK(runs[0].seed == 7);
  CHECK(runs[0].config == rc.text);
  CHECK(runs[0].config_hash == rc.hash);
  CHECK(runs[0].ended_at >= runs[0].started_at);
  CHECK(store->metrics(runs[0].id, "loss").size() == 3);
  CHECK(store->artifacts(runs[0].id).size() == 2);
  const std::string saved = test::read_text(d / "out/config.toml");
  CHECK(saved.find(rc.text) != std::string::npos);
  CHECK(!std::filesystem::exists(d / "out/config.toml.tmp"));
}

TEST_CASE("a data-parallel rank other than 0 trains without a run record report or config file") {
  test::TempDir d;
  const ResolvedConfig rc = config_in(d, "rank1");
  PluginHost host;
  // The launcher's environment for rank 1 of 2, removed again on the way out (other tests are single processes).
  struct LauncherEnv {
    const std::vector<std::pair<const char*, const char*>> vars{{"RANK", "1"},
                                                                {"WORLD_SIZE", "2"},
                                                                {"LOCAL_RANK", "1"},
                                                                {"LOCAL_WORLD_SIZE", "2"},
                                                                {"MASTER_ADDR", "127.0.0.1"}};
    LauncherEnv() {
      for (const auto& [k, v] : vars) setenv(k, v, 1);
    }
    ~LauncherEnv() {
      for (const auto& kv : vars) unsetenv(kv.first);
    }
  };
  std::optional<LauncherEnv> env;
  env.emplace();
  int seen_rank = -1;
  bool had_store = true;
  const int code = execute_run(rc, host, [&](RunContext& ctx) {
    seen_rank = ctx.rendezvous.rank;
    had_store = ctx.store != nullptr;
    ctx.report.step(1, {{"loss", 1.0}});
    ctx.report.event("checkpoint", "not really");
    return TrainResult::Finished;
  });
  env.reset();
  CHECK(code == 0);
  CHECK(seen_rank == 1);
  CHECK_FALSE(had_store);
  CHECK_FALSE(std::filesystem::exists(d / "runs.db"));
  CHECK_FALSE(std::filesystem::exists(d / "out/report.jsonl"));
  CHECK_FALSE(std::filesystem::exists(d / "out/config.toml"));
}

TEST_CASE("a failing run is recorded as failed with the error message") {
  test::TempDir d;
  const ResolvedConfig rc = config_in(d, "bad");
  PluginHost host;
  int code = execute_run(rc, host, [](RunContext&) -> TrainResult { throw Error("data.h5: shard is empty"); });
  CHECK(code == 1);
  auto store = RunStore::open(d / "runs.db");
  auto runs = store->list_runs();
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].status == RunStatus::Failed);
  CHECK(runs[0].message == "data.h5: shard is empty");
}

TEST_CASE("SIGTERM stops a run cleanly and marks it interrupted") {
  test::TempDir d;
  const ResolvedConfig rc = config_in(d, "sig");
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(ready[0]);
    PluginHost host;
    int code = execute_run(rc, host, [&](RunContext& ctx) {
      for (std::int64_t s = 1;; ++s) {
        if (stop_requested()) return TrainResult::Interrupted;  // a real loop saves a checkpoint here
        ctx.report.step(s, {{"loss", 1.0}});
        if (s == 5) (void)!write(ready[1], "r", 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
    _exit(code);
  }
  close(ready[1]);
  char c;
  REQUIRE(read(ready[0], &c, 1) == 1);
  kill(child, SIGTERM);
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
  auto store = RunStore::open(d / "runs.db");
  auto runs = store->list_runs();
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].status == RunStatus::Interrupted);
  CHECK(runs[0].message == "stopped by signal 15");
  CHECK(store->metrics(runs[0].id, "loss").size() >= 5);
}
