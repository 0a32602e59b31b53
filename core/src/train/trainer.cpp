// trainer.cpp - the training loop: train_step() is one optimizer step, as shared/design.md's pseudo-code,
//   gradient_accumulation_steps x { batch -> autocast forward + task loss -> scaled backward }
//   -> model's gradient fix-up -> all-reduce -> unscale + non-finite check -> optimizer.step(lr) (skipped
//   if non-finite) -> loss-scale update;
// train() sets up (train_setup.cpp), then runs the steps and hands each one's StepInfo to the observers
// (observers.hpp): divergence guard, logging every log_freq steps, evaluation every eval_freq, checkpoints
// every num_steps_per_checkpoint (the final evaluation / prediction before the final checkpoint, so a
// resume never skips them), the stop vote. Benchmark mode ([bench]) is another observer set: timing
// instead of evaluation and checkpoints, and no resume.
// SIGINT/SIGTERM: the current step finishes, a checkpoint is written, the run is marked interrupted.
// Data parallel (under `bertx launch`, torchrun, srun, mpirun): every rank runs this loop on its own
// micro-batches; gradients are averaged in the last micro-batch's backward (DataParallel), the ranks agree
// on skipping a step and on stopping, logged metrics are averaged, and rank 0 alone writes checkpoints.
#include "train/trainer.hpp"

#include <algorithm>
#include <memory>
#include <optional>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <spdlog/spdlog.h>

#include "bertx/compat.hpp"
#include "bertx/error.hpp"
#include "host/report.hpp"
#include "train/observers.hpp"
#include "host/progress.hpp"
#include "train/schedule.hpp"
#include "train/train_state.hpp"

namespace bertx {

namespace {

// The next training micro-batch on the device; counts its sequences and tokens (on the host: no sync).
Batch next_batch(TrainState& s, StepInfo& info) {
  Batch batch = s.reader->next_batch().value();  // a CheckedReader: throws rather than return no batch
  info.sequences += batch.size();
  info.tokens += batch.at("attention_mask").sum().item<std::int64_t>();
  return to_device(std::move(batch), s.device);
}

// Forward + task loss under the run's autocast (with a teacher: the distillation loss, train/distill.hpp).
StepOutput forward(TrainState& s, const Batch& batch) {
  ExecutionScope scope(s.policy);
  return s.distill ? s.distill->step(*s.task, *s.model, batch) : s.task->step(*s.model, batch);
}

// The gradients the optimizer reads: fp32 master gradients under use_pure_fp16, else the parameters'.
std::vector<at::Tensor> optimizer_gradients(TrainState& s) {
  if (s.master) return s.master->stage_gradients();
  std::vector<at::Tensor> grads;
  for (auto& p : s.params)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

}  // namespace

// sqrt(sum of every gradient's squared L2 norm), in float32 whatever the gradients' type.
double gradient_norm(const std::vector<at::Tensor>& grads) {
  at::NoGradGuard no_grad;
  if (grads.empty()) return 0.0;
  std::vector<at::Tensor> norms;
  norms.reserve(grads.size());
  for (const auto& g : grads) norms.push_back(at::norm(g, c10::optional<at::Scalar>(2.0), at::kFloat));
  return at::stack(norms).norm().item<double>();
}

StepInfo train_step(TrainState& s, std::int64_t step, bool grad_norm) {
  const std::int64_t accumulation = s.options.gradient_accumulation_steps;
  StepInfo info;
  info.step = step + 1;
  info.lr = learning_rate_at(s.options, std::min(step, s.options.max_steps - 1));
  for (auto& p : s.params) p.mutable_grad() = at::Tensor();  // set_to_none
  for (std::int64_t micro = 0; micro < accumulation; ++micro) {
    s.dp->set_sync(micro == accumulation - 1);  // the last backward all-reduces the gradients
    const Batch batch = next_batch(s, info);    // input_ids (B, S), ...
    StepOutput out = forward(s, batch);         // loss: () scalar, metrics: detached scalars
    s.scaler.scale(out.loss / static_cast<double>(accumulation)).backward();
    info.metrics.push_back(std::move(out.metrics));
  }
  s.model->prepare_gradients();  // e.g. bert: a sparse embedding gradient made dense
  s.dp->finish_gradient_sync();  // param.grad() = the average over ranks
  info.loss_scale_before = s.scaler.scale();
  const std::vector<at::Tensor> grads = optimizer_gradients(s);
  info.finite = s.dp->all_true(s.scaler.unscale_and_check(grads));      // every rank skips the same steps
  if (info.finite && grad_norm) info.grad_norm = gradient_norm(grads);  // the same on every rank (all-reduced)
  if (info.finite) {
    RECORD_FUNCTION("bertx::optimizer_step", c10::ArrayRef<const c10::IValue>{});  // its total time in --profile
    s.optimizer->step(info.lr);
  } else {
    ++s.skipped;
  }
  s.scaler.update(info.finite);
  info.loss_scale = s.scaler.scale();
  info.skipped_steps = s.skipped;
  return info;
}

TrainResult train(RunContext& ctx) {
  const BenchOptions bench = bench_options_from(ctx.config.sections.at("bench"));
  TrainState s = set_up_training(ctx, /*resume=*/!bench.enabled);  // a benchmark starts afresh
  const TrainOptions& t = s.options;
  EvalObserver eval(ctx, s, t.max_steps);
  if (!t.do_train) {  // evaluation / prediction only
    if (!t.eval && !t.predict)
      throw Error("[train] do_train = false needs eval = true or predict = true (nothing to do)");
    if (t.from_pretrained.empty() && !s.resume_step)
      spdlog::warn(
          "[train] do_train = false without from_pretrained or a checkpoint: evaluating freshly initialised weights");
    eval.run_final(s.start);
    return TrainResult::Finished;
  }
  const std::int64_t end = bench.enabled ? s.start + bench.warmup_steps + bench.steps : t.max_steps;
  if (s.start >= end) {
    ctx.report.event("done", fmt::format("phase {} already complete at step {} (checkpoint {})", t.phase, s.start,
                                         checkpoint_dir(s.root, s.start)));
    return TrainResult::Finished;
  }

  // The observers, in the order they see each step (observers.hpp).
  DivergenceGuard guard(t);
  LogObserver logging(ctx, s, end);
  CheckpointObserver checkpoint(ctx, s, end);
  BenchObserver timing(ctx, s, bench);
  StopObserver stop(*s.dp);
  std::vector<TrainingObserver*> observers{&guard, &logging, &eval, &checkpoint, &stop};
  if (bench.enabled) observers = {&guard, &timing, &logging, &stop};

  for (TrainingObserver* o : observers) o->on_start(s.start);
  for (std::int64_t step = s.start; step < end; ++step) {
    for (TrainingObserver* o : observers) o->on_step_begin(step);
    const StepInfo info = train_step(s, step, logging.logs(step + 1));
    for (TrainingObserver* o : observers) o->on_step(info);
    if (std::any_of(observers.begin(), observers.end(), [](TrainingObserver* o) { return o->should_stop(); })) {
      for (TrainingObserver* o : observers) o->on_end(info.step, /*interrupted=*/true);
      return TrainResult::Interrupted;
    }
  }
  for (TrainingObserver* o : observers) o->on_end(end, /*interrupted=*/false);
  return TrainResult::Finished;
}

}  // namespace bertx
