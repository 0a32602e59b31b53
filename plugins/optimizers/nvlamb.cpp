// nvlamb.cpp - NVLAMB, the LAMB variant of NVIDIA's BERT pre-training recipe (run_pretraining.py), which
// reaches the published BERT pre-training results with large batches. Reference: NVIDIA/apex FusedLAMB
// (apex/optimizers/fused_lamb.py + csrc/multi_tensor_lamb.cu, commit 6424da3b) with bias_correction=True,
// grad_averaging=True, adam_w_mode=True: a float32 restatement of its two CUDA stages. Per step t:
//   n  = L2 norm of all gradients together;  c = n / max_grad_norm if n > max_grad_norm, else 1
//   per parameter (float32), with ||p|| taken before the update:
//   g  = g / c
//   m  = beta1 * m + (1 - beta1) * g ;   v = beta2 * v + (1 - beta2) * g^2
//   u  = (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps) + wd * p
//   r  = lr * ||p|| / ||u|| where wd != 0 (every tensor with use_nvlamb), but lr when either norm is 0
//   p -= r * u
// max_grad_norm = 0 turns the gradient scaling off (in apex it would divide by zero).
// The norms and ratios stay on the device (no host synchronisation). The fused CPU kernel (fused_cpu.hpp)
// computes the same float32 operations: a pass for the moments and both norms, then the update pass.
#include <cmath>
#include <optional>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/where.h>

#include "common.hpp"
#include "fused_cpu.hpp"
#include "optimizers.hpp"

namespace bertx::optim {
namespace {

class NvLamb final : public AdamFamily {
 public:
  explicit NvLamb(const NvLambConfig& c) : AdamFamily("nvlamb"), c_(c) {}

  void step(double lr) override {
    at::NoGradGuard no_grad;
    std::vector<Slot*> slots = with_grad();
    if (slots.empty()) return;
    ++step_;

    at::Tensor divisor;  // max(1, global_norm / max_grad_norm), kept on the device
    if (c_.max_grad_norm > 0) {
      at::Tensor norm = global_grad_norm(slots);
      divisor =
          at::where(norm.gt(c_.max_grad_norm), norm.div(c_.max_grad_norm), at::scalar_tensor(1.0, norm.options()));
    }
    const double t = static_cast<double>(step_);
    const double bias_correction1 = 1.0 - std::pow(c_.beta1, t);
    const double bias_correction2 = 1.0 - std::pow(c_.beta2, t);

    std::optional<float> divisor_host;  // divisor for the fused CPU kernel, read once
    for (Slot* s : slots) {
      at::Tensor g = grad_f32(*s);
      at::Tensor p = param_f32(*s);
      const fused::Tensors fused_tensors{g, p, s->exp_avg, s->exp_avg_sq};
      if (fused::usable(fused_tensors)) {
        if (!divisor_host) divisor_host = divisor.defined() ? divisor.item<float>() : 1.0f;
        const auto ratio = c_.use_nvlamb || s->weight_decay != 0.0 ? fused::Ratio::NvLamb : fused::Ratio::None;
        fused::direction(fused_tensors,
                         {.grad_scale = *divisor_host, .divide_grad = true, .beta1 = c_.beta1, .beta2 = c_.beta2},
                         {.eps = c_.eps,
                          .weight_decay = s->weight_decay,
                          .bias_correction1 = bias_correction1,
                          .bias_correction2 = bias_correction2,
                          .lr = lr,
                          .ratio = ratio});
        write_back(*s, p);
        continue;
      }
      if (divisor.defined()) g = g.div(divisor.to(g.device()));
      at::Tensor param_norm = p.norm();
      s->exp_avg.mul_(c_.beta1).add_(g, 1.0 - c_.beta1);
      s->exp_avg_sq.mul_(c_.beta2).addcmul_(g, g, 1.0 - c_.beta2);
      at::Tensor update =
          s->exp_avg.div(bias_correction1).div_(s->exp_avg_sq.div(bias_correction2).sqrt_().add_(c_.eps));
      if (s->weight_decay != 0.0) update.add_(p, s->weight_decay);
      if (c_.use_nvlamb || s->weight_decay != 0.0) {
        at::Tensor update_norm = update.norm();
        at::Tensor lr_t = at::scalar_tensor(lr, update_norm.options());
        at::Tensor ratio =
            at::where(param_norm.ne(0).logical_and(update_norm.ne(0)), param_norm.div(update_norm).mul(lr), lr_t);
        p.sub_(update.mul_(ratio));
      } else {
        p.sub_(update.mul_(lr));
      }
      write_back(*s, p);
    }
  }

 private:
  NvLambConfig c_;
};

const Fields<NvLambConfig>& nvlamb_fields() {
  static const Fields<NvLambConfig> f{
      betas_field<NvLambConfig>(),
      field("eps", &NvLambConfig::eps, "added to the denominator sqrt(v_hat) for numerical stability"),
      field("max_grad_norm", &NvLambConfig::max_grad_norm,
            "divide all gradients by max(1, global L2 norm / max_grad_norm); 0 = no scaling"),
      field("use_nvlamb", &NvLambConfig::use_nvlamb,
            "apply the trust ratio to every tensor, not only those with weight decay"),
  };
  return f;
}

}  // namespace

Schema nvlamb_schema() { return nvlamb_fields().schema(); }

NvLambConfig nvlamb_config(const Options& o) {
  const NvLambConfig c = nvlamb_fields().read(o);
  check_nonnegative(o, "eps", c.eps);
  check_nonnegative(o, "max_grad_norm", c.max_grad_norm);
  return c;
}

std::shared_ptr<Optimizer> make_nvlamb(const NvLambConfig& config) { return std::make_shared<NvLamb>(config); }

}  // namespace bertx::optim
