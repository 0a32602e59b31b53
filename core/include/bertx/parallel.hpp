// bertx/parallel.hpp - the one threading helper of the data pipeline and the data-reader plugins: run
// f(0..n-1) on up to `threads` threads (std::thread, no LibTorch). Work items are handed out in order from an
// atomic counter; callers write results into per-item slots, so the output never depends on the thread count
// or on scheduling.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace bertx {

inline int resolve_threads(int threads) {
  if (threads > 0) return threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Calls f(i) for every i in [0, n); the first exception thrown by any call is rethrown here.
template <class F>
void parallel_for(std::size_t n, int threads, F&& f) {
  const std::size_t workers = std::min<std::size_t>(n, static_cast<std::size_t>(resolve_threads(threads)));
  if (workers <= 1) {
    for (std::size_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      const std::size_t i = next.fetch_add(1);
      if (i >= n) break;
      try {
        f(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (std::size_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace bertx
