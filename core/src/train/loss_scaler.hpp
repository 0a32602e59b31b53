// loss_scaler.hpp - dynamic loss scaling for fp16 (LibTorch has no C++ GradScaler) and the non-finite
// guard every precision gets: a step whose gradients hold inf/NaN is skipped, never applied.
#pragma once
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace bertx {

struct LossScalerConfig {
  bool dynamic = false;           // scale the loss (fp16); otherwise scale stays 1 and only the guard runs
  double init_scale = 1048576.0;  // 2^20
  double growth_factor = 2.0;     // after `window` good steps
  double backoff_factor = 0.5;    // after a non-finite step
  std::int64_t window = 2000;     // good steps between growths
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerConfig config);
  // loss * scale (loss itself when not dynamic).
  at::Tensor scale(const at::Tensor& loss) const;
  // Divides the gradients by the scale in place and reports whether all of them are finite
  // (one host sync). CUDA uses ATen's fused _amp_foreach_non_finite_check_and_unscale_.
  bool unscale_and_check(const std::vector<at::Tensor>& grads);
  // After each step: back off on a non-finite step, grow after `window` finite ones.
  void update(bool finite);

  double scale() const { return scale_; }
  std::int64_t good_steps() const { return good_steps_; }
  void restore(double scale, std::int64_t good_steps) {
    scale_ = scale;
    good_steps_ = good_steps;
  }

 private:
  LossScalerConfig cfg_;
  double scale_;
  std::int64_t good_steps_ = 0;
};

}  // namespace bertx
