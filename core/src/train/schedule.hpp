// schedule.hpp - learning rate per optimizer step, as Google's BERT optimization.py / NVIDIA's
// PolyWarmUpScheduler: linear warm-up from warmup_start_lr over warmup_proportion * max_steps, then
// peak * (1 - step / max_steps)^decay_power (poly), peak * (1 - x) / (1 - warmup_proportion) with
// x = step / max_steps (linear: from the peak at the end of warm-up to 0 at the end, as NVIDIA's
// warmup_linear for SQuAD/GLUE and Hugging Face's linear schedule), or the peak (constant).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "host/train_options.hpp"

namespace bertx {

// `step` is 0-based: the step about to be taken.
inline double learning_rate_at(const TrainOptions& t, std::int64_t step) {
  const double warmup = t.warmup_proportion * static_cast<double>(t.max_steps);
  if (static_cast<double>(step) < warmup)
    return t.warmup_start_lr + (t.learning_rate - t.warmup_start_lr) * static_cast<double>(step) / warmup;
  if (t.schedule == Schedule::Constant) return t.learning_rate;
  const double left = 1.0 - static_cast<double>(step) / static_cast<double>(t.max_steps);
  if (t.schedule == Schedule::Linear) return t.learning_rate * std::max(left, 0.0) / (1.0 - t.warmup_proportion);
  return t.learning_rate * std::pow(left > 0 ? left : 0.0, t.decay_power);
}

}  // namespace bertx
