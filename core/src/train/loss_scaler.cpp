// loss_scaler.cpp - the GradScaler algorithm (scale, unscale + inf check, back-off / growth) in C++.
#include "train/loss_scaler.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "bertx/ops.hpp"

namespace bertx {

LossScaler::LossScaler(LossScalerConfig c) : cfg_(c), scale_(c.dynamic ? c.init_scale : 1.0) {}

at::Tensor LossScaler::scale(const at::Tensor& loss) const { return cfg_.dynamic ? loss * scale_ : loss; }

bool LossScaler::unscale_and_check(const std::vector<at::Tensor>& grads) {
  if (grads.empty()) return true;
  at::NoGradGuard no_grad;
  const at::Tensor& first = grads.front();
  if (first.is_cuda()) {
    at::Tensor found_inf = at::zeros({1}, first.options().dtype(at::kFloat));
    at::Tensor inv = at::full({1}, 1.0 / scale_, first.options().dtype(at::kFloat));
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv);
    return found_inf.item<float>() == 0.0f;
  }
  // CPU: unscale (fp16 loss scaling only), then one read-only pass per tensor.
  if (cfg_.dynamic)
    for (const auto& g : grads) g.mul_(1.0 / scale_);
  return ops::all_finite(grads);
}

void LossScaler::update(bool finite) {
  if (!cfg_.dynamic) return;
  if (!finite) {
    scale_ *= cfg_.backoff_factor;
    good_steps_ = 0;
    return;
  }
  if (++good_steps_ >= cfg_.window) {
    scale_ *= cfg_.growth_factor;
    good_steps_ = 0;
  }
}

}  // namespace bertx
