// lamb.cpp - LAMB (You et al., "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes") as
// the widely used cybertronai implementation has it: layer-wise trust ratio on top of Adam, for large-batch
// pre-training. Reference: cybertronai/pytorch-lamb pytorch_lamb/lamb.py (commit d3ab8dcc), Lamb(adam=False).
// No bias correction (paper v3), no gradient clipping; per step, per parameter (float32):
//   m  = beta1 * m + (1 - beta1) * g ;   v = beta2 * v + (1 - beta2) * g^2
//   u  = m / (sqrt(v) + eps) + wd * p                            (the wd term only where wd != 0)
//   r  = min(||p||, 10) / ||u||, or 1 when either norm is 0       (every tensor, biases and LayerNorm too)
//   p -= lr * r * u
// The ratio stays on the device (no host synchronisation per tensor). The fused CPU kernel (fused_cpu.hpp)
// computes the same float32 operations: a pass for the moments and both norms, then the update pass.
#include <ATen/core/grad_mode.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/where.h>

#include "common.hpp"
#include "fused_cpu.hpp"
#include "optimizers.hpp"

namespace bertx::optim {
namespace {

// The reference clamps the weight norm to [0, 10] ("the paper doesn't specify clamp values for phi").
constexpr double kMaxWeightNorm = 10.0;

class Lamb final : public AdamFamily {
 public:
  explicit Lamb(const LambConfig& c) : AdamFamily("lamb"), c_(c) {}

  void step(double lr) override {
    at::NoGradGuard no_grad;
    std::vector<Slot*> slots = with_grad();
    if (slots.empty()) return;
    ++step_;
    for (Slot* s : slots) {
      at::Tensor g = grad_f32(*s);
      at::Tensor p = param_f32(*s);
      const fused::Tensors fused_tensors{g, p, s->exp_avg, s->exp_avg_sq};
      if (fused::usable(fused_tensors)) {
        fused::direction(fused_tensors, {.beta1 = c_.beta1, .beta2 = c_.beta2},
                         {.eps = c_.eps, .weight_decay = s->weight_decay, .lr = lr, .ratio = fused::Ratio::Lamb});
        write_back(*s, p);
        continue;
      }
      s->exp_avg.mul_(c_.beta1).add_(g, 1.0 - c_.beta1);
      s->exp_avg_sq.mul_(c_.beta2).addcmul_(g, g, 1.0 - c_.beta2);
      at::Tensor weight_norm = p.pow(2).sum().sqrt().clamp(0.0, kMaxWeightNorm);
      at::Tensor update = s->exp_avg.div(s->exp_avg_sq.sqrt().add(c_.eps));
      if (s->weight_decay != 0.0) update.add_(p, s->weight_decay);
      at::Tensor update_norm = update.pow(2).sum().sqrt();
      at::Tensor one = at::scalar_tensor(1.0, weight_norm.options());
      at::Tensor ratio = at::where(weight_norm.eq(0).logical_or(update_norm.eq(0)), one, weight_norm.div(update_norm));
      p.sub_(update.mul_(ratio.mul(lr)));
      write_back(*s, p);
    }
  }

 private:
  LambConfig c_;
};

const Fields<LambConfig>& lamb_fields() {
  static const Fields<LambConfig> f{
      betas_field<LambConfig>(),
      field("eps", &LambConfig::eps, "added to the denominator sqrt(v) for numerical stability"),
  };
  return f;
}

}  // namespace

Schema lamb_schema() { return lamb_fields().schema(); }

LambConfig lamb_config(const Options& o) {
  const LambConfig c = lamb_fields().read(o);
  check_nonnegative(o, "eps", c.eps);
  return c;
}

std::shared_ptr<Optimizer> make_lamb(const LambConfig& config) { return std::make_shared<Lamb>(config); }

}  // namespace bertx::optim
