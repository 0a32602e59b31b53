// fused_kernels.hpp - the element loops behind the fused CPU optimizer updates (fused_cpu.hpp), on raw float
// pointers over an element range [begin, end): no LibTorch here, so the compiler vectorises the loops at the
// running CPU's width (function clones for AVX-512 / AVX2 / baseline x86-64, picked at load time) instead of
// the SSE2 code of the generic 8-float at::vec::Vectorized<float> a TU without ATen's CPU-capability flags gets. fused_cpu.cpp owns
// the tensors, the checks and the threading (fixed chunks over at::parallel_for) and calls these per chunk.
// The arithmetic is the float32 operations of fused_cpu.hpp's formulas in the same order (no reciprocals, no
// contracted multiply-adds), so every clone gives the same bits. The four arrays must not overlap.
#pragma once
#include <cstdint>

namespace bertx::optim::fused::kernels {

// One parameter's arrays: gradient (read only), parameter, exp_avg, exp_avg_sq (updated in place).
struct Arrays {
  const float* g;
  float *p, *m, *v;
};

// g' = divide ? g / scale : g * scale;
// m = m * beta1 + one_minus_beta1 * g';  v = v * beta2 + one_minus_beta2 * g' * g'.
struct MomentScalars {
  float scale, beta1, one_minus_beta1, beta2, one_minus_beta2;
  bool divide;
};

// AdamW: p = p * decay + neg_step_size * m / (sqrt(v) / bias_correction2_sqrt + eps).
struct AdamWScalars {
  float decay, neg_step_size, bias_correction2_sqrt, eps;
};

// u = bias_correct ? (m / bias_correction1) / (sqrt(v / bias_correction2) + eps) : m / (sqrt(v) + eps),
// then u + weight_decay * p when decay.
struct DirectionScalars {
  float eps, weight_decay, bias_correction1, bias_correction2;
  bool bias_correct, decay;
};

// sum(x^2) over [begin, end): float32 squares added in 32 float lanes, each flushed into a double lane every
// 16 squares; the lanes are added in order at the end. Deterministic for a given range.
double sum_squares(const float* x, std::int64_t begin, std::int64_t end);

// AdamW over [begin, end): moments, then the parameter update.
void adamw(const Arrays& a, const MomentScalars& ms, const AdamWScalars& as, std::int64_t begin, std::int64_t end);

// Moments, u, and p = p - u * lr over [begin, end) (BertAdam; the "no trust ratio" case).
void direction_update(const Arrays& a, const MomentScalars& ms, const DirectionScalars& ds, float lr,
                      std::int64_t begin, std::int64_t end);

// Trust-ratio pass 1 over [begin, end): moments, and the sums of squares of p (not updated) and u, summed as
// sum_squares() does.
struct SquareSums {
  double p, u;
};
SquareSums direction_moments(const Arrays& a, const MomentScalars& ms, const DirectionScalars& ds, std::int64_t begin,
                             std::int64_t end);

// Trust-ratio pass 2 over [begin, end): u from the stored moments, p = p - u * f.
void direction_apply(const Arrays& a, const DirectionScalars& ds, float f, std::int64_t begin, std::int64_t end);

}  // namespace bertx::optim::fused::kernels
