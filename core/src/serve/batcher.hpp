// batcher.hpp - Triton-style dynamic batching for one served model: one queue of requests; one batcher thread
// takes queued requests (whole, in arrival order) until they hold max_batch_size sequences or max_queue_delay_us
// has passed since the oldest was queued, pads them to the longest sequence, runs one forward pass (the Runner)
// and hands each request its own rows back. No LibTorch here: the Runner is the model (model_runner.hpp).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/infer_request.hpp"
#include "serve/metrics.hpp"

namespace bertx::serve {

struct BatchingOptions {
  std::int64_t max_batch_size = 8;        // sequences per forward pass at most (a larger request runs alone)
  std::int64_t max_queue_delay_us = 100;  // longest wait for a batch to fill, from the oldest request's arrival
  std::int64_t max_queue_size = 0;        // requests waiting at most (0: unbounded); a request over it gets 503
};

// One forward pass over `batch` (B x S, right-padded); outputs [B, X] each.
using Runner = std::function<std::vector<OutputTensor>(const Sequences& batch)>;

struct JobResult {
  std::vector<OutputTensor> outputs;  // this request's rows (per-token outputs cut to its sequence length)
  std::string error;                  // the forward pass failed: why (the outputs are empty)
  std::int64_t queue_us = 0;          // queued until taken into a batch
  std::int64_t compute_us = 0;        // the batch's forward pass
  std::int64_t batch_sequences = 0;   // sequences in the batch it ran in
};

class Batcher {
 public:
  Batcher(Runner runner, BatchingOptions options, std::shared_ptr<ModelMetrics> metrics);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues one request; false (nothing queued) when max_queue_size requests wait already or stop() was called.
  // `done` runs on the batcher thread once the request's batch has run.
  bool submit(Sequences sequences, std::function<void(JobResult)> done);
  // Runs what is queued, then ends the batcher thread. Idempotent.
  void stop();

 private:
  struct Job {
    Sequences sequences;
    std::function<void(JobResult)> done;
    std::chrono::steady_clock::time_point queued;
  };
  void loop();
  void run(std::vector<Job>& jobs);

  Runner runner_;
  BatchingOptions options_;
  std::shared_ptr<ModelMetrics> metrics_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  std::int64_t queued_rows_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace bertx::serve
