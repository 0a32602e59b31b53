// train_options.hpp - the [train] and [bench] sections of an experiment: typed, one default and one
// comment per field. Their schemas and readers come from one field list each (train_options.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bertx/options.hpp"
#include "bertx/precision.hpp"

namespace bertx {

// [train] schedule: the learning-rate decay after warm-up (schedule.hpp).
enum class Schedule { Poly, Linear, Constant };
inline const EnumNames<Schedule>& option_names(Schedule) {
  static const EnumNames<Schedule> n{
      {Schedule::Poly, "poly"}, {Schedule::Linear, "linear"}, {Schedule::Constant, "constant"}};
  return n;
}

// [train] resume: auto continues from this phase's newest checkpoint; never starts afresh.
enum class Resume { Auto, Never };
inline const EnumNames<Resume>& option_names(Resume) {
  static const EnumNames<Resume> n{{Resume::Auto, "auto"}, {Resume::Never, "never"}};
  return n;
}

struct TrainOptions {
  std::string phase = "phase1";   // checkpoint subfolder; phase 2 starts from phase 1's weights
  std::int64_t max_steps = 1000;  // optimizer steps of this phase (unless epochs > 0)
  double epochs = 0.0;            // > 0: max_steps = ceil(epochs x samples per epoch / global batch)
  bool do_train = true;           // false: no training, only eval / predict (from_pretrained weights)
  std::int64_t batch_size = 32;   // sequences per micro-batch on each rank
  std::int64_t gradient_accumulation_steps =
      1;                            // micro-batches per optimizer step (global batch = batch x this x ranks)
  double learning_rate = 1e-4;      // peak learning rate (after warm-up)
  double warmup_proportion = 0.01;  // fraction of max_steps with linear warm-up
  double warmup_start_lr = 0.0;     // learning rate at the first warm-up step
  Schedule schedule = Schedule::
      Poly;  // poly: (1 - progress)^decay_power after warm-up; linear: peak -> 0 from the warm-up's end; constant
  double decay_power = 0.5;    // 0.5 = NVIDIA pre-training, 1.0 = linear (fine-tuning)
  double weight_decay = 0.01;  // decoupled weight decay of parameters not matched by no_decay
  std::vector<std::string> no_decay{"bias", "LayerNorm.weight", "LayerNorm.bias"};  // name substrings without decay
  Precision precision = Precision::Fp32;  // fp32 | tf32 | amp (fp16 + loss scaling, CUDA) | amp-bf16 | int8
  bool use_pure_fp16 =
      false;  // amp / amp-bf16: weights and gradients in fp16 / bf16, fp32 master weights in the optimizer
  std::vector<std::string> fp32_params{"LayerNorm"};  // use_pure_fp16: parameter-name substrings kept in fp32
  double init_loss_scale = 1048576.0;                 // amp: initial dynamic loss scale (2^20, NVIDIA's recipe)
  std::int64_t loss_scale_window = 2000;              // amp: good steps before the scale doubles
  double min_loss_scale = 1.0;                  // amp: a scale below this stops the run (the last checkpoint stays)
  std::int64_t max_nonfinite_steps = 10;        // consecutive skipped (non-finite) steps that stop the run
  std::int64_t log_freq = 10;                   // optimizer steps between log lines / metric rows
  bool eval = false;                            // evaluate on the [data] reader's eval split
  std::int64_t eval_freq = 0;                   // steps between evaluations; 0 = at the end only
  std::int64_t eval_batches = 0;                // batches per evaluation; 0 = the whole eval split
  bool predict = false;                         // at the end, write the task's prediction files for the test split
  std::int64_t num_steps_per_checkpoint = 200;  // steps between checkpoints (one is always written at the end)
  std::int64_t keep_checkpoints = 3;            // newest checkpoints kept; older ones are deleted
  Resume resume = Resume::Auto;                 // auto: continue from this phase's newest checkpoint; never
  std::string from_pretrained;                  // weights to start from: HF folder, .safetensors, or checkpoint folder
};

struct BenchOptions {
  bool enabled = false;                      // benchmark mode: no checkpoints, timing of warm-up + measured steps
  std::int64_t warmup_steps = 5;             // steps run but not measured
  std::int64_t steps = 20;                   // measured steps
  double baseline_sequences_per_second = 0;  // one process's figure: > 0 adds bench_scaling_efficiency under a launcher
  bool profile = false;  // time every operator over the measured steps (table in the log, op_profile.json)
};

const Fields<TrainOptions>& train_fields();
Schema train_schema();
TrainOptions train_options_from(const Options& o);  // read + range checks (errors name o.where() and the key)
const Fields<BenchOptions>& bench_fields();
Schema bench_schema();
BenchOptions bench_options_from(const Options& o);

}  // namespace bertx
