// history/table.cpp - see table.hpp. Statistics are two-pass (mean, then squared deviations).
#include "history/table.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "store/store.hpp"

namespace bertx::history {

ColumnStats column_stats(const std::vector<double>& values) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  ColumnStats s;
  s.n = values.size();
  if (values.empty()) return {0, nan, nan, nan, nan};
  bool any_nan = false;
  double sum = 0;
  s.min = s.max = values[0];
  for (double v : values) {
    any_nan = any_nan || std::isnan(v);
    sum += v;
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
  }
  s.mean = sum / static_cast<double>(values.size());
  double ss = 0;
  for (double v : values) ss += (v - s.mean) * (v - s.mean);
  s.stdev = values.size() < 2 ? nan : std::sqrt(ss / static_cast<double>(values.size() - 1));
  if (any_nan) s.min = s.max = nan;
  return s;
}

bool lower_is_better(const std::string& metric) {
  std::string m = metric;
  for (char& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* word : {"loss", "perplexity", "ppl", "error"})
    if (m.find(word) != std::string::npos) return true;
  return false;
}

SeedTable seed_table(const RunStore& store, const TableQuery& q) {
  if (q.metrics.empty()) throw Error("runs table needs at least one --metric NAME (e.g. --metric f1)");
  RunFilter filter;
  SeedTable t;
  if (q.sweep_id) {
    auto sweep = store.get_sweep(*q.sweep_id);
    if (!sweep) throw Error("--sweep " + std::to_string(*q.sweep_id) + ": no such sweep in " + store.path());
    filter.sweep_id = q.sweep_id;
    t.title = "sweep " + std::to_string(*q.sweep_id) + " (" + sweep->experiment + ")";
  } else {
    if (q.experiment.empty()) throw Error("runs table needs --sweep ID or --experiment NAME");
    filter.name = q.experiment;
    t.title = "experiment " + q.experiment;
  }
  const auto runs = store.list_runs(filter);  // newest first
  if (runs.empty())
    throw Error((q.sweep_id ? "--sweep " + std::to_string(*q.sweep_id) + ": the sweep has no runs"
                            : "--experiment " + q.experiment + ": no runs with this name") +
                " in " + store.path());
  // The newest finished run of each seed; seeds without one are reported by their newest run.
  std::map<std::int64_t, const RunRecord*> chosen, newest;
  for (const auto& r : runs) {
    newest.emplace(r.seed, &r);
    if (r.status == RunStatus::Finished) chosen.emplace(r.seed, &r);
  }
  for (const auto& [seed, r] : newest)
    if (!chosen.count(seed))
      t.left_out.push_back("seed " + std::to_string(seed) + ": run " + std::to_string(r->id) + " " +
                           run_status_name(r->status));
  if (chosen.empty())
    throw Error(t.title + " has no finished run yet (" + std::to_string(runs.size()) + " run(s): see bertx runs list)");

  t.metrics = q.metrics;
  t.reduce = q.best ? "best" : "final";
  for (const auto& [seed, r] : chosen) {
    SeedRow row{seed, r->id, {}};
    for (const auto& m : q.metrics)
      row.values.push_back(m == kWallColumn ? std::optional<double>(r->ended_at - r->started_at)
                                            : store.metric_value(r->id, m,
                                                                 !q.best              ? MetricReduce::Final
                                                                 : lower_is_better(m) ? MetricReduce::Min
                                                                                      : MetricReduce::Max));
    t.rows.push_back(std::move(row));
  }
  for (std::size_t c = 0; c < q.metrics.size(); ++c) {
    std::vector<double> col;
    for (const auto& row : t.rows)
      if (row.values[c]) col.push_back(*row.values[c]);
    if (col.empty()) {
      std::set<std::string> known;
      for (const auto& row : t.rows)
        for (const auto& s : store.metric_summary(row.run_id)) known.insert(s.name);
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw Error("--metric " + q.metrics[c] + ": none of the " + std::to_string(t.rows.size()) +
                  " selected run(s) logged it (they logged: " + (list.empty() ? "nothing" : list) + ")");
    }
    t.stats.push_back(column_stats(col));
  }
  t.title += ": " + t.reduce + " values, " + std::to_string(t.rows.size()) + " seed(s)";
  return t;
}

namespace {

nlohmann::json number_or_null(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return nullptr;
  return *v;
}

std::string to_json(const SeedTable& t) {
  nlohmann::json j;
  j["title"] = t.title;
  j["reduce"] = t.reduce;
  j["metrics"] = t.metrics;
  j["rows"] = nlohmann::json::array();
  for (const auto& r : t.rows) {
    nlohmann::json values = nlohmann::json::object();
    for (std::size_t c = 0; c < t.metrics.size(); ++c) values[t.metrics[c]] = number_or_null(r.values[c]);
    j["rows"].push_back({{"seed", r.seed}, {"run", r.run_id}, {"values", values}});
  }
  j["stats"] = nlohmann::json::object();
  for (std::size_t c = 0; c < t.metrics.size(); ++c) {
    const auto& s = t.stats[c];
    j["stats"][t.metrics[c]] = {{"n", s.n},
                                {"mean", number_or_null(s.mean)},
                                {"std", number_or_null(s.stdev)},
                                {"min", number_or_null(s.min)},
                                {"max", number_or_null(s.max)}};
  }
  j["left_out"] = t.left_out;
  return j.dump(2) + "\n";
}

}  // namespace

std::string format_seed_table(const SeedTable& t, Format format, int precision) {
  if (format == Format::Json) return to_json(t);
  const bool csv = format == Format::Csv;
  const std::string missing = csv ? "" : "-";
  auto num = [&](std::optional<double> v) { return csv ? (v ? shortest(*v) : "") : fixed(v, precision, missing); };
  std::vector<std::vector<std::string>> grid;
  std::vector<std::string> header = {"seed", "run"};
  header.insert(header.end(), t.metrics.begin(), t.metrics.end());
  grid.push_back(header);
  for (const auto& r : t.rows) {
    std::vector<std::string> line = {std::to_string(r.seed), std::to_string(r.run_id)};
    for (const auto& v : r.values) line.push_back(num(v));
    grid.push_back(line);
  }
  if (format == Format::Text) grid.emplace_back();  // a rule between the seeds and the statistics
  const std::pair<const char*, double ColumnStats::*> rows[] = {{"mean", &ColumnStats::mean},
                                                                {"std", &ColumnStats::stdev},
                                                                {"min", &ColumnStats::min},
                                                                {"max", &ColumnStats::max}};
  for (const auto& [label, field] : rows) {
    std::vector<std::string> line = {label, ""};
    for (const auto& s : t.stats) {
      const double v = s.*field;
      line.push_back(std::isnan(v) && s.n < 2 && field == &ColumnStats::stdev ? missing : num(v));
    }
    grid.push_back(line);
  }
  std::vector<bool> right(header.size(), true);
  right[0] = false;
  switch (format) {
    case Format::Csv: {
      std::string out;
      for (const auto& line : grid) out += csv_line(line);
      return out;
    }
    case Format::Markdown:
      return markdown_grid(grid, right);
    default:
      return t.title + "\n" + text_grid(grid, right);
  }
}

}  // namespace bertx::history
