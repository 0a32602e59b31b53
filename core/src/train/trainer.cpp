// trainer.cpp - the training loop. One optimizer step =
//   gradient_accumulation_steps x { batch -> autocast forward + task loss -> scaled backward }
//   -> unscale + non-finite check -> optimizer.step(lr) (skipped if non-finite) -> loss-scale update
//   -> log every log_freq steps, evaluate every eval_freq, checkpoint every num_steps_per_checkpoint
//   (the final evaluation / prediction before the final checkpoint, so a resume never skips them).
// SIGINT/SIGTERM: the current step finishes, a checkpoint is written, the run is marked interrupted.
// Data parallel (under `bertx launch`, torchrun, srun, mpirun): every rank runs this loop on its own
// micro-batches; gradients are averaged in the last micro-batch's backward (DataParallel), the ranks agree
// on skipping a step and on stopping, logged metrics are averaged, and rank 0 alone writes checkpoints.
#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>

#include "bertx/compat.hpp"
#include "bertx/dataset.hpp"
#include "bertx/error.hpp"
#include "bertx/optimizer.hpp"
#include "bertx/task.hpp"
#include "dist/data_parallel.hpp"
#include "fs_util.hpp"
#include "plugin_host.hpp"
#include "process_setup.hpp"
#include "report.hpp"
#include "signals.hpp"
#include "store.hpp"
#include "train/bench_stats.hpp"
#include "train/checkpoint.hpp"
#include "train/loss_scaler.hpp"
#include "train/master_weights.hpp"
#include "train/op_profile.hpp"
#include "train/schedule.hpp"
#include "weights.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace bertx {

namespace {

at::Device pick_device(const std::string& wanted) {
  const bool cuda = torch::cuda::is_available();
  if (wanted == "cuda" && !cuda) throw Error("[run] device = \"cuda\" but no CUDA device is available to this LibTorch");
  return (wanted == "cuda" || (wanted == "auto" && cuda)) ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
}

Batch to_device(Batch b, const at::Device& d) {
  if (d.is_cpu()) return b;
  for (auto& [k, v] : b.tensors) v = v.to(d, /*non_blocking=*/true);
  return b;
}

void synchronize(const at::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize();
}

// Initial weights: an HF folder, a .safetensors file, or a checkpoint root/step folder (newest step).
void load_pretrained(Model& model, const std::string& from) {
  std::string file = from;
  if (fs::is_directory(from)) {
    if (auto step = latest_checkpoint(from)) file = checkpoint_dir(from, *step) + "/model.safetensors";
    else file = weights_file_in(from);
  }
  LoadReport r = load_weights(model.module(), load_safetensors(file), file);
  spdlog::info("initial weights from {}: {} tensors{}", file, r.loaded.size(),
               r.missing.empty() ? "" : fmt::format(", {} new (e.g. {})", r.missing.size(), r.missing.front()));
}

// Averages of the task's metric tensors over micro-batches (summed on the device, one sync at log time).
struct MetricWindow {
  std::map<std::string, at::Tensor> sum;
  std::int64_t count = 0;
  void add(const std::map<std::string, at::Tensor>& m) {
    for (const auto& [k, v] : m) sum[k] = sum.count(k) ? sum[k] + v.to(at::kDouble) : v.to(at::kDouble);
    ++count;
  }
  Metrics mean(const std::string& prefix) const {
    Metrics out;
    for (const auto& [k, v] : sum) out.emplace_back(prefix + k, v.item<double>() / static_cast<double>(std::max<std::int64_t>(count, 1)));
    return out;
  }
};

// Every rank's values averaged over ranks (one collective); the names must agree, so a rank whose count
// differs (e.g. an eval split that left it no batch) fails instead of mixing metrics up.
Metrics average_over_ranks(DataParallel& dp, Metrics m) {
  if (dp.world_size() == 1) return m;
  std::vector<double> v{static_cast<double>(m.size())};
  if (dp.all_average(v)[0] != v[0])
    throw Error(fmt::format("rank {} has {} metrics, other ranks another count (an eval split with fewer batches than ranks?)",
                            dp.rank(), m.size()));
  v.clear();
  for (const auto& kv : m) v.push_back(kv.second);
  v = dp.all_average(v);
  for (std::size_t i = 0; i < m.size(); ++i) m[i].second = v[i];
  return m;
}

// One pass over an evaluation split: the task's own Evaluator when it has one (dataset-level metrics,
// prediction files), else the averages of step()'s metrics. Metric names get the "eval_" prefix. Runs under
// the training's autocast (half weights under use_pure_fp16 need it; the peers evaluate under it too).
Metrics evaluate(Model& model, Task& task, DatasetReader& reader, const EvalContext& context, std::int64_t max_batches,
                 const at::Device& device, std::optional<at::ScalarType> autocast_dtype) {
  model.module().eval();
  at::NoGradGuard no_grad;
  std::optional<compat::AutocastScope> autocast;
  if (autocast_dtype) autocast.emplace(device.type(), *autocast_dtype);
  std::unique_ptr<Evaluator> evaluator = task.evaluator(model, reader, context);
  MetricWindow w;
  for (std::int64_t b = 0; max_batches == 0 || b < max_batches; ++b) {
    std::optional<Batch> batch = reader.next_batch();
    if (!batch) break;
    if (evaluator) evaluator->add(model, to_device(std::move(*batch), device));
    else w.add(task.step(model, to_device(std::move(*batch), device)).metrics);
  }
  model.module().train();
  if (!evaluator) return w.mean("eval_");
  Metrics out;
  for (const auto& [k, v] : evaluator->finish()) out.emplace_back("eval_" + k, v);
  return out;
}

}  // namespace

