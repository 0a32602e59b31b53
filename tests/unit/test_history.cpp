// test_history.cpp - the run history library (core/src/history): statistics, seed tables and their
// formats on a store with hand-picked values (history_fixture.hpp derives every expected number).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "bertx/error.hpp"
#include "history/format.hpp"
#include "history/svg.hpp"
#include "history/table.hpp"
#include "history_fixture.hpp"
#include "store/store.hpp"
#include "test_util.hpp"

using namespace bertx;
using bertx::test::error_of;
using namespace bertx::history;

TEST_CASE("column statistics: mean and sample standard deviation (n-1) and min and max") {
  // {2,4,4,4,5,5,7,9}: sum 40, mean 5, squared deviations 9+1+1+1+0+0+4+16 = 32, sample variance 32/7.
  const auto s = column_stats({2, 4, 4, 4, 5, 5, 7, 9});
  CHECK(s.n == 8);
  CHECK(s.mean == 5.0);
  CHECK(s.stdev == doctest::Approx(std::sqrt(32.0 / 7.0)).epsilon(1e-15));
  CHECK(s.min == 2.0);
  CHECK(s.max == 9.0);
  const auto one = column_stats({3.5});
  CHECK(one.mean == 3.5);
  CHECK(std::isnan(one.stdev));  // undefined for one value, not 0
  CHECK(std::isnan(column_stats({}).mean));
  const auto with_nan = column_stats({1.0, std::nan("")});
  CHECK(std::isnan(with_nan.mean));
  CHECK(std::isnan(with_nan.max));
}

TEST_CASE("best direction follows the metric name") {
  CHECK(lower_is_better("loss"));
  CHECK(lower_is_better("eval_MLM_Loss"));
  CHECK(lower_is_better("perplexity"));
  CHECK(lower_is_better("error_rate"));
  CHECK_FALSE(lower_is_better("f1"));
  CHECK_FALSE(lower_is_better("exact_match"));
}

TEST_CASE("format helpers: shortest round trip and CSV quoting and XML escaping and aligned text") {
  CHECK(shortest(0.1) == "0.1");
  CHECK(shortest(60) == "60");
  CHECK(std::stod(shortest(1.0 / 3.0)) == 1.0 / 3.0);
  CHECK(fixed(1.0 / 3.0, 3) == "0.333");
  CHECK(fixed(std::nullopt, 3) == "-");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_field("plain") == "plain");
  CHECK(xml_escape("a<b & \"c\">") == "a&lt;b &amp; &quot;c&quot;&gt;");
  CHECK(text_grid({{"a", "1"}, {}, {"bbb", "22"}}, {false, true}) == "a     1\n-------\nbbb  22\n");
  CHECK(parse_format("md") == Format::Markdown);
  const std::string bad = error_of([] { parse_format("xlsx"); });
  CHECK(bad == "--format 'xlsx': expected text, markdown, csv or json");
}

