// history/export.cpp - see export.hpp. CSV numbers are shortest round trip; NaN is "nan" in CSV and null in JSON;
// TensorBoard keeps each value as float32 (tboard/events.hpp).
#include "history/export.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "history/format.hpp"
#include "store/store.hpp"
#include "tboard/events.hpp"

namespace bertx::history {

namespace {

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
std::string sweep_text(const RunRecord& r) { return r.sweep_id ? std::to_string(*r.sweep_id) : ""; }
nlohmann::json sweep_json(const RunRecord& r) {
  return r.sweep_id ? nlohmann::json(*r.sweep_id) : nlohmann::json(nullptr);
}

// Run r's metric rows: every metric, or those named.
std::vector<MetricRow> metric_rows(const RunStore& store, const RunRecord& r, const std::vector<std::string>& metrics) {
  if (metrics.empty()) return store.metrics(r.id);
  std::vector<MetricRow> rows;
  for (const auto& m : metrics) {
    auto part = store.metrics(r.id, m);
    rows.insert(rows.end(), part.begin(), part.end());
  }
  return rows;
}

// A folder name from a run's name: letters, digits, '.', '-', '_' kept, anything else '_'.
std::string folder_safe(const std::string& name) {
  std::string out = name.empty() ? "run" : name;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  return out;
}

}  // namespace

ExportFormat parse_export_format(const std::string& name) {
  if (name == "csv") return ExportFormat::Csv;
  if (name == "jsonl" || name == "json") return ExportFormat::JsonLines;
  if (name == "tensorboard" || name == "tb") return ExportFormat::TensorBoard;
  throw Error("--format '" + name + "': expected csv, jsonl or tensorboard");
}

std::size_t export_tensorboard(const RunStore& store, const std::vector<RunRecord>& runs,
                               const std::vector<std::string>& metrics, const std::string& folder) {
  namespace fs = std::filesystem;
  std::size_t n = 0;
  for (const auto& r : runs) {
    std::map<std::int64_t, std::pair<double, tboard::Scalars>> steps;  // step -> (latest row time, values)
    for (const auto& m : metric_rows(store, r, metrics)) {
      auto& [time, values] = steps[m.step];
      time = std::max(time, m.time);
      values.emplace_back(m.name, m.value);
    }
    const fs::path dir = fs::path(folder) /
                         ("run" + std::to_string(r.id) + "-" + folder_safe(r.name) + "-seed" + std::to_string(r.seed));
    const fs::path part = dir.string() + ".part";
    std::error_code ec;
    fs::remove_all(part, ec);
    {
      tboard::EventWriter writer(part.string(), r.started_at);
      for (const auto& [step, tv] : steps) {
        writer.scalars(step, tv.second, tv.first);
        n += tv.second.size();
      }
    }
    fs::remove_all(dir, ec);
    fs::rename(part, dir, ec);
    if (ec) throw Error(dir.string() + ": cannot move the exported run into place (" + ec.message() + ")");
  }
  return n;
}

std::size_t export_metrics(const RunStore& store, const std::vector<RunRecord>& runs,
                           const std::vector<std::string>& metrics, ExportFormat format, std::ostream& out) {
  const bool csv = format == ExportFormat::Csv;
  if (csv) out << "run,name,seed,sweep,status,step,metric,value,time\n";
  std::size_t n = 0;
  for (const auto& r : runs) {
    for (const auto& m : metric_rows(store, r, metrics)) {
      if (csv)
        out << csv_line({std::to_string(r.id), r.name, std::to_string(r.seed), sweep_text(r), run_status_name(r.status),
                         std::to_string(m.step), m.name, shortest(m.value), shortest(m.time)});
      else
        out << nlohmann::json{{"run", r.id},
                              {"name", r.name},
                              {"seed", r.seed},
                              {"sweep", sweep_json(r)},
                              {"status", run_status_name(r.status)},
                              {"step", m.step},
                              {"metric", m.name},
                              {"value", number(m.value)},
                              {"time", m.time}}
                   .dump()
            << "\n";
      ++n;
    }
  }
  return n;
}

std::size_t export_runs(const RunStore& store, const std::vector<RunRecord>& runs, ExportFormat format,
                        std::ostream& out) {
  // Columns for the final value of every metric any of the runs logged, sorted by name.
  std::set<std::string> names;
  std::vector<std::map<std::string, double>> finals;
  for (const auto& r : runs) {
    std::map<std::string, double> f;
    for (const auto& s : store.metric_summary(r.id)) {
      names.insert(s.name);
      f[s.name] = s.last;
    }
    finals.push_back(std::move(f));
  }
  const bool csv = format == ExportFormat::Csv;
  if (csv) {
    std::vector<std::string> header = {"run",    "name",       "experiment", "seed",       "sweep",
                                       "status", "started_at", "ended_at",   "duration_s", "config_hash",
                                       "host",   "world_size", "git_rev",    "output_dir", "message"};
    for (const auto& m : names) header.push_back(m);
    out << csv_line(header);
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    const std::string duration = r.ended_at > 0 ? shortest(r.ended_at - r.started_at) : "";
    if (csv) {
      std::vector<std::string> line = {std::to_string(r.id),
                                       r.name,
                                       r.experiment,
                                       std::to_string(r.seed),
                                       sweep_text(r),
                                       run_status_name(r.status),
                                       shortest(r.started_at),
                                       r.ended_at > 0 ? shortest(r.ended_at) : "",
                                       duration,
                                       r.config_hash,
                                       r.host,
                                       std::to_string(r.world_size),
                                       r.git_rev,
                                       r.output_dir,
                                       r.message};
      for (const auto& m : names) line.push_back(finals[i].count(m) ? shortest(finals[i].at(m)) : "");
      out << csv_line(line);
    } else {
      nlohmann::json j = {{"run", r.id},
                          {"name", r.name},
                          {"experiment", r.experiment},
                          {"seed", r.seed},
                          {"sweep", sweep_json(r)},
                          {"status", run_status_name(r.status)},
                          {"started_at", r.started_at},
                          {"ended_at", r.ended_at > 0 ? nlohmann::json(r.ended_at) : nlohmann::json(nullptr)},
                          {"config_hash", r.config_hash},
                          {"host", r.host},
                          {"world_size", r.world_size},
                          {"git_rev", r.git_rev},
                          {"output_dir", r.output_dir},
                          {"message", r.message}};
      nlohmann::json fm = nlohmann::json::object();
      for (const auto& [k, v] : finals[i]) fm[k] = number(v);
      j["final"] = fm;
      out << j.dump() << "\n";
    }
  }
  return runs.size();
}

}  // namespace bertx::history
