// layer_norm.cpp - bertx::ops::add_layer_norm (ops.hpp): a transformer sub-layer's output joining the residual
// stream and normalised, LayerNorm(residual + dropout(x)), in one pass per row forward and one backward (the CPU
// row kernels in kernels_cpu.hpp). LibTorch's composition runs dropout, the add, a float32 copy of a bf16 x and
// LayerNorm as four passes and keeps the sum for its backward anyway; here the sum is the only saved activation
// besides the 1-byte keep bits and two floats per row. Other devices and dtypes take that composition.
#include <algorithm>
#include <cmath>
#include <vector>

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

using detail::ptr;
using Dropout = detail::DropoutDraw;

// The weight-gradient sums are kept per chunk of rows, a fixed number of chunks whatever the thread count, and
// added in chunk order: the same inputs give the same bits with 1 or 16 threads.
constexpr std::int64_t kMaxChunks = 64;

// One forward pass over all rows. x (rows, H) float32/bf16, residual (rows, H) float32, all contiguous; sum
// (rows, H) float32 or undefined (inference); y float32; y16 bf16 or undefined; stats (rows, 2) float32 or
// undefined; keep (rows, H) bool or undefined (no dropout).
void forward_rows(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight, const at::Tensor& bias,
                  double eps, const Dropout& d, const at::Tensor& sum, const at::Tensor& y, const at::Tensor& y16,
                  const at::Tensor& stats, const at::Tensor& keep) {
  const std::int64_t H = weight.numel(), rows = residual.numel() / H;
  const bool x16 = x.scalar_type() == at::kBFloat16;
  const auto e = static_cast<float>(eps);
  at::parallel_for(0, rows, std::max<std::int64_t>(1, (1 << 15) / H), [&](std::int64_t b, std::int64_t end) {
    for (std::int64_t r = b; r < end; ++r) {
      const std::int64_t o = r * H;
      float* s = sum.defined() ? ptr<float>(sum) + o : nullptr;
      std::uint16_t* h = y16.defined() ? ptr<std::uint16_t>(y16) + o : nullptr;
      std::uint8_t* k = keep.defined() ? ptr<std::uint8_t>(keep) + o : nullptr;
      const auto off = static_cast<std::uint64_t>(o);
      const cpu::NormStats st =
          x16 ? cpu::add_norm_row_forward(ptr<const std::uint16_t>(x) + o, ptr<const float>(residual) + o,
                                          ptr<const float>(weight), ptr<const float>(bias), e, H, s, ptr<float>(y) + o,
                                          h, k, off, d.seed, d.threshold, d.scale)
              : cpu::add_norm_row_forward(ptr<const float>(x) + o, ptr<const float>(residual) + o,
                                          ptr<const float>(weight), ptr<const float>(bias), e, H, s, ptr<float>(y) + o,
                                          h, k, off, d.seed, d.threshold, d.scale);
      if (stats.defined()) {
        ptr<float>(stats)[2 * r] = st.mean;
        ptr<float>(stats)[2 * r + 1] = st.rstd;
      }
    }
  });
}

