// train_options.cpp - schemas of [train] and [bench], built from the defaults of the typed structs.
#include "train/train_options.hpp"

namespace bertx {

Schema train_schema() {
  const TrainOptions d;
  return {
      opt_string("phase", d.phase, "checkpoint subfolder; phase 2 starts from phase 1's weights"),
      opt_int("max_steps", d.max_steps, "optimizer steps of this phase (unless epochs > 0)"),
      opt_float("epochs", d.epochs, "> 0: max_steps = ceil(epochs x samples per epoch / global batch)"),
      opt_bool("do_train", d.do_train, "false: no training, only eval / predict with from_pretrained weights"),
      opt_int("batch_size", d.batch_size, "sequences per micro-batch on each rank"),
      opt_int("gradient_accumulation_steps", d.gradient_accumulation_steps, "micro-batches per optimizer step"),
      opt_float("learning_rate", d.learning_rate, "peak learning rate (after warm-up)"),
      opt_float("warmup_proportion", d.warmup_proportion, "fraction of max_steps with linear warm-up"),
      opt_float("warmup_start_lr", d.warmup_start_lr, "learning rate at the first warm-up step"),
      opt_string("schedule", d.schedule, "decay after warm-up: poly, linear (peak -> 0 from warm-up end), constant",
                 {"poly", "linear", "constant"}),
      opt_float("decay_power", d.decay_power, "poly decay exponent: 0.5 NVIDIA pre-training, 1.0 linear"),
      opt_float("weight_decay", d.weight_decay, "decoupled weight decay of parameters not matched by no_decay"),
      opt_strings("no_decay", d.no_decay, "parameter-name substrings that get no weight decay"),
      opt_string("precision", d.precision, "numeric precision", {"fp32", "tf32", "amp", "amp-bf16"}),
      opt_bool("use_pure_fp16", d.use_pure_fp16, "amp/amp-bf16: half weights and gradients, fp32 master weights (the seeds' option)"),
      opt_strings("fp32_params", d.fp32_params, "use_pure_fp16: parameter-name substrings kept in fp32"),
      opt_float("init_loss_scale", d.init_loss_scale, "amp: initial dynamic loss scale"),
      opt_int("loss_scale_window", d.loss_scale_window, "amp: good steps before the loss scale doubles"),
      opt_float("min_loss_scale", d.min_loss_scale, "amp: a loss scale below this stops the run"),
      opt_int("max_nonfinite_steps", d.max_nonfinite_steps, "consecutive non-finite steps that stop the run"),
      opt_int("log_freq", d.log_freq, "optimizer steps between log lines"),
      opt_bool("eval", d.eval, "evaluate on the data reader's eval split"),
      opt_int("eval_freq", d.eval_freq, "steps between evaluations; 0 = at the end only"),
      opt_int("eval_batches", d.eval_batches, "batches per evaluation; 0 = whole eval split"),
      opt_bool("predict", d.predict, "at the end, write the task's prediction files for the test split"),
      opt_int("num_steps_per_checkpoint", d.num_steps_per_checkpoint, "steps between checkpoints"),
      opt_int("keep_checkpoints", d.keep_checkpoints, "newest checkpoints kept"),
      opt_string("resume", d.resume, "continue from this phase's newest checkpoint", {"auto", "never"}),
      opt_string("from_pretrained", d.from_pretrained, "initial weights: HF folder, .safetensors or checkpoint folder"),
  };
}

TrainOptions train_options_from(const Options& o) {
  TrainOptions t;
  t.phase = o.get_string("phase");
  t.max_steps = o.get_int("max_steps");
  t.epochs = o.get_float("epochs");
  t.do_train = o.get_bool("do_train");
  t.batch_size = o.get_int("batch_size");
  t.gradient_accumulation_steps = o.get_int("gradient_accumulation_steps");
  t.learning_rate = o.get_float("learning_rate");
  t.warmup_proportion = o.get_float("warmup_proportion");
  t.warmup_start_lr = o.get_float("warmup_start_lr");
  t.schedule = o.get_string("schedule");
  t.decay_power = o.get_float("decay_power");
  t.weight_decay = o.get_float("weight_decay");
  t.no_decay = o.get_strings("no_decay");
  t.precision = o.get_string("precision");
  t.use_pure_fp16 = o.get_bool("use_pure_fp16");
  t.fp32_params = o.get_strings("fp32_params");
  if (t.use_pure_fp16 && t.precision != "amp" && t.precision != "amp-bf16")
    throw Error(o.where() + " use_pure_fp16 = true needs precision = \"amp\" (fp16) or \"amp-bf16\" (bf16), got \"" + t.precision + "\"");
  t.init_loss_scale = o.get_float("init_loss_scale");
  t.loss_scale_window = o.get_int("loss_scale_window");
  t.min_loss_scale = o.get_float("min_loss_scale");
  t.max_nonfinite_steps = o.get_int("max_nonfinite_steps");
  t.log_freq = o.get_int("log_freq");
  t.eval = o.get_bool("eval");
  t.eval_freq = o.get_int("eval_freq");
  t.eval_batches = o.get_int("eval_batches");
  t.predict = o.get_bool("predict");
  t.num_steps_per_checkpoint = o.get_int("num_steps_per_checkpoint");
  t.keep_checkpoints = o.get_int("keep_checkpoints");
  t.resume = o.get_string("resume");
  t.from_pretrained = o.get_string("from_pretrained");
  auto positive = [&](std::int64_t v, const char* key) {
    if (v < 1) throw Error(o.where() + " " + key + ": must be >= 1, got " + std::to_string(v));
  };
  positive(t.max_steps, "max_steps");
  positive(t.batch_size, "batch_size");
  positive(t.gradient_accumulation_steps, "gradient_accumulation_steps");
  positive(t.log_freq, "log_freq");
  positive(t.num_steps_per_checkpoint, "num_steps_per_checkpoint");
  positive(t.keep_checkpoints, "keep_checkpoints");
  if (t.epochs < 0) throw Error(o.where() + " epochs: must be >= 0 (0 = use max_steps), got " + std::to_string(t.epochs));
  if (t.warmup_proportion < 0 || t.warmup_proportion > 1 || (t.schedule == "linear" && t.warmup_proportion == 1))
    throw Error(o.where() + " warmup_proportion: must be in [0, 1] ([0, 1) with schedule linear), got " + std::to_string(t.warmup_proportion));
  return t;
}

Schema bench_schema() {
  const BenchOptions d;
  return {opt_bool("enabled", d.enabled, "benchmark mode: time warm-up + measured steps, no checkpoints"),
          opt_int("warmup_steps", d.warmup_steps, "steps run but not measured"),
          opt_int("steps", d.steps, "measured steps"),
          opt_float("baseline_sequences_per_second", d.baseline_sequences_per_second,
                    "one process's sequences/s; > 0: report scaling efficiency of a multi-rank run"),
          opt_bool("profile", d.profile, "time every operator over the measured steps: a table in the log and "
                                         "<output_dir>/op_profile.json (the timing itself slows the steps)")};
}

BenchOptions bench_options_from(const Options& o) {
  BenchOptions b;
  b.enabled = o.get_bool("enabled");
  b.warmup_steps = o.get_int("warmup_steps");
  b.steps = o.get_int("steps");
  b.baseline_sequences_per_second = o.get_float("baseline_sequences_per_second");
  b.profile = o.get_bool("profile");
  if (b.baseline_sequences_per_second < 0)
    throw Error(o.where() + " baseline_sequences_per_second: must be >= 0 (0 = none), got " + std::to_string(b.baseline_sequences_per_second));
  if (b.warmup_steps < 0 || b.steps < 1) throw Error(o.where() + ": need warmup_steps >= 0 and steps >= 1");
  return b;
}

}  // namespace bertx
