// fused_cpu.cpp - see fused_cpu.hpp. The tensor side of the fused updates: checks, the scalars in float32
// (double hyper-parameters cast as ATen casts a Scalar), threading and version counters. The element loops
// are in fused_kernels.cpp (no LibTorch; vectorised at the CPU's width, AVX-512 here). A tensor is cut into
// fixed chunks of kChunk elements that at::parallel_for hands to the threads; each chunk keeps its own double
// sums and the sums are added in chunk order, so results do not depend on the number of threads. This file
// is compiled with OpenMP (see CMakeLists.txt): at::parallel_for of an OpenMP LibTorch is an inline
// `#pragma omp parallel` that would otherwise run on one thread.
#include "fused_cpu.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include "bertx/error.hpp"
#include "fused_kernels.hpp"

namespace bertx::optim::fused {
namespace {

constexpr std::int64_t kChunk = 16384;  // elements per parallel task

std::atomic<bool> g_enabled{true};
std::atomic<std::int64_t> g_updates{0};

std::int64_t chunk_count(std::int64_t n) { return (n + kChunk - 1) / kChunk; }

// chunk(c, begin, end) for every fixed chunk c of [0, n), on the intra-op threads.
template <typename F>
void each_chunk(std::int64_t n, const F& chunk) {
  at::parallel_for(0, chunk_count(n), 1, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t c = first; c < last; ++c) chunk(c, c * kChunk, std::min(n, (c + 1) * kChunk));
  });
}

kernels::Arrays arrays(const Tensors& t) {
  return {t.g.data_ptr<float>(), t.p.data_ptr<float>(), t.m.data_ptr<float>(), t.v.data_ptr<float>()};
}

kernels::MomentScalars moment_scalars(const Moments& c) {
  return {c.grad_scale,
          static_cast<float>(c.beta1),
          static_cast<float>(1.0 - c.beta1),
          static_cast<float>(c.beta2),
          static_cast<float>(1.0 - c.beta2),
          c.divide_grad};
}

kernels::DirectionScalars direction_scalars(const DirectionStep& d) {
  return {static_cast<float>(d.eps),
          static_cast<float>(d.weight_decay),
          static_cast<float>(d.bias_correction1),
          static_cast<float>(d.bias_correction2),
          d.bias_correction1 != 1.0 || d.bias_correction2 != 1.0,
          d.weight_decay != 0.0};
}

void check(const Tensors& t, const char* kernel) {
  if (!usable(t))
    throw Error(std::string("fused CPU optimizer kernel ") + kernel +
                ": gradient, parameter and moments must be contiguous float32 CPU tensors of one size (and the "
                "fused kernels enabled); other tensors take the ATen path");
}

// After an in-place update through raw pointers: bump the version counters as ATen's in-place ops do.
void finish(const Tensors& t) {
  for (const at::Tensor* x : {&t.p, &t.m, &t.v}) x->unsafeGetTensorImpl()->bump_version();
  g_updates.fetch_add(1, std::memory_order_relaxed);
}

// f of `p = p - u * f` from the norms (float32 like the reference's 0-dim tensors); see Ratio.
float factor(Ratio ratio, double p_sum_squares, double u_sum_squares, float lr) {
  const float p_norm = static_cast<float>(std::sqrt(p_sum_squares));
  const float u_norm = static_cast<float>(std::sqrt(u_sum_squares));
  if (ratio == Ratio::Lamb) {
    const float weight_norm = p_norm > 10.0f ? 10.0f : p_norm;  // clamp(0, 10); NaN stays NaN
    const float r = (weight_norm == 0.0f || u_norm == 0.0f) ? 1.0f : weight_norm / u_norm;
    return r * lr;
  }
  if (ratio == Ratio::NvLamb) return (p_norm != 0.0f && u_norm != 0.0f) ? (p_norm / u_norm) * lr : lr;
  return lr;
}

}  // namespace

bool usable(const at::Tensor& x) {
  return g_enabled.load(std::memory_order_relaxed) && x.defined() && x.layout() == at::kStrided &&
         x.device().is_cpu() && x.scalar_type() == at::kFloat && x.is_contiguous() && !x.is_inference();
}

bool usable(const Tensors& t) {
  for (const at::Tensor* x : {&t.g, &t.p, &t.m, &t.v})
    if (!usable(*x) || x->numel() != t.p.numel()) return false;
  return true;
}

void set_enabled(bool on) { g_enabled.store(on, std::memory_order_relaxed); }

std::int64_t update_count() { return g_updates.load(std::memory_order_relaxed); }

double sum_squares(const at::Tensor& x) {
  if (!usable(x)) throw Error("fused CPU sum of squares: the tensor must be a contiguous float32 CPU tensor");
  RECORD_FUNCTION("bertx::fused_sum_squares", c10::ArrayRef<const c10::IValue>{});
  const float* const data = x.data_ptr<float>();
  const std::int64_t n = x.numel();
  std::vector<double> partial(static_cast<std::size_t>(chunk_count(n)), 0.0);
  each_chunk(n, [&](std::int64_t c, std::int64_t begin, std::int64_t end) {
    partial[static_cast<std::size_t>(c)] = kernels::sum_squares(data, begin, end);
  });
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

void adamw(const Tensors& t, const Moments& moments, const AdamWStep& step) {
  check(t, "adamw");
  RECORD_FUNCTION("bertx::fused_adamw", c10::ArrayRef<const c10::IValue>{});
  const kernels::Arrays a = arrays(t);
  const kernels::MomentScalars ms = moment_scalars(moments);
  const kernels::AdamWScalars as{static_cast<float>(step.decay), static_cast<float>(-step.step_size),
                                 static_cast<float>(step.bias_correction2_sqrt), static_cast<float>(step.eps)};
  each_chunk(t.p.numel(),
             [&](std::int64_t, std::int64_t begin, std::int64_t end) { kernels::adamw(a, ms, as, begin, end); });
  finish(t);
}

void direction(const Tensors& t, const Moments& moments, const DirectionStep& step) {
  check(t, "direction");
  RECORD_FUNCTION("bertx::fused_adam_direction", c10::ArrayRef<const c10::IValue>{});
  const kernels::Arrays a = arrays(t);
  const kernels::MomentScalars ms = moment_scalars(moments);
  const kernels::DirectionScalars ds = direction_scalars(step);
  const std::int64_t n = t.p.numel();
  const float lr = static_cast<float>(step.lr);

  if (step.ratio == Ratio::None) {  // one pass: moments, direction, update
    each_chunk(n, [&](std::int64_t, std::int64_t begin, std::int64_t end) {
      kernels::direction_update(a, ms, ds, lr, begin, end);
    });
    finish(t);
    return;
  }

  // Pass 1: moments, and the sums of squares of p (before the update) and u, per chunk.
  std::vector<kernels::SquareSums> partial(static_cast<std::size_t>(chunk_count(n)), kernels::SquareSums{0.0, 0.0});
  each_chunk(n, [&](std::int64_t c, std::int64_t begin, std::int64_t end) {
    partial[static_cast<std::size_t>(c)] = kernels::direction_moments(a, ms, ds, begin, end);
  });
  double p_sum = 0.0, u_sum = 0.0;
  for (const kernels::SquareSums& s : partial) {
    p_sum += s.p;
    u_sum += s.u;
  }
  const float f = factor(step.ratio, p_sum, u_sum, lr);

  // Pass 2: the same u from the stored moments, and the update.
  each_chunk(
      n, [&](std::int64_t, std::int64_t begin, std::int64_t end) { kernels::direction_apply(a, ds, f, begin, end); });
  finish(t);
}

}  // namespace bertx::optim::fused
