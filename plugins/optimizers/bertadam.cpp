// bertadam.cpp - BertAdam, the optimizer of NVIDIA's BERT SQuAD/GLUE fine-tuning recipe; kept so that runs
// of that recipe can be reproduced. Reference: NVIDIA/DeepLearningExamples
// PyTorch/LanguageModeling/BERT/optimization.py, class BertAdam (commit a9e2c1d5). Unlike AdamW it has no
// bias correction, clips each gradient tensor on its own (clip_grad_norm_(p, max_grad_norm) inside the
// per-parameter loop) and adds the weight decay to the update. Per step, per parameter (float32):
//   g *= min(1, max_grad_norm / (||g|| + 1e-6))                 (per tensor; skipped when max_grad_norm == 0)
//   m  = beta1 * m + (1 - beta1) * g ;   v = beta2 * v + (1 - beta2) * g^2
//   u  = m / (sqrt(v) + eps) + wd * p                            (the wd term only where wd > 0)
//   p -= lr * u
// The reference's warmup schedule is not here: the host passes the scheduled lr to step(). The fused CPU
// kernel (fused_cpu.hpp) computes the same float32 operations: a pass for ||g||, then one update pass.
#include <cmath>

#include <ATen/core/grad_mode.h>

#include "common.hpp"
#include "fused_cpu.hpp"
#include "optimizers.hpp"

namespace bertx::optim {
namespace {

class BertAdam final : public AdamFamily {
 public:
  explicit BertAdam(const BertAdamConfig& c) : AdamFamily("bertadam"), c_(c) {}

  void step(double lr) override {
    at::NoGradGuard no_grad;
    std::vector<Slot*> slots = with_grad();
    if (slots.empty()) return;
    ++step_;
    for (Slot* s : slots) {
      at::Tensor g = grad_f32(*s);
      at::Tensor p32 = param_f32(*s);
      const fused::Tensors fused_tensors{g, p32, s->exp_avg, s->exp_avg_sq};
      if (fused::usable(fused_tensors)) {
        float clip = 1.0f;  // min(1, max_grad_norm * (1 / (||g|| + 1e-6))) in float32 as below; NaN stays NaN
        if (c_.max_grad_norm > 0) {
          const float norm = static_cast<float>(std::sqrt(fused::sum_squares(g)));
          clip = (1.0f / (norm + 1e-6f)) * static_cast<float>(c_.max_grad_norm);
          clip = clip > 1.0f ? 1.0f : clip;
        }
        fused::direction(fused_tensors, {.grad_scale = clip, .beta1 = c_.beta1, .beta2 = c_.beta2},
                         {.eps = c_.eps, .weight_decay = s->weight_decay > 0.0 ? s->weight_decay : 0.0, .lr = lr});
        write_back(*s, p32);
        continue;
      }
      if (c_.max_grad_norm > 0)  // clip_grad_norm_ on this one tensor: the norm of [||g||] is ||g||
        g = g.mul(g.norm().add(1e-6).reciprocal().mul(c_.max_grad_norm).clamp_max(1.0));
      at::Tensor p = p32;
      s->exp_avg.mul_(c_.beta1).add_(g, 1.0 - c_.beta1);
      s->exp_avg_sq.mul_(c_.beta2).addcmul_(g, g, 1.0 - c_.beta2);
      at::Tensor update = s->exp_avg.div(s->exp_avg_sq.sqrt().add(c_.eps));
      if (s->weight_decay > 0.0) update.add_(p.mul(s->weight_decay));
      p.sub_(update.mul_(lr));
      write_back(*s, p);
    }
  }

 private:
  BertAdamConfig c_;
};

const Fields<BertAdamConfig>& bertadam_fields() {
  static const Fields<BertAdamConfig> f{
      betas_field<BertAdamConfig>(),
      field("eps", &BertAdamConfig::eps, "added to the denominator sqrt(v) for numerical stability"),
      field("max_grad_norm", &BertAdamConfig::max_grad_norm,
            "clip EACH gradient tensor's L2 norm to this (per tensor); 0 = no clipping"),
  };
  return f;
}

}  // namespace

Schema bertadam_schema() { return bertadam_fields().schema(); }

BertAdamConfig bertadam_config(const Options& o) {
  const BertAdamConfig c = bertadam_fields().read(o);
  check_nonnegative(o, "eps", c.eps);
  check_nonnegative(o, "max_grad_norm", c.max_grad_norm);
  return c;
}

std::shared_ptr<Optimizer> make_bertadam(const BertAdamConfig& config) { return std::make_shared<BertAdam>(config); }

}  // namespace bertx::optim
