// observers.hpp - what happens around a training step, each concern in its own object (Marian's
// TrainingObservers): the loop in trainer.cpp runs train_step() and hands every observer the StepInfo.
//
// Why: logging, evaluation, checkpointing, benchmarking and stopping each have their own schedule and state;
// as observers they stay out of the step, and benchmark mode is a different observer set instead of
// conditions woven through the loop. Order matters - the loop calls them in the order given:
//   training:  DivergenceGuard, LogObserver, EvalObserver, CheckpointObserver, StopObserver
//   benchmark: DivergenceGuard, BenchObserver, LogObserver, StopObserver
// (a diverged step throws before it is logged; the final evaluation precedes the final checkpoint so that a
// resume never skips it; the stop vote comes last so that a signalled step is logged and saved first).
// Every observer runs on every rank; the collectives they make (metric averages, barriers, the stop vote)
// happen in the same order everywhere.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "host/report.hpp"
#include "host/run.hpp"
#include "train/op_profile.hpp"
#include "host/train_options.hpp"
#include "train/train_state.hpp"

namespace bertx {

// Averages of the task's metric tensors over micro-batches (summed on the device, one sync at mean()).
struct MetricWindow {
  std::map<std::string, at::Tensor> sum;  // name -> () double
  std::int64_t count = 0;                 // micro-batches added
  void add(const std::map<std::string, at::Tensor>& metrics);
  Metrics mean(const std::string& prefix) const;
};

class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;
  virtual void on_start(std::int64_t /*start*/) {}                     // before the first step (steps done so far)
  virtual void on_step_begin(std::int64_t /*step*/) {}                 // before train_step (0-based step about to run)
  virtual void on_step(const StepInfo& /*info*/) {}                    // after it
  virtual void on_end(std::int64_t /*step*/, bool /*interrupted*/) {}  // after the last step run
  virtual bool should_stop() const { return false; }  // asked after every on_step: stop after this step
};

// Non-finite steps: a warning each, an error when the fp16 loss scale falls below min_loss_scale or after
// max_nonfinite_steps in a row (the last good checkpoint is kept).
class DivergenceGuard final : public TrainingObserver {
 public:
  explicit DivergenceGuard(const TrainOptions& t) : t_(t) {}
  void on_step(const StepInfo& info) override;

 private:
  const TrainOptions& t_;
  std::int64_t run_ = 0;  // consecutive non-finite steps
};

// Every log_freq steps and at the last: the task's metrics averaged over the window's micro-batches and over
// ranks, learning rate, loss scale, throughput of all ranks, skipped steps, the logged step's gradient norm ->
// console, report.jsonl, store, TensorBoard.
class LogObserver final : public TrainingObserver {
 public:
  LogObserver(RunContext& ctx, TrainState& s, std::int64_t end) : ctx_(ctx), s_(s), end_(end) {}
  // Whether the step that ends with `step_done` steps done is logged (the loop measures its gradient norm then).
  bool logs(std::int64_t step_done) const;
  void on_start(std::int64_t start) override;
  void on_step(const StepInfo& info) override;

 private:
  RunContext& ctx_;
  TrainState& s_;
  std::int64_t end_;
  MetricWindow window_;                      // micro-batches since the last log line
  std::int64_t sequences_ = 0, tokens_ = 0;  // this rank's, since the last log line
  std::chrono::steady_clock::time_point window_start_;
};

// Evaluation on the eval split every eval_freq steps, and at the last step the final evaluation and the
// prediction files (run_final; also the whole job of do_train = false). Rank 0 scores the whole split on a
// fresh reader (whole-split metrics and prediction files need every example in one place); the other ranks
// wait at a barrier.
class EvalObserver final : public TrainingObserver {
 public:
  EvalObserver(RunContext& ctx, TrainState& s, std::int64_t end) : ctx_(ctx), s_(s), end_(end) {}
  void on_step(const StepInfo& info) override;
  void run_final(std::int64_t step);  // eval = true: evaluate; predict = true: write the test split's predictions

 private:
  void run(const std::string& split, bool predict, std::int64_t step);
  RunContext& ctx_;
  TrainState& s_;
  std::int64_t end_;
};

// A checkpoint every num_steps_per_checkpoint steps, at the last step, and at a stop between them. Rank 0
// writes; the barrier keeps the other ranks from running ahead of it.
class CheckpointObserver final : public TrainingObserver {
 public:
  CheckpointObserver(RunContext& ctx, TrainState& s, std::int64_t end) : ctx_(ctx), s_(s), end_(end) {}
  void on_step(const StepInfo& info) override;
  void on_end(std::int64_t step, bool interrupted) override;

 private:
  void save(std::int64_t step);
  RunContext& ctx_;
  TrainState& s_;
  std::int64_t end_;
};

// [bench]: wall time of each measured step (after warmup_steps; the device synchronised), then throughput,
// latency percentiles, peak RSS, per-rank throughput and scaling efficiency under a launcher, and with
// profile = true the operator table of the measured steps (op_profile.json). No checkpoints are written in
// benchmark mode: this observer replaces EvalObserver and CheckpointObserver.
class BenchObserver final : public TrainingObserver {
 public:
  BenchObserver(RunContext& ctx, TrainState& s, const BenchOptions& bench) : ctx_(ctx), s_(s), bench_(bench) {}
  void on_start(std::int64_t start) override { start_ = start; }
  void on_step_begin(std::int64_t step) override;
  void on_step(const StepInfo& info) override;
  void on_end(std::int64_t step, bool interrupted) override;

 private:
  RunContext& ctx_;
  TrainState& s_;
  const BenchOptions& bench_;
  std::int64_t start_ = 0;
  std::chrono::steady_clock::time_point step_start_;
  std::vector<double> step_seconds_;
  std::optional<OpProfile> profile_;  // over the measured steps
};

// SIGINT/SIGTERM on any rank stops every rank after the current step (one vote per step, all ranks).
class StopObserver final : public TrainingObserver {
 public:
  explicit StopObserver(DataParallel& dp) : dp_(dp) {}
  void on_step(const StepInfo& info) override;
  bool should_stop() const override { return stop_; }

 private:
  DataParallel& dp_;
  bool stop_ = false;
};

}  // namespace bertx
