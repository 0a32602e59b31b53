// observers.cpp - the training observers of observers.hpp: divergence guard, logging, evaluation,
// checkpoints, benchmark, stop. Each keeps its own schedule and state; the loop (trainer.cpp) only calls them.
#include "train/observers.hpp"

#include <algorithm>
#include <memory>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>

#include "bertx/compat.hpp"
#include "bertx/error.hpp"
#include "base/fs_util.hpp"
#include "host/plugin_host.hpp"
#include "base/signals.hpp"
#include "store/store.hpp"
#include "train/bench_stats.hpp"
#include "train/checkpoint.hpp"

using Clock = std::chrono::steady_clock;

namespace bertx {

void MetricWindow::add(const std::map<std::string, at::Tensor>& m) {
  for (const auto& [k, v] : m) sum[k] = sum.count(k) ? sum[k] + v.to(at::kDouble) : v.to(at::kDouble);
  ++count;
}

Metrics MetricWindow::mean(const std::string& prefix) const {
  Metrics out;
  for (const auto& [k, v] : sum)
    out.emplace_back(prefix + k, v.item<double>() / static_cast<double>(std::max<std::int64_t>(count, 1)));
  return out;
}

namespace {

// Every rank's values averaged over ranks (one collective); the names must agree, so a rank whose count
// differs (e.g. an eval split that left it no batch) fails instead of mixing metrics up.
Metrics average_over_ranks(DataParallel& dp, Metrics m) {
  if (dp.world_size() == 1) return m;
  std::vector<double> v{static_cast<double>(m.size())};
  if (dp.all_average(v)[0] != v[0])
    throw Error(
        fmt::format("rank {} has {} metrics, other ranks another count (an eval split with fewer batches than ranks?)",
                    dp.rank(), m.size()));
  v.clear();
  for (const auto& kv : m) v.push_back(kv.second);
  v = dp.all_average(v);
  for (std::size_t i = 0; i < m.size(); ++i) m[i].second = v[i];
  return m;
}

// One pass over an evaluation split: the task's own Evaluator when it has one (dataset-level metrics,
// prediction files), else the averages of step()'s metrics. Metric names get the "eval_" prefix. Runs under
// the run's execution policy (autocast: half weights under use_pure_fp16 need it, the peers evaluate under it too;
// int8 linears in a prediction run).
Metrics evaluate(Model& model, Task& task, DatasetReader& reader, const EvalContext& context, std::int64_t max_batches,
                 const ExecutionPolicy& policy) {
  const at::Device& device = policy.device;
  model.module().eval();
  at::NoGradGuard no_grad;
  ExecutionScope scope(policy);
  std::unique_ptr<Evaluator> evaluator = task.evaluator(model, reader, context);
  MetricWindow w;
  for (std::int64_t b = 0; max_batches == 0 || b < max_batches; ++b) {
    std::optional<Batch> batch = reader.next_batch();
    if (!batch) break;
    if (evaluator)
      evaluator->add(model, to_device(std::move(*batch), device));
    else
      w.add(task.step(model, to_device(std::move(*batch), device)).metrics);
  }
  model.module().train();
  if (!evaluator) return w.mean("eval_");
  Metrics out;
  for (const auto& [k, v] : evaluator->finish()) out.emplace_back("eval_" + k, v);
  return out;
}

}  // namespace

// --- DivergenceGuard --------------------------------------------------------------------------------------

void DivergenceGuard::on_step(const StepInfo& info) {
  if (info.finite) {
    run_ = 0;
  } else {
    ++run_;
    spdlog::warn("step {}: non-finite gradients, step skipped (loss scale {} -> {}), {} in a row", info.step,
                 info.loss_scale_before, info.loss_scale_before * 0.5, run_);
  }
  if (t_.precision == Precision::Amp && info.loss_scale < t_.min_loss_scale)
    throw Error(fmt::format(
        "loss scale fell to {} (< min_loss_scale {}) at step {}: fp16 training diverged; the last good checkpoint "
        "is kept - lower the learning rate or use precision = \"amp-bf16\"",
        info.loss_scale, t_.min_loss_scale, info.step));
  if (run_ >= t_.max_nonfinite_steps)
    throw Error(
        fmt::format("{} consecutive steps with non-finite gradients (up to step {}): training diverged; the last good "
                    "checkpoint is kept",
                    run_, info.step));
}

// --- LogObserver ------------------------------------------------------------------------------------------

void LogObserver::on_start(std::int64_t /*start*/) { window_start_ = Clock::now(); }

bool LogObserver::logs(std::int64_t step_done) const {
  return step_done % s_.options.log_freq == 0 || step_done == end_;
}

void LogObserver::on_step(const StepInfo& info) {
  for (const auto& m : info.metrics) window_.add(m);
  sequences_ += info.sequences;
  tokens_ += info.tokens;
  if (!logs(info.step)) return;
  const double seconds = std::chrono::duration<double>(Clock::now() - window_start_).count();
  Metrics m = window_.mean("");
  m.emplace_back("lr", info.lr);
  m.emplace_back("loss_scale", info.loss_scale);
  m.emplace_back("sequences_per_second", static_cast<double>(sequences_) / seconds);
  m.emplace_back("tokens_per_second", static_cast<double>(tokens_) / seconds);
  m.emplace_back("skipped_steps", static_cast<double>(info.skipped_steps));
  if (info.grad_norm) m.emplace_back("grad_norm", *info.grad_norm);  // equal on every rank: the average is it
  m = average_over_ranks(*s_.dp, std::move(m));
  for (auto& [k, v] : m)
    if (k == "sequences_per_second" || k == "tokens_per_second")
      v *= static_cast<double>(s_.dp->world_size());  // all ranks' total
  ctx_.report.step(info.step, m);
  window_ = MetricWindow();
  sequences_ = tokens_ = 0;
  window_start_ = Clock::now();
}

// --- EvalObserver -----------------------------------------------------------------------------------------

void EvalObserver::on_step(const StepInfo& info) {
  const TrainOptions& t = s_.options;
  if (t.eval && t.eval_freq > 0 && info.step % t.eval_freq == 0 && info.step != end_) run("eval", false, info.step);
  if (info.step == end_) run_final(info.step);
}

void EvalObserver::run_final(std::int64_t step) {
  if (s_.options.eval) run("eval", false, step);
  if (s_.options.predict) run("test", true, step);
}

// Evaluation / prediction on a fresh reader of `split` ("eval": labelled, "test": prediction files).
void EvalObserver::run(const std::string& split, bool predict, std::int64_t step) {
  const ResolvedConfig& cfg = ctx_.config;
  if (s_.dp->rank() == 0) {
    const ComponentConfig& data_cfg = component(cfg, "data");
    auto r = ctx_.host.create<DatasetReader>(Kind::Dataset, data_cfg.type, data_cfg.options);
    r->open(DatasetContext{split, s_.options.batch_size, 0, 1, static_cast<std::uint64_t>(cfg.run.seed)});
    const EvalContext ec{split, predict, cfg.run.output_dir, step};
    Metrics m = evaluate(*s_.model, *s_.task, *r, ec, predict ? 0 : s_.options.eval_batches, s_.policy);
    if (!m.empty()) ctx_.report.step(step, m, /*progress=*/false);
    if (predict)
      ctx_.report.event("predict", "prediction files for the " + split + " split written to " + cfg.run.output_dir);
  }
  s_.dp->barrier();
}

// --- CheckpointObserver -----------------------------------------------------------------------------------

void CheckpointObserver::on_step(const StepInfo& info) {
  if (info.step % s_.options.num_steps_per_checkpoint == 0 || info.step == end_) save(info.step);
}

void CheckpointObserver::on_end(std::int64_t step, bool interrupted) {
  if (interrupted && step % s_.options.num_steps_per_checkpoint != 0 && step != end_) save(step);
}

void CheckpointObserver::save(std::int64_t step) {
  if (s_.dp->rank() == 0) {
    Progress p{step,
               s_.options.phase,
               s_.reader->epoch(),
               s_.reader->position(),
               ctx_.run_id,
               s_.scaler.scale(),
               s_.scaler.good_steps(),
               s_.skipped,
               ctx_.config.hash};
    save_checkpoint(s_.root, *s_.model, *s_.optimizer, p, s_.options.keep_checkpoints);
    if (ctx_.store) ctx_.store->add_artifact(ctx_.run_id, "checkpoint", checkpoint_dir(s_.root, step), step);
    ctx_.report.event("checkpoint", checkpoint_dir(s_.root, step));
  }
  s_.dp->barrier();
}

// --- BenchObserver ----------------------------------------------------------------------------------------

void BenchObserver::on_step_begin(std::int64_t step) {
  if (bench_.profile && step - start_ == bench_.warmup_steps) profile_.emplace();
  step_start_ = Clock::now();
}

void BenchObserver::on_step(const StepInfo& info) {
  if (s_.device.is_cuda()) torch::cuda::synchronize();
  if (info.step - start_ > bench_.warmup_steps)
    step_seconds_.push_back(std::chrono::duration<double>(Clock::now() - step_start_).count());
}

void BenchObserver::on_end(std::int64_t step, bool interrupted) {
  if (interrupted) return;
  const TrainOptions& t = s_.options;
  const std::int64_t world = s_.dp->world_size(), per_rank_batch = t.batch_size * t.gradient_accumulation_steps;
  const double median = percentile(step_seconds_, 0.5);
  std::vector<double> own(static_cast<std::size_t>(world), 0.0);  // this rank's sequences/s at its index
  own[static_cast<std::size_t>(s_.dp->rank())] = static_cast<double>(per_rank_batch) / median;
  own = s_.dp->all_average(own);
  std::string per_rank;
  for (std::int64_t r = 0; r < world; ++r)
    per_rank += fmt::format("{}rank {} {:.2f}", r ? ", " : "", r,
                            own[static_cast<std::size_t>(r)] * static_cast<double>(world));
  if (world > 1) ctx_.report.event("bench", "sequences/s per rank: " + per_rank);
  Metrics m{{"bench_sequences_per_second",
             static_cast<double>(per_rank_batch * world) / median},  // all ranks (they step together)
            {"bench_step_seconds_p50", median},
            {"bench_step_seconds_p90", percentile(step_seconds_, 0.9)},
            {"bench_step_seconds_p99", percentile(step_seconds_, 0.99)},
            {"bench_peak_rss_mb", peak_rss_mb()}};
  if (world > 1 && bench_.baseline_sequences_per_second > 0)
    m.emplace_back("bench_scaling_efficiency",
                   m[0].second / (static_cast<double>(world) * bench_.baseline_sequences_per_second));
  ctx_.report.step(step, m, /*progress=*/false);
  if (profile_) {
    const std::string file = ctx_.config.run.output_dir + "/op_profile.json";
    write_file_atomic(file, profile_->json().dump(1));
    ctx_.report.event(
        "profile",
        fmt::format("operators per measured step ({} steps; profiled steps run slower):\n{}\n(all steps: {})",
                    bench_.steps, profile_->table(25, static_cast<double>(bench_.steps)), file));
  }
  ctx_.report.event(
      "bench",
      fmt::format("{:.2f} sequences/s (median step {:.1f} ms over {} steps, p90 {:.1f} ms), peak RSS {:.0f} MB",
                  m[0].second, median * 1e3, step_seconds_.size(), m[2].second * 1e3, m[4].second));
}

// --- StopObserver -----------------------------------------------------------------------------------------

void StopObserver::on_step(const StepInfo& /*info*/) {
  stop_ = !dp_.all_true(!stop_requested());  // a signal to any rank stops all of them after this step
}

}  // namespace bertx
