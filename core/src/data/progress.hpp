// progress.hpp - progress lines for long data steps: "<phase> 42.0% (2.1/5.0 MB) 3.4 MB/s ETA 1s" on
// stderr through spdlog, at most one line every `interval` seconds per phase, plus the final one.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace bertx::data {

class ProgressLog {
 public:
  explicit ProgressLog(std::string task, double interval_seconds = 2.0);
  // Reports `done` of `total` units ("B" formats as bytes) for `phase`; total <= 0 means unknown.
  void update(const std::string& phase, std::int64_t done, std::int64_t total, const std::string& unit);

  // "1.5 MB", "12.0 kB", "830 B".
  static std::string format_bytes(double bytes);

 private:
  std::string task_, phase_;
  double interval_;
  std::chrono::steady_clock::time_point phase_start_, last_, prev_;  // prev_: the last update of any phase
  bool finished_phase_ = false;
};

}  // namespace bertx::data
