// test_runs_cli.cpp - `bertx runs table|compare|plot|export|gc` as a user runs them, on a store filled by
// the test with hand-picked values (history_fixture.hpp): exact Markdown/CSV snapshots, well-formed SVG.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "history_fixture.hpp"
#include "store/store.hpp"
#include "test_util.hpp"

using bertx::test::run_command;

static const std::string kBertx = BERTX_BIN;

namespace {

// stdout only (stderr carries the "left out" notes)
bertx::test::CommandResult runs_cmd(const std::string& store, const std::string& args) {
  return run_command("(" + kBertx + " runs --store " + store + " " + args + " 2>/dev/null)");
}

}  // namespace

TEST_CASE("runs table prints the seeds' stability table as Markdown and CSV") {
  bertx::test::TempDir d;
  bertx::test::fill_history_store(d / "h.db");
  auto md = runs_cmd(d / "h.db", "table --sweep 1 --metric f1 --metric exact_match --format markdown");
  CHECK(md.exit_code == 0);
  CHECK(md.output == bertx::test::kExpectedMarkdown);
  auto csv = runs_cmd(d / "h.db", "table --sweep 1 --metric f1 --metric exact_match --final --format csv");
  CHECK(csv.exit_code == 0);
  CHECK(csv.output == bertx::test::kExpectedCsv);
  auto note =
      run_command("(" + kBertx + " runs --store " + (d / "h.db") + " table --sweep 1 --metric f1 2>&1 >/dev/null)");
  CHECK(note.output == "left out (no finished run): seed 4: run 6 failed\n");

  auto bad = run_command(kBertx + " runs --store " + (d / "h.db") + " table --sweep 1 --metric f1 --format xlsx");
  CHECK(bad.exit_code == 2);
  CHECK(bad.output == "bertx: error: --format 'xlsx': expected text, markdown, csv or json\n");
  auto neither = run_command(kBertx + " runs --store " + (d / "h.db") + " table --metric f1");
  CHECK(neither.exit_code == 2);
  CHECK(neither.output.find("--sweep ID or --experiment NAME") != std::string::npos);
}

TEST_CASE("runs compare shows the config keys and final metrics that differ") {
  bertx::test::TempDir d;
  bertx::test::fill_history_store(d / "h.db");
  auto c = runs_cmd(d / "h.db", "compare 1 3");
  INFO(c.output);
  CHECK(c.exit_code == 0);
  CHECK(c.output.rfind("run 1 (squad, seed 0, finished)  vs  run 3 (squad, seed 1, finished)\n", 0) == 0);
  CHECK(c.output.find("config (1 of 2 keys differ):\n") != std::string::npos);
  CHECK(c.output.find("\nrun.seed  0      1\n") != std::string::npos);
  // metric rows: name, run 1, run 3, run 3 - run 1 (values from the fixture: f1 0.25/0.25, exact_match 60/70, loss 1.5/-)
  CHECK(c.output.find("\nexact_match     60     70     10\n") != std::string::npos);
  CHECK(c.output.find("\nf1            0.25   0.25      0\n") != std::string::npos);
  CHECK(c.output.find("\nloss           1.5      -      -\n") != std::string::npos);
  auto missing = run_command(kBertx + " runs --store " + (d / "h.db") + " compare 1 99");
  CHECK(missing.exit_code == 2);
  CHECK(missing.output.find("runs compare: no run with id 99") != std::string::npos);
}

TEST_CASE("runs plot writes well-formed SVG with one path per run and axes and ticks and labels and a legend") {
  bertx::test::TempDir d;
  bertx::test::fill_history_store(d / "h.db");
  const std::string svg = d / "f1.svg";
  auto p = runs_cmd(d / "h.db", "plot 1 3 4 --metric f1 --out " + svg);
  INFO(p.output);
  REQUIRE(p.exit_code == 0);
  const std::string text = bertx::test::read_text(svg);
  std::size_t paths = 0;
  for (std::size_t at = 0; (at = text.find("<path", at)) != std::string::npos; ++at) ++paths;
  CHECK(paths == 3);
  if (run_command("python3 -c pass").exit_code == 0) {
    // Steps 10..20: ticks 10, 12, ..., 20 (step 2); f1 0.125..0.75: ticks 0, 0.2, ..., 0.8 (step 0.2).
    const std::string py =
        "import sys, xml.etree.ElementTree as ET\n"
        "ns = '{http://www.w3.org/2000/svg}'\n"
        "root = ET.parse(sys.argv[1]).getroot()\n"
        "assert root.tag == ns + 'svg', root.tag\n"
        "paths = root.findall('.//' + ns + 'path')\n"
        "texts = [t.text for t in root.iter(ns + 'text')]\n"
        "print('paths', len(paths), 'with d', sum(1 for p in paths if p.get('d', '').startswith('M')))\n"
        "print('axis lines', len(root.find(ns + 'g[@class=\"axes\"]').findall(ns + 'line')) >= 2)\n"
        "for want in ['step', 'f1', '10', '20', '0.8', 'run 1: squad seed 0', 'run 3: squad seed 1', 'run 4: squad "
        "seed 2']:\n"
        "    print(want, want in texts)\n";
    bertx::test::write_text(d / "check.py", py);
    auto r = run_command("python3 " + (d / "check.py") + " " + svg);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("paths 3 with d 3\n") != std::string::npos);
    CHECK(r.output.find("axis lines True\n") != std::string::npos);
    CHECK(r.output.find("False") == std::string::npos);
  } else {
    MESSAGE("python3 not found: SVG checked by path count only");
  }
  auto none = run_command(kBertx + " runs --store " + (d / "h.db") + " plot 1 6 --metric f1 --out " + svg);
  CHECK(none.exit_code == 2);
  CHECK(none.output == "bertx: error: --metric f1: run 6 has no such rows (it logged: nothing)\n");
}

