// metrics.hpp - per-model counters of `bertx serve`, written as Prometheus text under Triton's metric names
// (nv_inference_request_success, ..._failure, nv_inference_count, nv_inference_exec_count,
// nv_inference_request_duration_us, nv_inference_queue_duration_us, nv_inference_compute_infer_duration_us) plus
// a request latency histogram. Counters are atomics: the HTTP thread and the batcher thread update them.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace bertx::serve {

struct ModelMetrics {
  std::atomic<std::uint64_t> request_success{0};            // requests answered 200
  std::atomic<std::uint64_t> request_failure{0};            // requests answered with an error
  std::atomic<std::uint64_t> inference_count{0};            // sequences inferred (Triton: batch elements)
  std::atomic<std::uint64_t> exec_count{0};                 // forward passes (batches) run
  std::atomic<std::uint64_t> request_duration_us{0};        // sum over successful requests, receipt to response
  std::atomic<std::uint64_t> queue_duration_us{0};          // sum over requests, queued to taken by the batcher
  std::atomic<std::uint64_t> compute_infer_duration_us{0};  // sum over requests, their batch's forward pass
  // Request latency histogram (seconds), cumulative buckets as Prometheus expects at output time.
  static constexpr std::array<double, 12> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                      0.1,   0.25,   0.5,   1.0,  2.5,   5.0};
  std::array<std::atomic<std::uint64_t>, kBuckets.size() + 1> latency_bucket{};  // last: +Inf
  std::atomic<std::uint64_t> latency_sum_us{0};

  void observe_latency(std::uint64_t us) {
    std::size_t i = 0;
    while (i < kBuckets.size() && static_cast<double>(us) > kBuckets[i] * 1e6) ++i;
    latency_bucket[i].fetch_add(1);
    latency_sum_us.fetch_add(us);
  }
};

// The Prometheus text exposition of every model's counters (model name -> metrics).
std::string prometheus_text(const std::map<std::string, std::shared_ptr<ModelMetrics>>& models);

}  // namespace bertx::serve
