// train_options.cpp - the field lists of [train] and [bench] (schema, reader and values from one list; the
// defaults are the structs' member initialisers) and the range checks that follow reading.
#include "host/train_options.hpp"

namespace bertx {

const Fields<TrainOptions>& train_fields() {
  using T = TrainOptions;
  static const Fields<TrainOptions> f{
      field("phase", &T::phase, "checkpoint subfolder; phase 2 starts from phase 1's weights"),
      field("max_steps", &T::max_steps, "optimizer steps of this phase (unless epochs > 0)"),
      field("epochs", &T::epochs, "> 0: max_steps = ceil(epochs x samples per epoch / global batch)"),
      field("do_train", &T::do_train, "false: no training, only eval / predict with from_pretrained weights"),
      field("batch_size", &T::batch_size, "sequences per micro-batch on each rank"),
      field("gradient_accumulation_steps", &T::gradient_accumulation_steps, "micro-batches per optimizer step"),
      field("learning_rate", &T::learning_rate, "peak learning rate (after warm-up)"),
      field("warmup_proportion", &T::warmup_proportion, "fraction of max_steps with linear warm-up"),
      field("warmup_start_lr", &T::warmup_start_lr, "learning rate at the first warm-up step"),
      field("schedule", &T::schedule, "decay after warm-up: poly, linear (peak -> 0 from warm-up end), constant"),
      field("decay_power", &T::decay_power, "poly decay exponent: 0.5 NVIDIA pre-training, 1.0 linear"),
      field("weight_decay", &T::weight_decay, "decoupled weight decay of parameters not matched by no_decay"),
      field("no_decay", &T::no_decay, "parameter-name substrings that get no weight decay"),
      field("precision", &T::precision, "numeric precision"),
      field("use_pure_fp16", &T::use_pure_fp16,
            "amp/amp-bf16: half weights and gradients, fp32 master weights (the seeds' option)"),
      field("fp32_params", &T::fp32_params, "use_pure_fp16: parameter-name substrings kept in fp32"),
      field("init_loss_scale", &T::init_loss_scale, "amp: initial dynamic loss scale"),
      field("loss_scale_window", &T::loss_scale_window, "amp: good steps before the loss scale doubles"),
      field("min_loss_scale", &T::min_loss_scale, "amp: a loss scale below this stops the run"),
      field("max_nonfinite_steps", &T::max_nonfinite_steps, "consecutive non-finite steps that stop the run"),
      field("log_freq", &T::log_freq, "optimizer steps between log lines"),
      field("eval", &T::eval, "evaluate on the data reader's eval split"),
      field("eval_freq", &T::eval_freq, "steps between evaluations; 0 = at the end only"),
      field("eval_batches", &T::eval_batches, "batches per evaluation; 0 = whole eval split"),
      field("predict", &T::predict, "at the end, write the task's prediction files for the test split"),
      field("num_steps_per_checkpoint", &T::num_steps_per_checkpoint, "steps between checkpoints"),
      field("keep_checkpoints", &T::keep_checkpoints, "newest checkpoints kept"),
      field("resume", &T::resume, "continue from this phase's newest checkpoint"),
      field("from_pretrained", &T::from_pretrained, "initial weights: HF folder, .safetensors or checkpoint folder"),
  };
  return f;
}

Schema train_schema() { return train_fields().schema(); }

TrainOptions train_options_from(const Options& o) {
  const TrainOptions t = train_fields().read(o);
  if (t.use_pure_fp16 && !mixed_precision(t.precision))
    throw Error(o.where() + " use_pure_fp16 = true needs precision = \"amp\" (fp16) or \"amp-bf16\" (bf16), got \"" +
                enum_name(t.precision) + "\"");
  auto positive = [&](std::int64_t v, const char* key) {
    if (v < 1) throw Error(o.where() + " " + key + ": must be >= 1, got " + std::to_string(v));
  };
  positive(t.max_steps, "max_steps");
  positive(t.batch_size, "batch_size");
  positive(t.gradient_accumulation_steps, "gradient_accumulation_steps");
  positive(t.log_freq, "log_freq");
  positive(t.num_steps_per_checkpoint, "num_steps_per_checkpoint");
  positive(t.keep_checkpoints, "keep_checkpoints");
  if (t.epochs < 0)
    throw Error(o.where() + " epochs: must be >= 0 (0 = use max_steps), got " + std::to_string(t.epochs));
  if (t.warmup_proportion < 0 || t.warmup_proportion > 1 ||
      (t.schedule == Schedule::Linear && t.warmup_proportion == 1))
    throw Error(o.where() + " warmup_proportion: must be in [0, 1] ([0, 1) with schedule linear), got " +
                std::to_string(t.warmup_proportion));
  return t;
}

const Fields<BenchOptions>& bench_fields() {
  using B = BenchOptions;
  static const Fields<BenchOptions> f{
      field("enabled", &B::enabled, "benchmark mode: time warm-up + measured steps, no checkpoints"),
      field("warmup_steps", &B::warmup_steps, "steps run but not measured"),
      field("steps", &B::steps, "measured steps"),
      field("baseline_sequences_per_second", &B::baseline_sequences_per_second,
            "one process's sequences/s; > 0: report scaling efficiency of a multi-rank run"),
      field("profile", &B::profile,
            "time every operator over the measured steps: a table in the log and "
            "<output_dir>/op_profile.json (the timing itself slows the steps)"),
  };
  return f;
}

Schema bench_schema() { return bench_fields().schema(); }

BenchOptions bench_options_from(const Options& o) {
  const BenchOptions b = bench_fields().read(o);
  if (b.baseline_sequences_per_second < 0)
    throw Error(o.where() + " baseline_sequences_per_second: must be >= 0 (0 = none), got " +
                std::to_string(b.baseline_sequences_per_second));
  if (b.warmup_steps < 0 || b.steps < 1) throw Error(o.where() + ": need warmup_steps >= 0 and steps >= 1");
  return b;
}

}  // namespace bertx
