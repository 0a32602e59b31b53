// optimizers.hpp - the optimizers of the `optimizers` plugin (AdamW, BertAdam, LAMB, NVLAMB) as typed
// factories: a config struct (defaults = the BERT recipes), its schema, its parsing from validated Options,
// and make_*(). plugin.cpp registers them with the host; tests build them directly, without a plugin host.
//
// All four share: state in float32 on the parameter's device, state_dict() keys "<param>.exp_avg",
// "<param>.exp_avg_sq" and "step" (int64 scalar: the number of steps taken), decoupled weight decay from
// the ParamGroup, and the learning rate given to each step(lr) (schedules are the host's business).
// Exact semantics and reference code: the comment at the top of each <name>.cpp.
#pragma once
#include <memory>

#include "bertx/optimizer.hpp"
#include "bertx/options.hpp"

namespace bertx::optim {

// torch.optim.AdamW (torch 1.13) with optional global-norm clipping (torch.nn.utils.clip_grad_norm_).
struct AdamWConfig {
  double beta1 = 0.9;          // decay of the first moment (option betas[0])
  double beta2 = 0.999;        // decay of the second moment (option betas[1])
  double eps = 1e-6;           // added to sqrt(v_hat); BERT recipes use 1e-6 (torch's own default is 1e-8)
  double max_grad_norm = 1.0;  // clip the global L2 norm of all gradients to this before the step; 0 = off
};
Schema adamw_schema();
AdamWConfig adamw_config(const Options& options);  // throws bertx::Error naming options.where() and the key
std::shared_ptr<Optimizer> make_adamw(const AdamWConfig& config);

// NVIDIA BertAdam (DeepLearningExamples BERT fine-tuning): Adam without bias correction, each gradient
// tensor clipped to max_grad_norm on its own.
struct BertAdamConfig {
  double beta1 = 0.9;          // decay of the first moment (option betas[0])
  double beta2 = 0.999;        // decay of the second moment (option betas[1])
  double eps = 1e-6;           // added to sqrt(v)
  double max_grad_norm = 1.0;  // clip EACH gradient tensor's L2 norm to this (per tensor, not global); 0 = off
};
Schema bertadam_schema();
BertAdamConfig bertadam_config(const Options& options);
std::shared_ptr<Optimizer> make_bertadam(const BertAdamConfig& config);

// LAMB as in cybertronai/pytorch-lamb Lamb(adam=False): no bias correction, no clipping, trust ratio
// min(||p||, 10) / ||update|| on every tensor.
struct LambConfig {
  double beta1 = 0.9;    // decay of the first moment (option betas[0])
  double beta2 = 0.999;  // decay of the second moment (option betas[1])
  double eps = 1e-6;     // added to sqrt(v)
};
Schema lamb_schema();
LambConfig lamb_config(const Options& options);
std::shared_ptr<Optimizer> make_lamb(const LambConfig& config);

// NVLAMB as in apex FusedLAMB (NVIDIA's BERT pre-training recipe): global-norm gradient scaling, bias-
// corrected Adam moments, trust ratio ||p|| / ||update|| where weight decay != 0 (or everywhere).
struct NvLambConfig {
  double beta1 = 0.9;          // decay of the first moment (option betas[0])
  double beta2 = 0.999;        // decay of the second moment (option betas[1])
  double eps = 1e-6;           // added to sqrt(v_hat)
  double max_grad_norm = 1.0;  // gradients are divided by max(1, global_norm / max_grad_norm); 0 = off
  bool use_nvlamb = false;     // apply the trust ratio to every tensor, not only those with weight decay
};
Schema nvlamb_schema();
NvLambConfig nvlamb_config(const Options& options);
std::shared_ptr<Optimizer> make_nvlamb(const NvLambConfig& config);

}  // namespace bertx::optim
