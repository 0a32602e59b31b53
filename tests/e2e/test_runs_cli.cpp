// test_runs_cli.cpp - `bertx runs table|compare|plot|export|gc` as a user runs them, on a store filled by
// the test with hand-picked values (history_fixture.hpp): exact Markdown/CSV snapshots, well-formed SVG.
#include <doctest/doctest.h>

#include "history_fixture.hpp"
#include "store.hpp"
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
  auto note = run_command("(" + kBertx + " runs --store " + (d / "h.db") + " table --sweep 1 --metric f1 2>&1 >/dev/null)");
  CHECK(note.output == "left out (no finished run): seed 4: run 6 failed\n");

  auto bad = run_command(kBertx + " runs --store " + (d / "h.db") + " table --sweep 1 --metric f1 --format xlsx");
  CHECK(bad.exit_code == 2);
  CHECK(bad.output == "bertx: error: --format 'xlsx': expected text, markdown, csv or json\n");
  auto neither = run_command(kBertx + " runs --store " + (d / "h.db") + " table --metric f1");
  CHECK(neither.exit_code == 2);
  CHECK(neither.output.find("--sweep ID or --experiment NAME") != std::string::npos);
}
