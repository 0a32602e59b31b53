// adamw.cpp - AdamW: Adam with decoupled weight decay (Loshchilov & Hutter), the usual BERT fine-tuning
// optimizer. Reference: torch.optim.AdamW of torch 1.13 (torch/optim/adamw.py, _single_tensor_adamw), with
// the gradients first clipped by global norm as torch.nn.utils.clip_grad_norm_ does (HF Trainer's
// max_grad_norm). Per step t, per parameter p with gradient g (all float32):
//   g     *= min(1, max_grad_norm / (||all g|| + 1e-6))        (skipped when max_grad_norm == 0)
//   p     *= 1 - lr * wd
//   m      = beta1 * m + (1 - beta1) * g ;   v = beta2 * v + (1 - beta2) * g^2
//   p     -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// The operations are written in the reference's order so that float32 results match it to rounding; the
// fused CPU kernel (fused_cpu.hpp) computes the same float32 operations in one pass per tensor.
#include <cmath>
#include <optional>

#include <ATen/core/grad_mode.h>

#include "common.hpp"
#include "fused_cpu.hpp"
#include "optimizers.hpp"

namespace bertx::optim {
namespace {

class AdamW final : public AdamFamily {
 public:
  explicit AdamW(const AdamWConfig& c) : AdamFamily("adamw"), c_(c) {}

  void step(double lr) override {
    at::NoGradGuard no_grad;
    std::vector<Slot*> slots = with_grad();
    if (slots.empty()) return;
    ++step_;

    at::Tensor clip;  // min(1, max / (norm + 1e-6)) as clip_grad_norm_ computes it (reciprocal, then scale)
    if (c_.max_grad_norm > 0)
      clip = global_grad_norm(slots).add(1e-6).reciprocal().mul(c_.max_grad_norm).clamp_max(1.0);

    const double t = static_cast<double>(step_);
    const double step_size = lr / (1.0 - std::pow(c_.beta1, t));
    const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(c_.beta2, t));
    std::optional<float> clip_host;  // clip for the fused CPU kernel, read once
    for (Slot* s : slots) {
      at::Tensor g = grad_f32(*s);
      at::Tensor p = param_f32(*s);
      const fused::Tensors fused_tensors{g, p, s->exp_avg, s->exp_avg_sq};
      if (fused::usable(fused_tensors)) {
        if (!clip_host) clip_host = clip.defined() ? clip.item<float>() : 1.0f;
        fused::adamw(fused_tensors, {.grad_scale = *clip_host, .beta1 = c_.beta1, .beta2 = c_.beta2},
                     {.decay = 1.0 - lr * s->weight_decay,
                      .step_size = step_size,
                      .bias_correction2_sqrt = bias_correction2_sqrt,
                      .eps = c_.eps});
        write_back(*s, p);
        continue;
      }
      if (clip.defined()) g = g.mul(clip.to(g.device()));
      p.mul_(1.0 - lr * s->weight_decay);
      s->exp_avg.mul_(c_.beta1).add_(g, 1.0 - c_.beta1);
      s->exp_avg_sq.mul_(c_.beta2).addcmul_(g, g, 1.0 - c_.beta2);
      at::Tensor denom = s->exp_avg_sq.sqrt().div(bias_correction2_sqrt).add_(c_.eps);
      p.addcdiv_(s->exp_avg, denom, -step_size);
      write_back(*s, p);
    }
  }

 private:
  AdamWConfig c_;
};

const Fields<AdamWConfig>& adamw_fields() {
  static const Fields<AdamWConfig> f{
      betas_field<AdamWConfig>(),
      field("eps", &AdamWConfig::eps, "added to the denominator sqrt(v_hat) for numerical stability"),
      field("max_grad_norm", &AdamWConfig::max_grad_norm,
            "clip the global L2 norm of all gradients to this; 0 = no clipping"),
  };
  return f;
}

}  // namespace

Schema adamw_schema() { return adamw_fields().schema(); }

AdamWConfig adamw_config(const Options& o) {
  const AdamWConfig c = adamw_fields().read(o);
  check_nonnegative(o, "eps", c.eps);
  check_nonnegative(o, "max_grad_norm", c.max_grad_norm);
  return c;
}

std::shared_ptr<Optimizer> make_adamw(const AdamWConfig& config) { return std::make_shared<AdamW>(config); }

}  // namespace bertx::optim