struct AddLayerNormFn : torch::autograd::Function<AddLayerNormFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& residual,
                            const at::Tensor& weight, const at::Tensor& bias, double eps, double p) {
    const std::int64_t H = weight.numel(), rows = residual.numel() / H;
    const Dropout d(p);
    at::Tensor sum = at::empty_like(residual, at::MemoryFormat::Contiguous);  // (..., H) float32: the LayerNorm input
    at::Tensor y = at::empty_like(sum);
    at::Tensor stats = at::empty({rows, 2}, sum.options());  // (rows, 2): mean, rstd
    at::Tensor keep = p > 0 ? at::empty(x.sizes(), x.options().dtype(at::kBool)) : at::Tensor();
    forward_rows(x, residual, weight, bias, eps, d, sum, y, at::Tensor(), stats, keep);
    ctx->save_for_backward({sum, stats, weight, keep});
    ctx->saved_data["scale"] = static_cast<double>(d.scale);
    ctx->saved_data["x_dtype"] = static_cast<std::int64_t>(x.scalar_type());
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &sum = saved[0], &stats = saved[1], &weight = saved[2], &keep = saved[3];
    const at::Tensor dy = grads[0].to(at::kFloat).contiguous();
    const std::int64_t H = weight.numel(), rows = sum.numel() / H;
    const auto scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const bool need_x = ctx->needs_input_grad(0), x16 = x_dtype == at::kBFloat16;
    at::Tensor d_sum = at::empty_like(sum);
    at::Tensor dx = need_x ? at::empty(sum.sizes(), sum.options().dtype(x_dtype)) : at::Tensor();
    const std::int64_t chunks = std::min(rows, kMaxChunks), per = (rows + chunks - 1) / chunks;
    at::Tensor partial = at::zeros({chunks, 2, H}, sum.options());  // per chunk: dgamma, dbeta
    at::parallel_for(0, chunks, 1, [&](std::int64_t cb, std::int64_t ce) {
      for (std::int64_t c = cb; c < ce; ++c) {
        float* dg = ptr<float>(partial) + c * 2 * H;
        for (std::int64_t r = c * per; r < std::min(rows, (c + 1) * per); ++r) {
          const std::int64_t o = r * H;
          const cpu::NormStats st{ptr<const float>(stats)[2 * r], ptr<const float>(stats)[2 * r + 1]};
          const std::uint8_t* k = keep.defined() ? ptr<const std::uint8_t>(keep) + o : nullptr;
          if (x16)
            cpu::add_norm_row_backward(ptr<const float>(dy) + o, ptr<const float>(sum) + o, st,
                                       ptr<const float>(weight), H, k, scale, ptr<float>(d_sum) + o,
                                       need_x ? ptr<std::uint16_t>(dx) + o : nullptr, dg, dg + H);
          else
            cpu::add_norm_row_backward(ptr<const float>(dy) + o, ptr<const float>(sum) + o, st,
                                       ptr<const float>(weight), H, k, scale, ptr<float>(d_sum) + o,
                                       need_x ? ptr<float>(dx) + o : nullptr, dg, dg + H);
        }
      }
    });
    at::Tensor dw, db;
    if (ctx->needs_input_grad(2) || ctx->needs_input_grad(3)) {
      const at::Tensor total = partial.sum(0);  // (2, H)
      dw = total[0];
      db = total[1];
    }
    return {dx, d_sum, dw, db, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor add_layer_norm(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
                          const at::Tensor& bias, double eps, double p, at::Tensor* bf16_copy) {
  RECORD_FUNCTION("bertx::ops::add_layer_norm", std::vector<c10::IValue>());
  if (!weight.defined() || weight.dim() != 1 || !residual.defined() || residual.dim() == 0 ||
      residual.size(-1) != weight.size(0) || !x.defined() || x.sizes() != residual.sizes() ||
      (bias.defined() && bias.sizes() != weight.sizes()))
    throw Error("ops::add_layer_norm: expected x and residual (..., H) of one shape, weight and bias (H); got x " +
                (x.defined() ? c10::str(x.sizes()) : std::string("undefined")) + ", residual " +
                (residual.defined() ? c10::str(residual.sizes()) : std::string("undefined")) + ", weight " +
                (weight.defined() ? c10::str(weight.sizes()) : std::string("undefined")));
  if (p < 0 || p >= 1) throw Error("ops::add_layer_norm: dropout probability " + std::to_string(p) + " outside [0, 1)");
  const bool fast = (detail::cpu_kernel_input(x, at::kFloat) || detail::cpu_kernel_input(x, at::kBFloat16)) &&
                    detail::cpu_kernel_input(residual, at::kFloat) && detail::cpu_kernel_input(weight, at::kFloat) &&
                    detail::cpu_kernel_input(bias, at::kFloat) && residual.numel() > 0;
  if (!fast) {
    const at::Tensor s = p > 0 ? dropout_add(x, residual, p) : residual + x;
    at::Tensor y = at::layer_norm(s.to(weight.scalar_type()), {weight.size(0)}, weight, bias, eps);
    if (bf16_copy) *bf16_copy = y.to(at::kBFloat16);
    return y;
  }
  const at::Tensor xc = x.contiguous(), rc = residual.contiguous(), wc = weight.contiguous(), bc = bias.contiguous();
  const bool grad = at::GradMode::is_enabled() &&
                    (x.requires_grad() || residual.requires_grad() || weight.requires_grad() || bias.requires_grad());
  if (grad) {
    at::Tensor y = AddLayerNormFn::apply(xc, rc, wc, bc, eps, p);
    if (bf16_copy) *bf16_copy = y.to(at::kBFloat16);
    return y;
  }
  at::Tensor y = at::empty_like(rc, at::MemoryFormat::Contiguous);  // (..., H) float32
  at::Tensor y16 = bf16_copy ? at::empty(y.sizes(), y.options().dtype(at::kBFloat16)) : at::Tensor();
  const at::Tensor keep = p > 0 ? at::empty(x.sizes(), x.options().dtype(at::kBool)) : at::Tensor();
  forward_rows(xc, rc, wc, bc, eps, Dropout(p), at::Tensor(), y, y16, at::Tensor(), keep);
  if (bf16_copy) *bf16_copy = y16;
  return y;
}

}  // namespace bertx::ops
