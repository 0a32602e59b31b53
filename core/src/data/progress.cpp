// progress.cpp - rate and ETA from the phase's start time; throttled so logs stay short.
#include "data/progress.hpp"

#include <cstdio>

#include <spdlog/spdlog.h>

#include "host/report.hpp"

namespace bertx::data {

ProgressLog::ProgressLog(std::string task, double interval_seconds)
    : task_(std::move(task)), interval_(interval_seconds), prev_(std::chrono::steady_clock::now()) {}

std::string ProgressLog::format_bytes(double b) {
  char buf[32];
  if (b >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6)
    std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  else if (b >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f B", b);
  return buf;
}

void ProgressLog::update(const std::string& phase, std::int64_t done, std::int64_t total, const std::string& unit) {
  const auto now = std::chrono::steady_clock::now();
  if (phase != phase_) {  // a phase starts where the previous one ended (or at construction)
    phase_ = phase;
    phase_start_ = last_ = prev_;
    finished_phase_ = false;
  }
  prev_ = now;
  const bool finished = total > 0 && done >= total;
  if (finished_phase_) return;
  if (!finished && std::chrono::duration<double>(now - last_).count() < interval_) return;
  last_ = now;
  finished_phase_ = finished;
  const double elapsed = std::max(1e-9, std::chrono::duration<double>(now - phase_start_).count());
  const double rate = static_cast<double>(done) / elapsed;
  const bool bytes = unit == "B";
  auto amount = [&](double v) {
    if (bytes) return format_bytes(v);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f %s", v, unit.c_str());
    return std::string(buf);
  };
  std::string line = task_ + " " + phase + ": ";
  char buf[64];
  if (total > 0) {
    std::snprintf(buf, sizeof buf, "%5.1f%% ", 100.0 * static_cast<double>(done) / static_cast<double>(total));
    line += buf;
    line += "(" + amount(static_cast<double>(done)) + " of " + amount(static_cast<double>(total)) + ") ";
  } else {
    line += amount(static_cast<double>(done)) + " ";
  }
  line += amount(rate) + "/s";
  if (total > 0 && !finished && rate > 0)
    line += ", ETA " + Reporter::format_duration(static_cast<double>(total - done) / rate);
  else if (finished)
    line += ", " + Reporter::format_duration(elapsed);
  spdlog::info("{}", line);
}

}  // namespace bertx::data
