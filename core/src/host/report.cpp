// report.cpp - console + JSON lines + store, from Reporter::step/event/summary.
#include "host/report.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "bertx/error.hpp"
#include "base/clock.hpp"
#include "base/fs_util.hpp"
#include "base/json_util.hpp"
#include "store/store.hpp"
#include "tboard/events.hpp"

namespace bertx {

Reporter::Reporter(RunStore* store, std::int64_t run_id, const std::string& jsonl_path, std::int64_t total_steps,
                   int rank)
    : store_(rank == 0 ? store : nullptr),
      run_id_(run_id),
      total_steps_(total_steps),
      rank_(rank),
      jsonl_path_(jsonl_path),
      start_(std::chrono::steady_clock::now()) {
  if (!jsonl_path.empty() && rank == 0) {
    std::error_code ec;
    const auto parent = std::filesystem::path(jsonl_path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    jsonl_ = std::fopen(jsonl_path.c_str(), "a+");
    if (!jsonl_) throw Error(jsonl_path + ": cannot open the run report for appending");
    // A process killed mid-line left a torn last line: end it, so that it stays one bad line (dropped on resume).
    if (std::fseek(jsonl_, -1, SEEK_END) == 0) {
      const int last = std::fgetc(jsonl_);
      std::fseek(jsonl_, 0, SEEK_END);  // switching from reading to writing needs a seek
      if (last != '\n') std::fputc('\n', jsonl_);
    }
  }
}

Reporter::~Reporter() {
  if (jsonl_) std::fclose(jsonl_);
}

void Reporter::write_json(const std::string& line) {
  if (!jsonl_) return;
  std::fputs(line.c_str(), jsonl_);
  std::fputc('\n', jsonl_);
  if (std::fflush(jsonl_) != 0 || std::ferror(jsonl_)) {  // a killed run keeps every line it logged
    const std::string why = std::strerror(errno);
    std::fclose(jsonl_);
    jsonl_ = nullptr;  // the summary after this error must not try again
    throw Error(jsonl_path_ + ": cannot append to the run report: " + why);
  }
}

void Reporter::console(const std::string& line) const {
  if (rank_ == 0)
    spdlog::info("{}", line);
  else
    spdlog::debug("rank {}: {}", rank_, line);
}

std::string Reporter::format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm%02llds", s / 3600, (s / 60) % 60, s % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%llds", s);
  return buf;
}

void Reporter::step(std::int64_t step, const Metrics& metrics, bool progress) {
  const auto now = std::chrono::steady_clock::now();
  if (progress && first_step_ < 0) first_step_ = step, first_step_time_ = now;
  // Rate over the steps since the first logged one (excludes start-up before it).
  const double elapsed = std::chrono::duration<double>(now - first_step_time_).count();
  const double rate =
      (progress && first_step_ >= 0 && step > first_step_ && elapsed > 0) ? (step - first_step_) / elapsed : 0.0;

  std::string line = total_steps_ > 0 ? fmt::format("step {}/{}", step, total_steps_) : fmt::format("step {}", step);
  for (const auto& [k, v] : metrics) line += fmt::format(" | {} {:.5g}", k, v);
  if (rate > 0) {
    line += fmt::format(" | {:.3g} steps/s", rate);
    if (total_steps_ > 0) line += " | ETA " + format_duration((total_steps_ - step) / rate);
  }
  console(line);

  nlohmann::json j{{"type", progress ? "step" : "metrics"},
                   {"run", run_id_},
                   {"step", step},
                   {"time", unix_seconds()},
                   {"elapsed_s", std::chrono::duration<double>(now - start_).count()},
                   {"steps_per_second", rate}};
  nlohmann::json m = nlohmann::json::object();
  for (const auto& [k, v] : metrics) m[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  j["metrics"] = std::move(m);
  write_json(j.dump());
  if (store_) store_->log_metrics(run_id_, step, metrics);
  if (events_) {
    try {
      events_->scalars(step, metrics, unix_seconds());
    } catch (const std::exception& e) {
      spdlog::warn(
          "{}; no more TensorBoard records for this run (the store has every value: bertx runs export "
          "--format tensorboard writes them again)",
          e.what());
      events_.reset();
    }
  }
}

void Reporter::write_tensorboard(const std::string& folder, std::int64_t restart_from) {
  if (rank_ != 0) return;
  events_ = std::make_unique<tboard::EventWriter>(folder, unix_seconds());
  if (restart_from >= 0) events_->restart(restart_from + 1, unix_seconds());
}

void Reporter::event(const std::string& type, const std::string& message) {
  console(type + ": " + message);
  write_json(nlohmann::json{{"type", type}, {"run", run_id_}, {"time", unix_seconds()}, {"message", message}}.dump());
}

void Reporter::summary(const std::string& status, const Metrics& final_metrics) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string line = fmt::format("run {} in {}", status, format_duration(elapsed));
  for (const auto& [k, v] : final_metrics) line += fmt::format(" | {} {:.5g}", k, v);
  console(line);
  nlohmann::json m = nlohmann::json::object();
  for (const auto& [k, v] : final_metrics) m[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  write_json(nlohmann::json{
      {"type", "summary"},
      {"run", run_id_},
      {"status", status},
      {"time", unix_seconds()},
      {"elapsed_s", elapsed},
      {"metrics",
       m}}.dump());
}

std::size_t drop_report_steps_after(const std::string& jsonl_path, std::int64_t run_id, std::int64_t after_step) {
  std::ifstream in(jsonl_path, std::ios::binary);
  if (!in) return 0;
  std::string kept, line;
  std::size_t dropped = 0;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const auto int_of = [&](const char* key) { return j.contains(key) ? int64_of(j[key]).value_or(-1) : -1; };
    const std::string type = string_or(j, "type");
    const bool step_record =
        (type == "step" || type == "metrics") && int_of("run") == run_id && int_of("step") > after_step;
    if (j.is_discarded() || step_record) {
      ++dropped;
      continue;
    }
    kept += line + "\n";
  }
  if (dropped > 0) write_file_atomic(jsonl_path, kept);
  return dropped;
}

}  // namespace bertx