TEST_CASE("seed table of a sweep: newest finished run per seed with statistics as Markdown and CSV, and wall times") {
  test::TempDir d;
  test::fill_history_store(d / "h.db");
  auto store = RunStore::open(d / "h.db");
  TableQuery q;
  q.sweep_id = 1;
  q.metrics = {"f1", "exact_match"};
  const auto t = seed_table(*store, q);
  REQUIRE(t.rows.size() == 4);
  CHECK(t.rows[1].seed == 1);
  CHECK(t.rows[1].run_id == 3);  // run 2 (seed 1) failed; run 7 is another sweep's
  CHECK_FALSE(t.rows[3].values[1].has_value());
  REQUIRE(t.left_out.size() == 1);
  CHECK(t.left_out[0] == "seed 4: run 6 failed");
  CHECK(t.stats[0].n == 4);
  CHECK(t.stats[0].mean == 0.5);
  CHECK(t.stats[0].stdev == 0.5);
  CHECK(t.stats[1].n == 3);
  CHECK(t.stats[1].mean == 70.0);
  CHECK(t.stats[1].stdev == 10.0);
  CHECK(format_seed_table(t, Format::Markdown, 4) == test::kExpectedMarkdown);
  CHECK(format_seed_table(t, Format::Csv, 4) == test::kExpectedCsv);
  const std::string text = format_seed_table(t, Format::Text, 2);
  CHECK(text.rfind("sweep 1 (/x/exp.toml): final values, 4 seed(s)\n", 0) == 0);
  CHECK(text.find("seed  run    f1  exact_match\n") != std::string::npos);
  CHECK(text.find("std        0.50        10.00\n") != std::string::npos);
  const std::string json = format_seed_table(t, Format::Json, 4);
  CHECK(json.find("\"exact_match\": null") != std::string::npos);

  q.best = true;
  q.metrics = {"f1", "loss"};
  const auto best = seed_table(*store, q);
  CHECK(best.rows[0].values[0] == 0.75);  // f1: highest
  CHECK(best.rows[0].values[1] == 1.5);   // loss: lowest
  CHECK(best.stats[0].mean == 0.625);
  CHECK(best.stats[1].n == 1);
  CHECK(format_seed_table(best, Format::Csv, 4).find("\nstd,,0.5") == std::string::npos);
  CHECK(format_seed_table(best, Format::Csv, 4).find("\nmean,,0.625,1.5\n") != std::string::npos);

  // Column wall_s: each chosen run's wall time from its record, not a logged metric.
  q.best = false;
  q.metrics = {"f1", kWallColumn};
  const auto wall = seed_table(*store, q);
  REQUIRE(wall.rows.size() == 4);
  std::vector<double> walls;
  for (const auto& row : wall.rows) {
    const auto r = store->get_run(row.run_id);
    REQUIRE(r.has_value());
    REQUIRE(row.values[1].has_value());
    CHECK(*row.values[1] == r->ended_at - r->started_at);
    CHECK(*row.values[1] >= 0.0);
    walls.push_back(*row.values[1]);
  }
  CHECK(wall.stats[1].n == 4);
  CHECK(wall.stats[1].mean == doctest::Approx(column_stats(walls).mean));
  CHECK(format_seed_table(wall, Format::Csv, 4).rfind("seed,run,f1,wall_s\n", 0) == 0);
}

TEST_CASE("seed table by experiment name and its one-line errors") {
  test::TempDir d;
  test::fill_history_store(d / "h.db");
  auto store = RunStore::open(d / "h.db");
  TableQuery q;
  q.experiment = "other";
  q.metrics = {"f1"};
  const auto t = seed_table(*store, q);
  REQUIRE(t.rows.size() == 1);
  CHECK(t.rows[0].values[0] == 100.0);

  q.metrics = {"f2"};
  const std::string unknown = error_of([&] { seed_table(*store, q); });
  CHECK(unknown == "--metric f2: none of the 1 selected run(s) logged it (they logged: f1)");
  q.experiment = "nope";
  CHECK(error_of([&] { seed_table(*store, q); }).rfind("--experiment nope: no runs with this name in ", 0) == 0);
  TableQuery s;
  s.sweep_id = 9;
  s.metrics = {"f1"};
  CHECK(error_of([&] { seed_table(*store, s); }) == "--sweep 9: no such sweep in " + (d / "h.db"));
}

TEST_CASE("plot ticks are round numbers spanning the data") {
  CHECK(nice_ticks(10, 20) == std::vector<double>{10, 12, 14, 16, 18, 20});  // range 10 / 5 = 2
  CHECK(nice_ticks(1, 30) == std::vector<double>{0, 10, 20, 30});            // 29 / 5 = 5.8 -> 10
  const auto t = nice_ticks(0.125, 0.75);                                    // 0.125 -> step 0.2
  REQUIRE(t.size() == 5);
  CHECK(t.front() == doctest::Approx(0.0));
  CHECK(t.back() == doctest::Approx(0.8));
  CHECK(nice_ticks(3, 3).size() >= 2);  // a flat series still gets an axis
  CHECK(error_of([] { svg_plot({}, {}); }) == "plot: no series to draw");
}
