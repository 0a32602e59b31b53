// dropout.cpp - bertx::ops::dropout / dropout_add (ops.hpp): the dispatch point, the autograd functions
// around the CPU kernels (kernels_cpu.hpp) and LibTorch's dropout for other devices and dtypes.
// The seed of each call's mask is one draw from the default CPU generator (under its lock), so the masks
// follow the generator's state like ATen's dropout does: same seed, same run; restored state, same masks.
#include <cmath>
#include <limits>
#include <mutex>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include "bertx/error.hpp"
#include "bertx/ops.hpp"
#include "ops/kernels_cpu.hpp"

namespace bertx::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr std::int64_t kGrain = 1 << 15;  // elements per parallel chunk

bool fused_dtype(const at::Tensor& t) { return t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16; }

std::uint64_t draw_seed() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
}

template <typename T>
T* ptr(const at::Tensor& t) {
  return t.defined() ? reinterpret_cast<T*>(t.data_ptr()) : nullptr;
}

// y = [residual +] x * keep / (1 - p), mask = keep; x, residual, y contiguous of one shape.
void forward_kernel(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& y, const at::Tensor& mask, double p) {
  const std::uint64_t seed = draw_seed();
  const double keep = 1.0 - p;
  const auto threshold = static_cast<std::uint32_t>(std::min(std::ldexp(keep, 32), 4294967295.0));
  const auto scale = static_cast<float>(1.0 / keep);
  const bool x16 = x.scalar_type() == at::kBFloat16, y16 = y.scalar_type() == at::kBFloat16;
  at::parallel_for(0, x.numel(), kGrain, [&](std::int64_t b, std::int64_t e) {
    const auto off = static_cast<std::uint64_t>(b);
    std::uint8_t* m = ptr<std::uint8_t>(mask) + b;
    if (!x16) cpu::dropout(ptr<const float>(x) + b, residual.defined() ? ptr<const float>(residual) + b : nullptr, ptr<float>(y) + b, m, e - b, off, seed, threshold, scale);
    else if (y16) cpu::dropout(ptr<const std::uint16_t>(x) + b, residual.defined() ? ptr<const std::uint16_t>(residual) + b : nullptr, ptr<std::uint16_t>(y) + b, m, e - b, off, seed, threshold, scale);
    else cpu::dropout(ptr<const std::uint16_t>(x) + b, ptr<const float>(residual) + b, ptr<float>(y) + b, m, e - b, off, seed, threshold, scale);
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
    if (g16) cpu::masked_scale(ptr<const std::uint16_t>(g) + b, m, scale, ptr<std::uint16_t>(out) + b, e - b);
    else if (o16) cpu::masked_scale(ptr<const float>(g) + b, m, scale, ptr<std::uint16_t>(out) + b, e - b);
    else cpu::masked_scale(ptr<const float>(g) + b, m, scale, ptr<float>(out) + b, e - b);
  });
  return out;
}

struct DropoutFn : torch::autograd::Function<DropoutFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double p) {
    at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
    at::Tensor mask = at::empty(x.sizes(), x.options().dtype(at::kBool));
    forward_kernel(x, at::Tensor(), y, mask, p);
    ctx->save_for_backward({mask});
    ctx->saved_data["scale"] = 1.0 / (1.0 - p);
    ctx->saved_data["dtype"] = static_cast<std::int64_t>(x.scalar_type());
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {backward_kernel(grads[0], ctx->get_saved_variables()[0], scale, dtype), at::Tensor()};
  }
};

struct DropoutAddFn : torch::autograd::Function<DropoutAddFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& residual, double p) {
    at::Tensor y = at::empty_like(residual, at::MemoryFormat::Contiguous);
    at::Tensor mask = at::empty(x.sizes(), x.options().dtype(at::kBool));
    forward_kernel(x, residual, y, mask, p);
    ctx->save_for_backward({mask});
    ctx->saved_data["scale"] = 1.0 / (1.0 - p);
    ctx->saved_data["dtype"] = static_cast<std::int64_t>(x.scalar_type());
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {backward_kernel(grads[0], ctx->get_saved_variables()[0], scale, dtype), grads[0], at::Tensor()};
  }
};

void check_p(double p) {
  if (!(p >= 0.0 && p <= 1.0)) throw Error("dropout: probability " + std::to_string(p) + " is outside [0, 1]");
}

}  // namespace

at::Tensor dropout(const at::Tensor& x, double p) {
  check_p(p);
  if (p == 0.0) return x;
  if (p == 1.0 || !x.device().is_cpu() || !fused_dtype(x)) return at::dropout(x, p, /*train=*/true);
  return DropoutFn::apply(x.contiguous(), p);
}

at::Tensor dropout_add(const at::Tensor& x, const at::Tensor& residual, double p) {
  check_p(p);
  if (x.sizes() != residual.sizes())
    throw Error("dropout_add: x " + c10::str(x.sizes()) + " and residual " + c10::str(residual.sizes()) + " differ in shape");
  const bool same = x.scalar_type() == residual.scalar_type();
  const bool supported = x.device().is_cpu() && residual.device().is_cpu() && fused_dtype(x) && fused_dtype(residual) &&
                         (same || (x.scalar_type() == at::kBFloat16 && residual.scalar_type() == at::kFloat));
  if (p == 0.0) return residual + x;
  if (p == 1.0 || !supported) return residual + at::dropout(x, p, /*train=*/true);
  return DropoutAddFn::apply(x.contiguous(), residual.contiguous(), p);
}

}  // namespace bertx::ops