TEST_CASE("runs export writes metric rows and run rows as CSV and JSON lines") {
  bertx::test::TempDir d;
  bertx::test::fill_history_store(d / "h.db");
  auto csv = runs_cmd(d / "h.db", "export --sweep 1 --metric exact_match");
  REQUIRE(csv.exit_code == 0);
  std::string without_time;  // the time column is the wall clock: drop it
  std::istringstream lines(csv.output);
  for (std::string line; std::getline(lines, line);) without_time += line.substr(0, line.rfind(',')) + "\n";
  CHECK(without_time ==
        "run,name,seed,sweep,status,step,metric,value\n"
        "1,squad,0,1,finished,20,exact_match,60\n"
        "3,squad,1,1,finished,20,exact_match,70\n"
        "4,squad,2,1,finished,20,exact_match,80\n");
  auto jl = runs_cmd(d / "h.db", "export --runs --format jsonl --out " + (d / "runs.jsonl"));
  REQUIRE(jl.exit_code == 0);
  const std::string runs = bertx::test::read_text(d / "runs.jsonl");
  CHECK(std::count(runs.begin(), runs.end(), '\n') == 7);
  CHECK(runs.find("\"final\":{\"f1\":1.25},") != std::string::npos);  // run 5
  CHECK(runs.find("\"sweep\":2") != std::string::npos);               // run 7
}

TEST_CASE("runs gc removes the checkpoints of selected runs but never the newest of a running run") {
  bertx::test::TempDir d;
  bertx::test::fill_history_store(d / "h.db");
  auto ckpt = [&](bertx::RunStore& store, std::int64_t run, std::int64_t step, bool real = true) {
    const std::string dir = d / ("ckpt/" + std::to_string(run) + "/" + std::to_string(step));
    bertx::test::write_text(dir + "/model.safetensors", std::string(1000, 'x'));
    if (real) bertx::test::write_text(dir + "/progress.json", "{}");
    store.add_artifact(run, "checkpoint", dir, step);
    return dir;
  };
  std::string c1, c2, c6, c8a, c8b, fake;
  {
    auto store = bertx::RunStore::open(d / "h.db");
    bertx::NewRun nr;
    nr.name = "squad";
    nr.seed = 9;
    nr.plugins = "[]";
    const auto running = store->begin_run(nr);  // run 8, this (live) process
    REQUIRE(running == 8);
    c1 = ckpt(*store, 1, 20);
    c2 = ckpt(*store, 2, 10);
    c6 = ckpt(*store, 6, 5);
    fake = ckpt(*store, 6, 7, false);
    c8a = ckpt(*store, 8, 10);
    c8b = ckpt(*store, 8, 20);
  }
  auto none = run_command(kBertx + " runs --store " + (d / "h.db") + " gc");
  CHECK(none.exit_code == 2);
  CHECK(none.output.find("runs gc needs a selection") != std::string::npos);

  auto dry = runs_cmd(d / "h.db", "gc --status failed --dry-run");
  INFO(dry.output);
  CHECK(dry.exit_code == 0);
  CHECK(dry.output.find(c2 + "  would remove 1002 B") != std::string::npos);
  CHECK(dry.output.find(c6 + "  would remove 1002 B") != std::string::npos);
  CHECK(dry.output.find(fake + "  kept: not a bertx checkpoint folder") != std::string::npos);
  CHECK(dry.output.find("would remove 2 checkpoint(s), 2.0 KB") != std::string::npos);  // 2004 / 1024 = 1.96
  CHECK(std::filesystem::exists(c2));

  auto gc = runs_cmd(d / "h.db", "gc --status failed");
  CHECK(gc.exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(c2));
  CHECK_FALSE(std::filesystem::exists(c6));
  CHECK(std::filesystem::exists(fake));
  CHECK(std::filesystem::exists(c1));

  // --keep-last 2 keeps the two newest "squad" runs (8 running, 6): run 1 is older and loses its checkpoint.
  auto keep = runs_cmd(d / "h.db", "gc --keep-last 2 --experiment squad");
  INFO(keep.output);
  CHECK_FALSE(std::filesystem::exists(c1));
  CHECK(std::filesystem::exists(c8a));
  auto running = runs_cmd(d / "h.db", "gc --run 8");
  INFO(running.output);
  CHECK(running.output.find(c8b + "  kept: newest checkpoint of a running run") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(c8a));
  CHECK(std::filesystem::exists(c8b));
  auto store = bertx::RunStore::open(d / "h.db");
  for (std::int64_t id : {1, 2, 6, 8}) {
    std::vector<std::string> left;
    for (const auto& a : store->artifacts(id))
      if (a.kind == "checkpoint") left.push_back(a.path);
    CHECK(left == (id == 6   ? std::vector<std::string>{fake}
                   : id == 8 ? std::vector<std::string>{c8b}
                             : std::vector<std::string>{}));
  }
}
