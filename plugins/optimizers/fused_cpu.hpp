// fused_cpu.hpp - fused CPU updates for the Adam-family optimizers (issue #12). Per parameter tensor, the
// ATen path runs ~8 ops (mul_, add_, addcmul_, sqrt, div, add_, addcdiv_, norm), each a full memory pass
// and a dispatch; here one vectorised (fused_kernels.cpp, at the CPU's vector width), multi-threaded
// (at::parallel_for) pass reads g, p, m, v and writes p, m, v. LAMB / NVLAMB first run a pass that updates
// m, v and sums ||p||^2 and ||u||^2 for the trust ratio, then the pass that updates p. The element
// arithmetic restates the optimizers' ATen sequences in float32 in the same order (see the comment of each
// optimizer file); norms are summed in double over fixed chunks, so results do not depend on the number of
// threads.
//
// usable() is the one dispatch point: only contiguous float32 CPU tensors take these kernels; CUDA,
// non-contiguous or other dtypes keep the ATen sequence (bf16/fp16 parameters and gradients reach the
// kernels as the float32 working copies that grad_f32() / param_f32() make).
#pragma once
#include <cstdint>

#include <ATen/core/Tensor.h>

namespace bertx::optim::fused {

// One parameter's tensors: gradient (read only), parameter, exp_avg, exp_avg_sq (updated in place).
struct Tensors {
  at::Tensor g, p, m, v;
};

// True when the fused kernels are on and the tensor is a defined, strided, contiguous, non-inference
// float32 CPU tensor; for Tensors, when all four are and have the same number of elements.
bool usable(const at::Tensor& x);
bool usable(const Tensors& t);

// Process-wide switch, on by default: tests turn it off to run the ATen sequence on the same data.
void set_enabled(bool on);
// Parameter tensors updated by the fused kernels so far in this process (tests check that they ran).
std::int64_t update_count();

// sum(x^2) of a usable tensor, accumulated in double.
double sum_squares(const at::Tensor& x);

// Moments, shared by all four optimizers (g' is the scaled gradient; scalars cast to float32 as ATen does):
//   g' = g * grad_scale  (g / grad_scale with divide_grad)
//   m  = m * beta1 + (1 - beta1) * g' ;   v = v * beta2 + (1 - beta2) * g' * g'
struct Moments {
  float grad_scale = 1.0f;
  bool divide_grad = false;
  double beta1 = 0.9;
  double beta2 = 0.999;
};

// AdamW (adamw.cpp): p = p * decay;  p = p + (-step_size * m) / (sqrt(v) / bias_correction2_sqrt + eps).
struct AdamWStep {
  double decay = 1.0;  // 1 - lr * weight_decay
  double step_size = 0.0;
  double bias_correction2_sqrt = 1.0;
  double eps = 1e-6;
};
void adamw(const Tensors& t, const Moments& moments, const AdamWStep& step);

// How the factor f of `p = p - u * f` is chosen (with ||p|| of the parameter before the update).
enum class Ratio {
  None,    // f = lr (BertAdam; NVLAMB tensors without the trust ratio)
  Lamb,    // f = r * lr, r = min(||p||, 10) / ||u||, or 1 when either norm is 0 (lamb.cpp)
  NvLamb,  // f = (||p|| / ||u||) * lr, or lr when either norm is 0 (nvlamb.cpp)
};

// BertAdam, LAMB, NVLAMB: u = (m / bias_correction1) / (sqrt(v / bias_correction2) + eps) + weight_decay * p,
// where a bias correction of 1 is skipped (exact either way) and the decay term is left out when 0.
struct DirectionStep {
  double eps = 1e-6;
  double weight_decay = 0.0;
  double bias_correction1 = 1.0;
  double bias_correction2 = 1.0;
  double lr = 0.0;
  Ratio ratio = Ratio::None;
};
void direction(const Tensors& t, const Moments& moments, const DirectionStep& step);

}  // namespace bertx::optim::fused
