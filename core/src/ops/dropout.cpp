// dropout.cpp - bertx::ops::dropout / dropout_add (ops.hpp): the dispatch point, the autograd functions
// around the CPU kernels (kernels_cpu.hpp) and LibTorch's dropout for other devices and dtypes.
// The seed of each call's mask is one draw from the default CPU generator (under its lock), so the masks
// follow the generator's state like ATen's dropout does: same seed, same run; restored state, same masks.
#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/autograd.h>

#include "bertx/error.hpp"
#include "bertx/ops.hpp"
#include "ops/cpu/kernels_cpu.hpp"
#include "ops/ops_common.hpp"

namespace bertx::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr std::int64_t kGrain = 1 << 15;  // elements per parallel chunk

using detail::ptr;

// y = [residual +] x * keep / (1 - p), mask = keep; x, residual, y contiguous of one shape.
void forward_kernel(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& y, const at::Tensor& mask,
                    double p) {
  const detail::DropoutDraw d(p);  // p in (0, 1) here
  const std::uint64_t seed = d.seed;
  const std::uint32_t threshold = d.threshold;
  const float scale = d.scale;
  const bool x16 = x.scalar_type() == at::kBFloat16, y16 = y.scalar_type() == at::kBFloat16;
  at::parallel_for(0, x.numel(), kGrain, [&](std::int64_t b, std::int64_t e) {
    const auto off = static_cast<std::uint64_t>(b);
    std::uint8_t* m = ptr<std::uint8_t>(mask) + b;
    if (!x16)
      cpu::dropout(ptr<const float>(x) + b, residual.defined() ? ptr<const float>(residual) + b : nullptr,
                   ptr<float>(y) + b, m, e - b, off, seed, threshold, scale);
    else if (y16)
      cpu::dropout(ptr<const std::uint16_t>(x) + b,
                   residual.defined() ? ptr<const std::uint16_t>(residual) + b : nullptr, ptr<std::uint16_t>(y) + b, m,
                   e - b, off, seed, threshold, scale);
    else
      cpu::dropout(ptr<const std::uint16_t>(x) + b, ptr<const float>(residual) + b, ptr<float>(y) + b, m, e - b, off,
                   seed, threshold, scale);
  });
}

// grad_x = grad * mask / (1 - p), in x's dtype.
at::Tensor backward_kernel(const at::Tensor& grad, const at::Tensor& mask, float scale, at::ScalarType x_dtype) {
  at::Tensor g = grad.contiguous();
  const bool o16 = x_dtype == at::kBFloat16;
  if (!(o16 && g.scalar_type() == at::kBFloat16)) g = g.to(at::kFloat);  // bf16 -> bf16, else from float32
  const bool g16 = g.scalar_type() == at::kBFloat16;
  at::Tensor out = at::empty(g.sizes(), g.options().dtype(x_dtype));
  at::parallel_for(0, g.numel(), kGrain, [&](std::int64_t b, std::int64_t e) {
    const std::uint8_t* m = ptr<const std::uint8_t>(mask) + b;
    if (g16)
      cpu::masked_scale(ptr<const std::uint16_t>(g) + b, m, scale, ptr<std::uint16_t>(out) + b, e - b);
    else if (o16)
      cpu::masked_scale(ptr<const float>(g) + b, m, scale, ptr<std::uint16_t>(out) + b, e - b);
    else
      cpu::masked_scale(ptr<const float>(g) + b, m, scale, ptr<float>(out) + b, e - b);
  });
  return out;
}

// Forward of both functions: y (residual's dtype when given, else x's) and the keep bits saved for backward.
at::Tensor save_and_run(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& residual, double p) {
  at::Tensor y = at::empty_like(residual.defined() ? residual : x, at::MemoryFormat::Contiguous);
  at::Tensor mask = at::empty(x.sizes(), x.options().dtype(at::kBool));
  forward_kernel(x, residual, y, mask, p);
  ctx->save_for_backward({mask});
  ctx->saved_data["scale"] = 1.0 / (1.0 - p);
  ctx->saved_data["dtype"] = static_cast<std::int64_t>(x.scalar_type());
  return y;
}

// grad_x of both functions.
at::Tensor grad_x(AutogradContext* ctx, const at::Tensor& grad) {
  return backward_kernel(grad, ctx->get_saved_variables()[0], static_cast<float>(ctx->saved_data["scale"].toDouble()),
                         static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt()));
}

struct DropoutFn : torch::autograd::Function<DropoutFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double p) {
    return save_and_run(ctx, x, at::Tensor(), p);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {grad_x(ctx, grads[0]), at::Tensor()};
  }
};

struct DropoutAddFn : torch::autograd::Function<DropoutAddFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& residual, double p) {
    return save_and_run(ctx, x, residual, p);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {grad_x(ctx, grads[0]), grads[0], at::Tensor()};  // d(residual) = incoming gradient
  }
};

void check_p(double p) {
  if (!(p >= 0.0 && p <= 1.0)) throw Error("dropout: probability " + std::to_string(p) + " is outside [0, 1]");
}

}  // namespace

at::Tensor dropout(const at::Tensor& x, double p) {
  RECORD_FUNCTION("bertx::ops::dropout", std::vector<c10::IValue>());  // visible to profilers (--profile)
  check_p(p);
  if (p == 0.0) return x;
  if (p == 1.0 || !detail::cpu_kernel_input(x)) return at::dropout(x, p, /*train=*/true);
  return DropoutFn::apply(x.contiguous(), p);
}

at::Tensor dropout_add(const at::Tensor& x, const at::Tensor& residual, double p) {
  RECORD_FUNCTION("bertx::ops::dropout_add", std::vector<c10::IValue>());  // visible to profilers (--profile)
  check_p(p);
  if (x.sizes() != residual.sizes())
    throw Error("dropout_add: x " + c10::str(x.sizes()) + " and residual " + c10::str(residual.sizes()) +
                " differ in shape");
  const bool same = x.scalar_type() == residual.scalar_type();
  const bool supported = detail::cpu_kernel_input(x) && detail::cpu_kernel_input(residual) &&
                         (same || (x.scalar_type() == at::kBFloat16 && residual.scalar_type() == at::kFloat));
  if (p == 0.0) return residual + x;
  if (p == 1.0 || !supported) return residual + at::dropout(x, p, /*train=*/true);
  return DropoutAddFn::apply(x.contiguous(), residual.contiguous(), p);
}

}  // namespace bertx::ops
