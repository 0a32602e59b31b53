// test_resume_records.cpp - what a resume does to the records a killed process left (found by
// tools/chaos/kill_resume): report.jsonl loses the replayed steps and a torn last line, checkpoint folders
// the process wrote but did not register get their store rows, checkpoint folders disappear at once when
// deleted, a report that cannot be written is an error, and an unwritable output folder fails up front.
#include <doctest/doctest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "base/fs_util.hpp"
#include "host/plugin_host.hpp"
#include "host/report.hpp"
#include "host/run.hpp"
#include "store/store.hpp"
#include "test_util.hpp"
#include "host/progress.hpp"

using namespace bertx;
namespace fs = std::filesystem;

namespace {

std::vector<nlohmann::json> records(const std::string& path) {
  std::istringstream lines(test::read_text(path));
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(lines, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::string step_line(const char* type, int step, std::int64_t run = 1) {
  return nlohmann::json{{"type", type}, {"run", run}, {"step", step}, {"metrics", {{"loss", 1.0 / step}}}}.dump() +
         "\n";
}

}  // namespace

TEST_CASE("a resume drops the report.jsonl records logged after its checkpoint and a torn last line") {
  test::TempDir d;
  std::string text = nlohmann::json{{"type", "start"}, {"message", "run 1"}}.dump() + "\n";
  text += step_line("step", 7, /*run=*/9);  // another run's record (phase 1 in the same folder): kept
  for (int s = 1; s <= 5; ++s) text += step_line("step", s);
  text += step_line("metrics", 3) + step_line("metrics", 5) +
          nlohmann::json{{"type", "checkpoint"}, {"message", "x/3"}}.dump() + "\n";
  text += R"({"type":"step","step":6,"metr)";  // the killed process's half-written line
  test::write_text(d / "report.jsonl", text);

  CHECK(drop_report_steps_after(d / "report.jsonl", 1, 3) == 4);  // steps 4 and 5, eval at 5, the torn line
  const auto kept = records(d / "report.jsonl");
  REQUIRE(kept.size() == 7);
  CHECK(kept[0]["type"] == "start");
  CHECK(kept[1]["run"] == 9);
  CHECK(kept[4]["step"] == 3);
  CHECK(kept[5]["type"] == "metrics");
  CHECK(kept[6]["type"] == "checkpoint");
  const std::string clean = test::read_text(d / "report.jsonl");
  CHECK(drop_report_steps_after(d / "report.jsonl", 1, 3) == 0);  // nothing left to drop: the file is untouched
  CHECK(test::read_text(d / "report.jsonl") == clean);
  CHECK(drop_report_steps_after(d / "missing.jsonl", 1, 0) == 0);
  CHECK_FALSE(fs::exists(d / "report.jsonl.tmp"));
}

TEST_CASE("a resumed run logs each replayed step once and registers the checkpoints its killed process wrote") {
  test::TempDir d;
  test::write_text(d / "exp.toml", "[run]\nname = \"resume\"\nseed = 3\n[train]\nmax_steps = 6\n");
  PluginHost host;
  const ResolvedConfig rc = resolve(
      Experiment::load(d / "exp.toml", {"run.output_dir=" + (d / "out"), "run.store=" + (d / "runs.db")}), host);
  // The killed process: run 1 logged steps 1..5, wrote checkpoints 2 and 4, registered only 2.
  std::int64_t id = 0;
  {
    auto store = RunStore::open(d / "runs.db");
    NewRun nr;
    nr.name = "resume";
    id = store->begin_run(nr);
    for (int s = 1; s <= 5; ++s) store->log_metrics(id, s, {{"loss", 1.0 / s}});
    std::string report;
    for (int s = 1; s <= 5; ++s) report += step_line("step", s);
    test::write_text(d / "out/report.jsonl", report);
    const std::string root = checkpoint_root(rc);
    for (std::int64_t s : {2, 4}) {
      Progress p;
      p.step = s;
      p.phase = "phase1";
      p.run_id = id;
      test::write_text(checkpoint_dir(root, s) + "/progress.json", progress_json(p));
    }
    store->add_artifact(id, "checkpoint", checkpoint_dir(root, 2), 2);
  }
  // Not a real trainer: it resumes from step 4 and logs 5 and 6 again.
  const int code = execute_run(rc, host, [](RunContext& ctx) {
    for (int s = 5; s <= 6; ++s) ctx.report.step(s, {{"loss", 1.0 / s}});
    return TrainResult::Finished;
  });
  REQUIRE(code == 0);
  auto store = RunStore::open(d / "runs.db");
  REQUIRE(store->list_runs().size() == 1);  // the same record continued
  const auto loss = store->metrics(id, "loss");
  REQUIRE(loss.size() == 6);
  for (int s = 1; s <= 6; ++s) CHECK(loss[static_cast<std::size_t>(s - 1)].step == s);
  std::vector<std::int64_t> registered;
  for (const auto& a : store->artifacts(id))
    if (a.kind == "checkpoint") registered.push_back(a.step);
  CHECK(registered == std::vector<std::int64_t>{2, 4});
  std::vector<int> steps;
  for (const auto& r : records(d / "out/report.jsonl"))
    if (r["type"] == "step") steps.push_back(r["step"].get<int>());
  CHECK(steps == std::vector<int>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("a deleted checkpoint folder disappears at once and its leftovers are never picked") {
  test::TempDir d;
  test::write_text(d / "5/progress.json", "{}");
  test::write_text(d / "5/model.safetensors", "x");
  test::write_text(d / "9.old/progress.json", "{}");  // a removal that a kill interrupted
  std::error_code ec;
  remove_checkpoint_dir(d / "5", ec);
  CHECK_FALSE(ec);
  CHECK_FALSE(fs::exists(d / "5"));
  CHECK_FALSE(fs::exists(d / "5.old"));
  CHECK(checkpoint_steps(d.path.string()).empty());
  CHECK_FALSE(latest_checkpoint(d.path.string()).has_value());
}

TEST_CASE("a report that cannot be written stops the run with an error naming the file") {
  test::TempDir d;
  Reporter r(nullptr, 1, "/dev/full", 10);  // every write: No space left on device
  const std::string msg = test::error_of([&] { r.step(1, {{"loss", 1.0}}); });
  CHECK(msg == "/dev/full: cannot append to the run report: No space left on device");
}

TEST_CASE("an output folder that cannot be created or written is refused with the reason") {
  test::TempDir d;
  test::write_text(d / "file", "not a folder");
  const std::string msg = test::error_of([&] { require_writable_dir(d / "file/out", "[run] output_dir"); });
  CHECK(msg.rfind("[run] output_dir '" + (d / "file/out") + "': cannot create the folder: ", 0) == 0);
  require_writable_dir(d / "new/out", "[run] output_dir");  // created, probe file gone
  CHECK(fs::is_directory(d / "new/out"));
  CHECK(fs::is_empty(d / "new/out"));
}

TEST_CASE("a run killed before its first checkpoint starts over in the same record and a failed one does not") {
  test::TempDir d;
  test::write_text(d / "exp.toml", "[run]\nname = \"again\"\nseed = 3\n[train]\nmax_steps = 3\n");
  PluginHost host;
  const ResolvedConfig rc = resolve(
      Experiment::load(d / "exp.toml", {"run.output_dir=" + (d / "out"), "run.store=" + (d / "runs.db")}), host);
  const TrainFn three_steps = [](RunContext& ctx) {
    for (int s = 1; s <= 3; ++s) ctx.report.step(s, {{"loss", 1.0 / s}});
    return TrainResult::Finished;
  };
  auto begin = [&](RunStatus how) {  // what a process that ended before its first checkpoint left
    auto store = RunStore::open(d / "runs.db");
    NewRun nr;
    nr.name = "again";
    nr.config_hash = rc.hash;
    nr.output_dir = rc.run.output_dir;
    const std::int64_t id = store->begin_run(nr);
    for (int s = 1; s <= 2; ++s) store->log_metrics(id, s, {{"loss", 1.0 / s}});
    test::write_text(d / "out/report.jsonl", step_line("step", 1, id) + step_line("step", 2, id));
    store->finish_run(id, how);
    return id;
  };
  const std::int64_t killed = begin(RunStatus::Interrupted);
  REQUIRE(execute_run(rc, host, three_steps) == 0);
  {
    auto store = RunStore::open(d / "runs.db");
    REQUIRE(store->list_runs().size() == 1);
    CHECK(store->get_run(killed)->status == RunStatus::Finished);
    CHECK(store->metrics(killed, "loss").size() == 3);
    int step_records = 0;
    for (const auto& r : records(d / "out/report.jsonl")) step_records += r["type"] == "step";
    CHECK(step_records == 3);
  }
  const std::int64_t failed = begin(RunStatus::Failed);
  REQUIRE(execute_run(rc, host, three_steps) == 0);
  auto store = RunStore::open(d / "runs.db");
  CHECK(store->list_runs().size() == 3);  // the failed record stays as it was, the rerun is a new one
  CHECK(store->get_run(failed)->status == RunStatus::Failed);
  CHECK(store->metrics(failed, "loss").size() == 2);
}
