// bench_stats.hpp - the figures both benchmark modes report (bench train through the trainer, bench infer):
// latency percentiles and the process's peak resident memory, computed one way for both.
#pragma once
#include <algorithm>
#include <vector>

#include <sys/resource.h>

namespace bertx {

// The q-quantile (0..1) of v, linear interpolation between the closest ranks (numpy's default); v non-empty.
inline double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Peak resident set size of this process so far, MiB (getrusage's ru_maxrss is KiB on Linux).
inline double peak_rss_mb() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

}  // namespace bertx
