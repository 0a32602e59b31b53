// batcher.cpp - the dynamic batcher's queue and thread (batcher.hpp).
#include "serve/batcher.hpp"

#include <algorithm>
#include <exception>

namespace bertx::serve {

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
}

// The requests' sequences stacked and right-padded to the longest (id 0, mask 0, type 0).
Sequences merge(const std::vector<Sequences*>& parts) {
  Sequences m;
  for (const auto* p : parts) m.rows += p->rows, m.cols = std::max(m.cols, p->cols);
  const auto n = static_cast<std::size_t>(m.rows * m.cols);
  m.input_ids.assign(n, 0), m.attention_mask.assign(n, 0), m.token_type_ids.assign(n, 0);
  std::int64_t row = 0;
  for (const auto* p : parts)
    for (std::int64_t r = 0; r < p->rows; ++r, ++row) {
      const auto src = static_cast<std::ptrdiff_t>(r * p->cols), dst = static_cast<std::ptrdiff_t>(row * m.cols);
      std::copy_n(p->input_ids.begin() + src, p->cols, m.input_ids.begin() + dst);
      std::copy_n(p->attention_mask.begin() + src, p->cols, m.attention_mask.begin() + dst);
      std::copy_n(p->token_type_ids.begin() + src, p->cols, m.token_type_ids.begin() + dst);
    }
  return m;
}

// Rows [first, first + rows) of a batch output; a per-token output cut to `cols` columns.
OutputTensor slice(const OutputTensor& t, std::int64_t first, std::int64_t rows, std::int64_t cols) {
  OutputTensor o{t.name, rows, t.per_token ? cols : t.cols, {}, t.per_token};
  o.data.reserve(static_cast<std::size_t>(rows * o.cols));
  for (std::int64_t r = first; r < first + rows; ++r) {
    const auto begin = t.data.begin() + static_cast<std::ptrdiff_t>(r * t.cols);
    o.data.insert(o.data.end(), begin, begin + o.cols);
  }
  return o;
}

}  // namespace

Batcher::Batcher(Runner runner, BatchingOptions options, std::shared_ptr<ModelMetrics> metrics)
    : runner_(std::move(runner)), options_(options), metrics_(std::move(metrics)), thread_([this] { loop(); }) {}

Batcher::~Batcher() { stop(); }

bool Batcher::submit(Sequences sequences, std::function<void(JobResult)> done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    if (options_.max_queue_size > 0 && static_cast<std::int64_t>(queue_.size()) >= options_.max_queue_size)
      return false;
    queued_rows_ += sequences.rows;
    queue_.push_back(Job{std::move(sequences), std::move(done), Clock::now()});
  }
  wake_.notify_one();
  return true;
}

void Batcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Batcher::loop() {
  for (;;) {
    std::vector<Job> jobs;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      // Wait for the batch to fill, at most max_queue_delay_us after the oldest request arrived.
      const auto deadline = queue_.front().queued + std::chrono::microseconds(options_.max_queue_delay_us);
      while (!stopping_ && queued_rows_ < options_.max_batch_size && Clock::now() < deadline)
        wake_.wait_until(lock, deadline);
      std::int64_t rows = 0;
      while (!queue_.empty() && (jobs.empty() || rows + queue_.front().sequences.rows <= options_.max_batch_size)) {
        rows += queue_.front().sequences.rows;
        queued_rows_ -= queue_.front().sequences.rows;
        jobs.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    run(jobs);
  }
}

void Batcher::run(std::vector<Job>& jobs) {
  const auto taken = Clock::now();
  std::vector<Sequences*> parts;
  for (auto& j : jobs) parts.push_back(&j.sequences);
  const Sequences batch = parts.size() == 1 ? std::move(*parts.front()) : merge(parts);
  std::vector<OutputTensor> outputs;
  std::string error;
  try {
    outputs = runner_(batch);
  } catch (const std::exception& e) {
    error = e.what();
  }
  const std::int64_t compute_us = us_between(taken, Clock::now());
  metrics_->exec_count.fetch_add(1);
  metrics_->inference_count.fetch_add(static_cast<std::uint64_t>(batch.rows));
  std::int64_t first = 0;
  for (auto& j : jobs) {
    JobResult r;
    r.queue_us = us_between(j.queued, taken), r.compute_us = compute_us, r.batch_sequences = batch.rows;
    r.error = error;
    const std::int64_t rows = parts.size() == 1 ? batch.rows : j.sequences.rows;
    const std::int64_t cols = parts.size() == 1 ? batch.cols : j.sequences.cols;
    if (error.empty())
      for (const auto& o : outputs) r.outputs.push_back(parts.size() == 1 ? o : slice(o, first, rows, cols));
    first += rows;
    metrics_->queue_duration_us.fetch_add(static_cast<std::uint64_t>(r.queue_us));
    metrics_->compute_infer_duration_us.fetch_add(static_cast<std::uint64_t>(compute_us));
    j.done(std::move(r));
  }
}

}  // namespace bertx::serve
