// train_state.hpp - what one training step needs, built once by set_up_training() (train_setup.cpp), and
// what a step reports to the observers (observers.hpp). The step itself, train_step(), and the loop that
// runs it are in trainer.cpp.
//
// Why a struct: the set-up (device, data parallel, components, optimizer groups, resume, broadcast) is long
// and runs once; the step is short and runs max_steps times. Keeping the step's inputs in one place lets
// train_step() read like the pseudo-code of shared/design.md and lets the observers (logging, evaluation,
// checkpoints, benchmark, stop) see the same objects without the loop passing them around.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "bertx/batch.hpp"
#include "bertx/dataset.hpp"
#include "bertx/model.hpp"
#include "bertx/optimizer.hpp"
#include "bertx/task.hpp"
#include "bertx/execution.hpp"
#include "dist/data_parallel.hpp"
#include "host/run.hpp"
#include "train/loss_scaler.hpp"
#include "train/distill.hpp"
#include "train/master_weights.hpp"
#include "host/train_options.hpp"

namespace bertx {

struct TrainState {
  TrainOptions options;  // [train]; max_steps resolved for epoch-based schedules
  at::Device device{at::kCPU};
  ExecutionPolicy policy;            // how the run computes ([train] precision, use_pure_fp16, device)
  std::unique_ptr<DataParallel> dp;  // world size 1 without a launcher (every call a no-op)
  std::shared_ptr<Model> model;      // on `device`, in train mode, heads attached by the task
  std::shared_ptr<Task> task;
  std::shared_ptr<Distiller> distill;     // the teacher and the loss under [distill] teacher; null without
  std::shared_ptr<Optimizer> optimizer;   // the plugin's, wrapped by `master` under use_pure_fp16
  std::shared_ptr<MasterWeights> master;  // null unless use_pure_fp16
  std::shared_ptr<DatasetReader> reader;  // training split of this rank, a CheckedReader (never ends, ids < vocab_size)
  std::vector<at::Tensor> params;         // module().named_parameters(), in that order
  LossScaler scaler{LossScalerConfig{}};
  std::string root;                         // this phase's checkpoint folder
  std::optional<std::int64_t> resume_step;  // the checkpoint resumed from, if any
  std::int64_t start = 0;                   // steps already done (0, or the resumed checkpoint's step)
  std::int64_t skipped = 0;                 // steps skipped for non-finite gradients, resumed ones included
};

// What one optimizer step did, for the observers.
struct StepInfo {
  std::int64_t step = 0;           // steps done, this one included (1-based)
  double lr = 0;                   // learning rate the step used
  bool finite = true;              // false: non-finite gradients on some rank, the update was skipped everywhere
  double loss_scale_before = 1;    // the scale this step's backward used
  double loss_scale = 1;           // the scale after the update (what the next step uses)
  std::int64_t skipped_steps = 0;  // total skipped so far (TrainState::skipped)
  // L2 norm of all the optimizer's gradients together, after the all-reduce and unscaling, before any clipping
  // (torch.nn.utils.clip_grad_norm_'s total_norm); measured only when train_step was asked (log steps), and
  // only for a finite step.
  std::optional<double> grad_norm;
  std::int64_t sequences = 0;                              // sequences this rank trained on in the step
  std::int64_t tokens = 0;                                 // their attention-mask tokens
  std::vector<std::map<std::string, at::Tensor>> metrics;  // the task's detached scalars, one map per micro-batch
};

// Threads, device, data parallel group, model + task + optimizer + reader, epoch-based max_steps, loss
// scaler, resume from this phase's newest checkpoint (when `resume` and [train] resume = "auto"), rank 0's
// state broadcast to every rank; reports the "process", "resume" and "setup" events.
TrainState set_up_training(RunContext& ctx, bool resume);

// The run's execution policy: [train] precision / use_pure_fp16 / fp32_params on `device`, for training or, with
// do_train = false, for prediction (int8 allowed). Throws naming [train] precision when the device cannot run it.
ExecutionPolicy policy_of(const TrainOptions& t, const at::Device& device);

// One optimizer step (`step` 0-based: steps done before it): accumulation x {forward, loss, scaled
// backward}, gradient all-reduce, unscale + finite check, optimizer step (skipped when non-finite), loss
// scale update. `grad_norm`: also measure StepInfo::grad_norm (one read of every gradient).
StepInfo train_step(TrainState& s, std::int64_t step, bool grad_norm = false);

// sqrt(sum of every tensor's squared L2 norm), computed in float32 whatever their type (StepInfo::grad_norm).
double gradient_norm(const std::vector<at::Tensor>& grads);

// A batch on the device (CPU batches are used in place).
inline Batch to_device(Batch b, const at::Device& d) {
  if (d.is_cpu()) return b;
  for (auto& [k, v] : b.tensors) v = v.to(d, /*non_blocking=*/true);
  return b;
}

}  // namespace bertx
