// train_setup.cpp - everything the training step needs, built once before the loop (trainer.cpp):
//   process (threads, device, precision, seed) -> data parallel group -> model + task (+ pre-trained weights)
//   -> optimizer with decay / no-decay groups (fp32 masters under use_pure_fp16) -> training reader (token
//   ids checked against the model's vocabulary) -> epoch-based max_steps -> loss scaler -> resume from this
//   phase's newest checkpoint -> rank 0's state on every rank -> gradient hooks.
// Why apart from the step: it runs once, is long, and the step should read in one screen.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>

#include "bertx/compat.hpp"
#include "bertx/error.hpp"
#include "data/checked_reader.hpp"
#include "host/plugin_host.hpp"
#include "train/process_setup.hpp"
#include "host/report.hpp"
#include "store/store.hpp"
#include "train/checkpoint.hpp"
#include "train/train_state.hpp"
#include "io/interop.hpp"
#include "io/weights.hpp"

namespace fs = std::filesystem;

namespace bertx {

namespace {

at::Device pick_device(const std::string& wanted) {
  const bool cuda = torch::cuda::is_available();
  if (wanted == "cuda" && !cuda)
    throw Error("[run] device = \"cuda\" but no CUDA device is available to this LibTorch");
  return (wanted == "cuda" || (wanted == "auto" && cuda)) ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
}

// Initial weights: an HF folder, a .safetensors file, a checkpoint root/step folder (newest step), or another
// trainer's checkpoint (Google's TF BERT folder or prefix, NVIDIA's ckpt_N.pt: io/interop.hpp).
void load_pretrained(Model& model, const std::string& from) {
  std::string file = from;
  TensorMap weights;
  if (auto step = fs::is_directory(from) ? latest_checkpoint(from) : std::nullopt) {
    file = checkpoint_dir(from, *step) + "/model.safetensors";
    weights = load_safetensors(file);
  } else {
    const ModelSource source = find_model_source(from);
    file = source.weights;
    std::vector<std::string> notes;
    weights = load_model_weights(source, &notes);
    for (const auto& n : notes) spdlog::info("note: {}", n);
  }
  LoadReport r = load_weights(model.module(), weights, file);
  spdlog::info("initial weights from {}: {} tensors{}", file, r.loaded.size(),
               r.missing.empty() ? "" : fmt::format(", {} new (e.g. {})", r.missing.size(), r.missing.front()));
}

// The optimizer over every model parameter: two groups, with and without weight decay (by name substring).
// Fills s.params (named_parameters order) and returns their names.
std::vector<std::string> build_optimizer(RunContext& ctx, TrainState& s) {
  const TrainOptions& t = s.options;
  const ComponentConfig& optim_cfg = component(ctx.config, "optimizer");
  s.optimizer = ctx.host.create<Optimizer>(Kind::Optimizer, optim_cfg.type, optim_cfg.options);
  if (s.policy.master_weights)
    s.optimizer = s.master = std::make_shared<MasterWeights>(s.optimizer, *s.policy.autocast, s.policy.fp32_params);
  ParamGroup decay{{}, {}, t.weight_decay}, no_decay{{}, {}, 0.0};
  std::vector<std::string> names;
  for (const auto& item : s.model->module().named_parameters(true)) {
    names.push_back(item.key());
    const bool excluded = std::any_of(t.no_decay.begin(), t.no_decay.end(),
                                      [&](const std::string& p) { return item.key().find(p) != std::string::npos; });
    ParamGroup& g = excluded ? no_decay : decay;
    g.names.push_back(item.key());
    g.params.push_back(item.value());
    s.params.push_back(item.value());
  }
  s.optimizer->add_param_group(decay);
  s.optimizer->add_param_group(no_decay);
  return names;
}

// Model weights, optimizer state, RNG, reader position and loss scale from the checkpoint of s.resume_step.
void resume_from_checkpoint(RunContext& ctx, TrainState& s) {
  const std::string dir = checkpoint_dir(s.root, *s.resume_step);
  LoadedCheckpoint c = load_checkpoint(dir);
  load_weights(s.model->module(), c.model, dir);
  s.optimizer->load_state_dict(c.optimizer);
  restore_rng(c.rng);
  s.reader->seek(c.progress.reader);
  s.scaler.restore(c.progress.loss_scale, c.progress.good_steps);
  s.start = c.progress.step;
  s.skipped = c.progress.skipped_steps;
  ctx.report.event(
      "resume", fmt::format("from {} (step {}, epoch {})", checkpoint_dir(s.root, s.start), s.start, c.progress.epoch));
}

// Every rank starts from rank 0's weights (initialised, pre-trained or resumed), checked equal; the optimizer
// state and reader position come from the same checkpoint on every rank. Then the gradient hooks.
void share_rank0_state(TrainState& s, const std::vector<std::string>& param_names) {
  if (s.dp->all_average(static_cast<double>(s.start)) != static_cast<double>(s.start))
    throw Error(fmt::format(
        "rank {} would start at step {} (checkpoint folder {}), another rank elsewhere: every rank must see "
        "the same checkpoints (a shared output_dir)",
        s.dp->rank(), s.start, s.root));
  std::vector<at::Tensor> state = s.params;
  std::vector<std::string> state_names = param_names;
  for (const auto& item : s.model->module().named_buffers(true))
    state.push_back(item.value()), state_names.push_back(item.key());
  if (s.master) {
    state.insert(state.end(), s.master->masters().begin(), s.master->masters().end());
    for (const auto& n : s.master->master_names()) state_names.push_back(n);
  }
  s.dp->broadcast_parameters(state, state_names);
  s.dp->attach(s.params, param_names);
}

// [distill] teacher set: the teacher beside the model (train/distill.hpp); the student's first weights from the
// teacher's layers (init_layers) unless it resumes or starts from from_pretrained.
void set_up_distillation(RunContext& ctx, TrainState& s) {
  const DistillOptions d = distill_options_from(ctx.config.sections.at("distill"));
  if (d.teacher.empty()) return;
  if (!d.init_layers.empty() && !s.options.from_pretrained.empty())
    throw Error("[distill] init_layers and [train] from_pretrained both set the student's first weights: keep one");
  s.distill = std::make_shared<Distiller>(ctx.host, d, *s.task, *s.model, s.device);
  if (!s.resume_step) s.distill->init_student(*s.model);
  ctx.report.event(
      "distill", fmt::format("teacher {} ({} parameters); loss = {} hard + {} soft (T = {}) + {} hidden + {} attention "
                             "+ {} embedding{}{}",
                             d.teacher, s.distill->teacher_parameters(), d.hard_weight, d.soft_weight, d.temperature,
                             d.hidden_weight, d.attention_weight, d.embedding_weight,
                             d.init_layers.empty() || s.resume_step ? "" : "; student layers from the teacher's",
                             s.distill->projection().empty() ? "" : "; learned projection " + s.distill->projection()));
}

}  // namespace

ExecutionPolicy policy_of(const TrainOptions& t, const at::Device& device) {
  // A run is a training run (master weights under use_pure_fp16, loss scaling) unless it only predicts in int8.
  const bool predict_int8 = !t.do_train && t.precision == Precision::Int8;
  return make_policy(
      {t.precision, device, predict_int8 ? PolicyUse::Inference : PolicyUse::Training, t.use_pure_fp16, t.fp32_params},
      "[train] precision");
}

TrainState set_up_training(RunContext& ctx, bool resume) {
  const ResolvedConfig& cfg = ctx.config;
  TrainState s;
  TrainOptions& t = s.options;
  t = train_options_from(cfg.sections.at("train"));
  const ComponentConfig &model_cfg = component(cfg, "model"), &task_cfg = component(cfg, "task"),
                        &data_cfg = component(cfg, "data");

  // --- process set-up: threads, device, precision, seed -----------------------------------------------
  const ProcessSettings process =
      apply_threads(static_cast<int>(cfg.run.threads));  // 0 = the CPUs this process may use
  s.device = DataParallel::device_for(ctx.rendezvous, pick_device(cfg.run.device));
  // Joins the job's other ranks (a no-op for a single process); rank 0 records where every rank runs.
  s.dp = DataParallel::create(ctx.rendezvous, cfg.run.dist_backend, s.device, cfg.run.dist_bucket_mb,
                              static_cast<int>(std::min<std::int64_t>(cfg.run.dist_timeout_s, 1 << 30)));
  if (ctx.store) {
    ctx.store->set_ranks(ctx.run_id, s.dp->hosts());
    ctx.store->set_process(ctx.run_id, process.json());
  }
  ctx.report.event("process", process.summary());
  s.policy = policy_of(t, s.device);
  apply_process_wide(s.policy);
  if (s.policy.autocast == at::kBFloat16 && !s.device.is_cuda())
    if (const std::string w = bf16_emulation_warning(process.cpu_bf16); !w.empty()) ctx.report.event("warning", w);
  at::manual_seed(static_cast<std::uint64_t>(cfg.run.seed));

  // --- components ---------------------------------------------------------------------------------------
  s.model = ctx.host.create<Model>(Kind::Model, model_cfg.type, model_cfg.options);
  s.task = ctx.host.create<Task>(Kind::Task, task_cfg.type, task_cfg.options);
  s.task->attach(*s.model);
  s.root = checkpoint_root(cfg);
  s.resume_step = (t.resume == Resume::Auto && resume) ? latest_checkpoint(s.root) : std::nullopt;
  if (!s.resume_step && !t.from_pretrained.empty()) load_pretrained(*s.model, t.from_pretrained);
  set_up_distillation(ctx, s);
  s.model->module().to(s.device);
  s.model->module().train();
  s.model->prepare(s.policy);
  const std::vector<std::string> param_names = build_optimizer(ctx, s);

  s.reader =
      std::make_shared<CheckedReader>(ctx.host.create<DatasetReader>(Kind::Dataset, data_cfg.type, data_cfg.options),
                                      s.model->config().vocab_size, data_cfg.type);
  s.reader->open(DatasetContext{"train", t.batch_size, s.dp->rank(), s.dp->world_size(),
                                static_cast<std::uint64_t>(cfg.run.seed)});
  if (t.epochs > 0 && t.do_train) {  // epoch-based schedule (fine-tuning): the reader knows the epoch size
    const std::int64_t per_epoch = s.reader->samples_per_epoch();
    if (per_epoch <= 0)
      throw Error("[train] epochs = " + std::to_string(t.epochs) + ": the [data] reader " + data_cfg.type +
                  " does not know its epoch size; set max_steps instead");
    const double steps = std::ceil(t.epochs * static_cast<double>(per_epoch) /
                                   static_cast<double>(t.batch_size * t.gradient_accumulation_steps));
    t.max_steps = std::max<std::int64_t>(1, static_cast<std::int64_t>(steps));
    ctx.report.set_total_steps(t.max_steps);
  }
  s.scaler = LossScaler(LossScalerConfig{s.policy.loss_scaling, t.init_loss_scale, 2.0, 0.5, t.loss_scale_window});

  // --- resume, then the same state on every rank ------------------------------------------------------------
  if (s.resume_step) resume_from_checkpoint(ctx, s);
  share_rank0_state(s, param_names);

  const std::int64_t world = s.dp->world_size();
  std::int64_t parameter_count = 0;
  for (const auto& p : s.params) parameter_count += p.numel();
  std::string hosts;
  for (const auto& h : s.dp->hosts()) hosts += (hosts.empty() ? "" : ",") + h;
  ctx.report.event(
      "setup",
      fmt::format("{} parameters on {}, precision {}, {} threads; global batch {} = {} x {} accumulation x {} rank(s); "
                  "steps {}..{}{}",
                  parameter_count, s.device.str(),
                  s.master ? fmt::format("{} ({} tensors half, {} fp32)", s.policy.describe(), s.master->half_count(),
                                         s.master->fp32_count())
                           : s.policy.describe(),
                  process.intra_op_threads, t.batch_size * t.gradient_accumulation_steps * world, t.batch_size,
                  t.gradient_accumulation_steps, world, s.start, t.max_steps,
                  world > 1 ? fmt::format("; {} backend, ranks on {}", s.dp->backend(), hosts) : ""));
  return s;
}

}  // namespace bertx
