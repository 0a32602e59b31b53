// metrics.cpp - Prometheus text exposition of the serve counters (metrics.hpp).
#include "serve/metrics.hpp"

#include <cstdio>

namespace bertx::serve {

namespace {

using Counter = std::atomic<std::uint64_t> ModelMetrics::*;

struct CounterSpec {
  const char* name;
  const char* help;
  Counter field;
};

constexpr CounterSpec kCounters[] = {
    {"nv_inference_request_success", "Number of successful inference requests, all batch sizes",
     &ModelMetrics::request_success},
    {"nv_inference_request_failure", "Number of failed inference requests, all batch sizes",
     &ModelMetrics::request_failure},
    {"nv_inference_count", "Number of inferences performed (sequences)", &ModelMetrics::inference_count},
    {"nv_inference_exec_count", "Number of model executions performed (batches)", &ModelMetrics::exec_count},
    {"nv_inference_request_duration_us", "Cumulative inference request duration in microseconds",
     &ModelMetrics::request_duration_us},
    {"nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds",
     &ModelMetrics::queue_duration_us},
    {"nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds",
     &ModelMetrics::compute_infer_duration_us},
};

std::string labels(const std::string& model) { return "model=\"" + model + "\",version=\"1\""; }

}  // namespace

std::string prometheus_text(const std::map<std::string, std::shared_ptr<ModelMetrics>>& models) {
  std::string out;
  for (const auto& c : kCounters) {
    out += std::string("# HELP ") + c.name + " " + c.help + "\n# TYPE " + c.name + " counter\n";
    for (const auto& [name, m] : models)
      out += std::string(c.name) + "{" + labels(name) + "} " + std::to_string(((*m).*c.field).load()) + "\n";
  }
  const char* h = "bertx_inference_request_latency_seconds";
  out += std::string("# HELP ") + h + " Inference request latency, receipt to response\n# TYPE " + h + " histogram\n";
  for (const auto& [name, m] : models) {
    std::uint64_t cumulative = 0;
    char le[32];
    for (std::size_t i = 0; i <= ModelMetrics::kBuckets.size(); ++i) {
      cumulative += m->latency_bucket[i].load();
      if (i < ModelMetrics::kBuckets.size())
        std::snprintf(le, sizeof le, "%g", ModelMetrics::kBuckets[i]);
      else
        std::snprintf(le, sizeof le, "+Inf");
      out += std::string(h) + "_bucket{" + labels(name) + ",le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
    }
    char sum[64];
    std::snprintf(sum, sizeof sum, "%.6f", static_cast<double>(m->latency_sum_us.load()) * 1e-6);
    out += std::string(h) + "_sum{" + labels(name) + "} " + sum + "\n";
    out += std::string(h) + "_count{" + labels(name) + "} " + std::to_string(cumulative) + "\n";
  }
  return out;
}

}  // namespace bertx::serve