TrainResult train(RunContext& ctx) {
  const ResolvedConfig& cfg = ctx.config;
  TrainOptions t = train_options_from(cfg.sections.at("train"));
  const BenchOptions bench = bench_options_from(cfg.sections.at("bench"));
  const ComponentConfig &model_cfg = component(cfg, "model"), &task_cfg = component(cfg, "task"),
                        &optim_cfg = component(cfg, "optimizer"), &data_cfg = component(cfg, "data");

  // --- process set-up: threads, device, precision, seed -----------------------------------------------
  const ProcessSettings process = apply_threads(static_cast<int>(cfg.run.threads));  // 0 = the CPUs this process may use
  const int threads = process.intra_op_threads;
  const at::Device device = DataParallel::device_for(ctx.rendezvous, pick_device(cfg.run.device));
  // Joins the job's other ranks (a no-op for a single process); rank 0 records where every rank runs.
  const std::unique_ptr<DataParallel> dp = DataParallel::create(ctx.rendezvous, cfg.run.dist_backend, device, cfg.run.dist_bucket_mb,
                                                                static_cast<int>(std::min<std::int64_t>(cfg.run.dist_timeout_s, 1 << 30)));
  const int rank = dp->rank();
  if (ctx.store) {
    ctx.store->set_ranks(ctx.run_id, dp->hosts());
    ctx.store->set_process(ctx.run_id, process.json());
  }
  ctx.report.event("process", process.summary());
  if (t.precision == Precision::Amp && !device.is_cuda())
    throw Error("[train] precision = \"amp\" (fp16 + loss scaling) needs CUDA; use \"amp-bf16\" on the CPU");
  if (device.is_cuda()) compat::set_cuda_tf32(t.precision == Precision::Tf32);
  const std::optional<at::ScalarType> autocast_dtype =
      t.precision == Precision::Amp ? std::optional(at::kHalf) : t.precision == Precision::AmpBf16 ? std::optional(at::kBFloat16) : std::nullopt;
  at::manual_seed(static_cast<std::uint64_t>(cfg.run.seed));

  // --- components ---------------------------------------------------------------------------------------
  auto model = ctx.host.create<Model>(Kind::Model, model_cfg.type, model_cfg.options);
  auto task = ctx.host.create<Task>(Kind::Task, task_cfg.type, task_cfg.options);
  task->attach(*model);
  const std::string root = checkpoint_root(cfg);
  const std::optional<std::int64_t> resume_step = (t.resume == Resume::Auto && !bench.enabled) ? latest_checkpoint(root) : std::nullopt;
  if (!resume_step && !t.from_pretrained.empty()) load_pretrained(*model, t.from_pretrained);
  model->module().to(device);
  model->module().train();

  std::shared_ptr<Optimizer> optimizer = ctx.host.create<Optimizer>(Kind::Optimizer, optim_cfg.type, optim_cfg.options);
  std::shared_ptr<MasterWeights> master;  // use_pure_fp16: half parameters, fp32 masters in the optimizer
  if (t.use_pure_fp16) optimizer = master = std::make_shared<MasterWeights>(optimizer, *autocast_dtype, t.fp32_params);
  ParamGroup decay{{}, {}, t.weight_decay}, no_decay{{}, {}, 0.0};
  std::vector<at::Tensor> params;
  std::vector<std::string> param_names;
  for (const auto& item : model->module().named_parameters(true)) {
    param_names.push_back(item.key());
    const bool excluded = std::any_of(t.no_decay.begin(), t.no_decay.end(),
                                      [&](const std::string& p) { return item.key().find(p) != std::string::npos; });
    ParamGroup& g = excluded ? no_decay : decay;
    g.names.push_back(item.key());
    g.params.push_back(item.value());
    params.push_back(item.value());
  }
  optimizer->add_param_group(decay);
  optimizer->add_param_group(no_decay);

  auto reader = ctx.host.create<DatasetReader>(Kind::Dataset, data_cfg.type, data_cfg.options);
  reader->open(DatasetContext{"train", t.batch_size, rank, dp->world_size(), static_cast<std::uint64_t>(cfg.run.seed)});
  // Evaluation / prediction on a fresh reader of `split` ("eval": labelled, "test": prediction files).
  // With several ranks, rank 0 scores the whole split (whole-split metrics and prediction files need
  // every example in one place) while the others wait at a barrier.
  auto run_eval = [&](const std::string& split, bool predict, std::int64_t step) {
    if (rank == 0) {
      auto r = ctx.host.create<DatasetReader>(Kind::Dataset, data_cfg.type, data_cfg.options);
      r->open(DatasetContext{split, t.batch_size, 0, 1, static_cast<std::uint64_t>(cfg.run.seed)});
      const EvalContext ec{split, predict, cfg.run.output_dir, step};
      Metrics m = evaluate(*model, *task, *r, ec, predict ? 0 : t.eval_batches, device, autocast_dtype);
      if (!m.empty()) ctx.report.step(step, m, /*progress=*/false);
      if (predict) ctx.report.event("predict", "prediction files for the " + split + " split written to " + cfg.run.output_dir);
    }
    dp->barrier();
  };
  auto finish = [&](std::int64_t step) {
    if (t.eval) run_eval("eval", false, step);
    if (t.predict) run_eval("test", true, step);
    return TrainResult::Finished;
  };
  if (t.epochs > 0 && t.do_train) {  // epoch-based schedule (fine-tuning): the reader knows the epoch size
    const std::int64_t per_epoch = reader->samples_per_epoch();
    if (per_epoch <= 0) throw Error("[train] epochs = " + std::to_string(t.epochs) + ": the [data] reader " + data_cfg.type +
                                    " does not know its epoch size; set max_steps instead");
    const double steps = std::ceil(t.epochs * static_cast<double>(per_epoch) / static_cast<double>(t.batch_size * t.gradient_accumulation_steps));
    t.max_steps = std::max<std::int64_t>(1, static_cast<std::int64_t>(steps));
    ctx.report.set_total_steps(t.max_steps);
  }

  LossScaler scaler(LossScalerConfig{t.precision == Precision::Amp, t.init_loss_scale, 2.0, 0.5, t.loss_scale_window});

  // --- resume -------------------------------------------------------------------------------------------
  std::int64_t start = 0, skipped = 0;
  if (resume_step) {
    LoadedCheckpoint c = load_checkpoint(checkpoint_dir(root, *resume_step));
    load_weights(model->module(), c.model, checkpoint_dir(root, *resume_step));
    optimizer->load_state_dict(c.optimizer);
    restore_rng(c.rng);
    reader->seek(c.progress.reader);
    scaler.restore(c.progress.loss_scale, c.progress.good_steps);
    start = c.progress.step;
    skipped = c.progress.skipped_steps;
    ctx.report.event("resume", fmt::format("from {} (step {}, epoch {})", checkpoint_dir(root, start), start, c.progress.epoch));
  }
  // Every rank starts from rank 0's weights (initialised, pre-trained or resumed), checked equal; the
  // optimizer state and reader position come from the same checkpoint on every rank.
  if (dp->all_average(static_cast<double>(start)) != static_cast<double>(start))
    throw Error(fmt::format("rank {} would start at step {} (checkpoint folder {}), another rank elsewhere: every rank must see "
                            "the same checkpoints (a shared output_dir)", rank, start, root));
  std::vector<at::Tensor> state = params;
  std::vector<std::string> state_names = param_names;
  for (const auto& item : model->module().named_buffers(true)) state.push_back(item.value()), state_names.push_back(item.key());
  if (master) {
    state.insert(state.end(), master->masters().begin(), master->masters().end());
    for (const auto& n : master->master_names()) state_names.push_back(n);
  }
  dp->broadcast_parameters(state, state_names);
  dp->attach(params, param_names);

  const std::int64_t world = dp->world_size(), global_batch = t.batch_size * t.gradient_accumulation_steps * world;
  std::int64_t parameter_count = 0;
  for (const auto& p : params) parameter_count += p.numel();
  std::string hosts;
  for (const auto& h : dp->hosts()) hosts += (hosts.empty() ? "" : ",") + h;
  ctx.report.event("setup", fmt::format("{} parameters on {}, precision {}, {} threads; global batch {} = {} x {} accumulation x {} rank(s); "
                                        "steps {}..{}{}", parameter_count, device.str(),
                                        master ? fmt::format("{} with pure half weights ({} tensors half, {} fp32, fp32 masters)", enum_name(t.precision),
                                                             master->half_count(), master->fp32_count())
                                               : enum_name(t.precision),
                                        threads, global_batch,
                                        t.batch_size, t.gradient_accumulation_steps, world, start, t.max_steps,
                                        world > 1 ? fmt::format("; {} backend, ranks on {}", dp->backend(), hosts) : ""));

  auto save = [&](std::int64_t step) {  // rank 0 writes; the barrier keeps others from running ahead of it
    if (rank == 0) {
      Progress p{step, t.phase, reader->epoch(), reader->position(), ctx.run_id, scaler.scale(), scaler.good_steps(), skipped, cfg.hash};
      save_checkpoint(root, *model, *optimizer, p, t.keep_checkpoints);
      if (ctx.store) ctx.store->add_artifact(ctx.run_id, "checkpoint", checkpoint_dir(root, step), step);
      ctx.report.event("checkpoint", checkpoint_dir(root, step));
    }
    dp->barrier();
  };

  if (!t.do_train) {  // evaluation / prediction only
    if (!t.eval && !t.predict) throw Error("[train] do_train = false needs eval = true or predict = true (nothing to do)");
    if (t.from_pretrained.empty() && !resume_step)
      spdlog::warn("[train] do_train = false without from_pretrained or a checkpoint: evaluating freshly initialised weights");
    return finish(start);
  }

  // --- the loop -----------------------------------------------------------------------------------------
  const std::int64_t end = bench.enabled ? start + bench.warmup_steps + bench.steps : t.max_steps;
  if (start >= end) {
    ctx.report.event("done", fmt::format("phase {} already complete at step {} (checkpoint {})", t.phase, start, checkpoint_dir(root, start)));
    return TrainResult::Finished;
  }
  MetricWindow window;
  std::int64_t window_sequences = 0, window_tokens = 0, nonfinite_run = 0;
  std::vector<double> bench_step_seconds;
  std::optional<OpProfile> profile;  // [bench] profile: over the measured steps
  auto window_start = Clock::now();

  for (std::int64_t step = start; step < end; ++step) {
    if (bench.enabled && bench.profile && step - start == bench.warmup_steps) profile.emplace();
    const auto step_start = Clock::now();
    const double lr = learning_rate_at(t, std::min(step, t.max_steps - 1));
    for (auto& p : params) p.mutable_grad() = at::Tensor();  // set_to_none

    for (std::int64_t micro = 0; micro < t.gradient_accumulation_steps; ++micro) {
      dp->set_sync(micro == t.gradient_accumulation_steps - 1);  // the last backward all-reduces the gradients
      std::optional<Batch> host_batch = reader->next_batch();
      if (!host_batch) throw Error("[data] " + data_cfg.type + ": the training reader returned no batch");
      window_tokens += host_batch->at("attention_mask").sum().item<std::int64_t>();  // on the host: no device sync
      const std::int64_t max_id = host_batch->at("input_ids").max().item<std::int64_t>();
      if (max_id >= model->config().vocab_size)
        throw Error(fmt::format("[data] {}: token id {} >= the model's vocab_size {}: the data was prepared with another "
                                "vocabulary than the model's (check the vocab file and [model] preset/config)",
                                data_cfg.type, max_id, model->config().vocab_size));
      Batch batch = to_device(std::move(*host_batch), device);
      StepOutput out;
      {
        std::optional<compat::AutocastScope> autocast;
        if (autocast_dtype) autocast.emplace(device.type(), *autocast_dtype);
        out = task->step(*model, batch);  // forward + loss
      }
      scaler.scale(out.loss / static_cast<double>(t.gradient_accumulation_steps)).backward();
      window.add(out.metrics);
      window_sequences += batch.size();
    }

    for (auto& p : params)  // a sparse embedding gradient that met no dense one (bert.cpp's embed): the optimizers take dense
      if (p.grad().defined() && p.grad().is_sparse()) p.mutable_grad() = p.grad().to_dense();
    dp->finish_gradient_sync();  // param.grad() = the average over ranks
    std::vector<at::Tensor> grads;  // what the optimizer reads: fp32 master gradients under use_pure_fp16
    if (master) grads = master->stage_gradients();
    else
      for (auto& p : params)
        if (p.grad().defined()) grads.push_back(p.grad());
    const bool finite = dp->all_true(scaler.unscale_and_check(grads));  // every rank skips the same steps
    if (finite) {
      RECORD_FUNCTION("bertx::optimizer_step", c10::ArrayRef<const c10::IValue>{});  // its total time in --profile
      optimizer->step(lr);
      nonfinite_run = 0;
    } else {
      ++skipped;
      ++nonfinite_run;
      spdlog::warn("step {}: non-finite gradients, step skipped (loss scale {} -> {}), {} in a row", step + 1, scaler.scale(),
                   scaler.scale() * 0.5, nonfinite_run);
    }
    scaler.update(finite);
    if (t.precision == Precision::Amp && scaler.scale() < t.min_loss_scale)
      throw Error(fmt::format("loss scale fell to {} (< min_loss_scale {}) at step {}: fp16 training diverged; the last good checkpoint "
                              "is kept - lower the learning rate or use precision = \"amp-bf16\"", scaler.scale(), t.min_loss_scale, step + 1));
    if (nonfinite_run >= t.max_nonfinite_steps)
      throw Error(fmt::format("{} consecutive steps with non-finite gradients (up to step {}): training diverged; the last good "
                              "checkpoint is kept", nonfinite_run, step + 1));
    const std::int64_t done = step + 1;

    if (bench.enabled) {
      synchronize(device);
      if (done - start > bench.warmup_steps) bench_step_seconds.push_back(std::chrono::duration<double>(Clock::now() - step_start).count());
    }
    if (done % t.log_freq == 0 || done == end) {
      const double seconds = std::chrono::duration<double>(Clock::now() - window_start).count();
      Metrics m = window.mean("");
      m.emplace_back("lr", lr);
      m.emplace_back("loss_scale", scaler.scale());
      m.emplace_back("sequences_per_second", static_cast<double>(window_sequences) / seconds);
      m.emplace_back("tokens_per_second", static_cast<double>(window_tokens) / seconds);
      m.emplace_back("skipped_steps", static_cast<double>(skipped));
      m = average_over_ranks(*dp, std::move(m));
      for (auto& [k, v] : m)
        if (k == "sequences_per_second" || k == "tokens_per_second") v *= static_cast<double>(world);  // all ranks' total
      ctx.report.step(done, m);
      window = MetricWindow();
      window_sequences = window_tokens = 0;
      window_start = Clock::now();
    }
    // Evaluation (and at the end prediction) comes before the step's checkpoint: a process killed after the
    // checkpoint has logged everything of that step, one killed before it replays the step on resume.
    if (t.eval && !bench.enabled && t.eval_freq > 0 && done % t.eval_freq == 0 && done != end) run_eval("eval", false, done);
    if (!bench.enabled && done == end) finish(end);
    if (!bench.enabled && (done % t.num_steps_per_checkpoint == 0 || done == end)) save(done);
    if (!dp->all_true(!stop_requested())) {  // a signal to any rank stops all of them after this step
      if (!bench.enabled && done % t.num_steps_per_checkpoint != 0 && done != end) save(done);
      return TrainResult::Interrupted;
    }
  }

  if (bench.enabled) {
    const double median = percentile(bench_step_seconds, 0.5);
    std::vector<double> own(static_cast<std::size_t>(world), 0.0);  // this rank's sequences/s at its index
    own[static_cast<std::size_t>(rank)] = static_cast<double>(t.batch_size * t.gradient_accumulation_steps) / median;
    own = dp->all_average(own);
    std::string per_rank;
    for (std::int64_t r = 0; r < world; ++r)
      per_rank += fmt::format("{}rank {} {:.2f}", r ? ", " : "", r, own[static_cast<std::size_t>(r)] * static_cast<double>(world));
    if (world > 1) ctx.report.event("bench", "sequences/s per rank: " + per_rank);
    Metrics m{{"bench_sequences_per_second", static_cast<double>(global_batch) / median},  // all ranks (they step together)
              {"bench_step_seconds_p50", median},
              {"bench_step_seconds_p90", percentile(bench_step_seconds, 0.9)},
              {"bench_step_seconds_p99", percentile(bench_step_seconds, 0.99)},
              {"bench_peak_rss_mb", peak_rss_mb()}};
    if (world > 1 && bench.baseline_sequences_per_second > 0)
      m.emplace_back("bench_scaling_efficiency", m[0].second / (static_cast<double>(world) * bench.baseline_sequences_per_second));
    ctx.report.step(end, m, /*progress=*/false);
    if (profile) {
      const std::string file = cfg.run.output_dir + "/op_profile.json";
      write_file_atomic(file, profile->json().dump(1));
      ctx.report.event("profile", fmt::format("operators per measured step ({} steps; profiled steps run slower):\n{}\n(all steps: {})",
                                              bench.steps, profile->table(25, static_cast<double>(bench.steps)), file));
    }
    ctx.report.event("bench", fmt::format("{:.2f} sequences/s (median step {:.1f} ms over {} steps, p90 {:.1f} ms), peak RSS {:.0f} MB",
                                          m[0].second, median * 1e3, bench_step_seconds.size(), m[2].second * 1e3, m[4].second));
    return TrainResult::Finished;
  }
  return TrainResult::Finished;  // finish(end) ran before the last checkpoint
}

}  // namespace bertx
