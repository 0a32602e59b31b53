// attention_softmax.cpp - bertx::ops::attention_softmax (ops.hpp): the dispatch point, the autograd function around
// the CPU row kernels (kernels_cpu.hpp) and LibTorch's composition for other devices, dtypes and mask shapes.
// Forward saves the probabilities (scores' dtype) and, with dropout, 1-byte keep bits; backward is
// grad = p * (dp - sum(dp * p)) * scale with dp the dropout-masked incoming gradient.
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

struct AttentionSoftmaxFn : torch::autograd::Function<AttentionSoftmaxFn> {
  // scores (B, h, Sq, Sk) contiguous float32/bf16 CPU; mask (B or 1, Sk) contiguous float32 or undefined. The mask
  // comes as a pointer, not a tensor argument: apply() records every tensor argument, and 1.13 throws on an
  // undefined one.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& scores, const at::Tensor* mask_arg, double scale,
                            double p) {
    const at::Tensor& mask = *mask_arg;
    const std::int64_t B = scores.size(0), h = scores.size(1), Sq = scores.size(2), Sk = scores.size(3),
                       rows = B * h * Sq;
    const bool bf16 = scores.scalar_type() == at::kBFloat16, dropout = p > 0;
    at::Tensor probs = at::empty_like(scores, at::MemoryFormat::Contiguous);
    at::Tensor out = dropout ? at::empty_like(probs) : probs;
    at::Tensor keep = dropout ? at::empty(scores.sizes(), scores.options().dtype(at::kBool)) : at::Tensor();
    const detail::DropoutDraw d(p);
    const std::uint64_t seed = d.seed;
    const std::uint32_t threshold = d.threshold;
    const float dscale = d.scale;
    const auto s = static_cast<float>(scale);
    const bool per_batch_mask = mask.defined() && mask.size(0) == B && B > 1;
    at::parallel_for(0, rows, 1, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> scratch(static_cast<std::size_t>(Sk));
      for (std::int64_t r = begin; r < end; ++r) {
        const float* m = mask.defined() ? ptr<const float>(mask) + (per_batch_mask ? r / (h * Sq) : 0) * Sk : nullptr;
        const std::int64_t o = r * Sk;
        std::uint8_t* k = dropout ? ptr<std::uint8_t>(keep) + o : nullptr;
        if (bf16)
          cpu::softmax_row_forward(ptr<const std::uint16_t>(scores) + o, m, s, Sk, ptr<std::uint16_t>(probs) + o,
                                   dropout ? ptr<std::uint16_t>(out) + o : nullptr, k, static_cast<std::uint64_t>(o),
                                   seed, threshold, dscale, scratch.data());
        else
          cpu::softmax_row_forward(ptr<const float>(scores) + o, m, s, Sk, ptr<float>(probs) + o,
                                   dropout ? ptr<float>(out) + o : nullptr, k, static_cast<std::uint64_t>(o), seed,
                                   threshold, dscale, scratch.data());
      }
    });
    ctx->save_for_backward({probs, keep});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["dscale"] = static_cast<double>(dscale);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &probs = saved[0], &keep = saved[1];
    const bool bf16 = probs.scalar_type() == at::kBFloat16;
    at::Tensor dout = grads[0].to(probs.scalar_type()).contiguous();
    at::Tensor grad = at::empty_like(probs);
    const std::int64_t Sk = probs.size(-1), rows = probs.numel() / Sk;
    const auto scale = static_cast<float>(ctx->saved_data["scale"].toDouble()),
               dscale = static_cast<float>(ctx->saved_data["dscale"].toDouble());
    at::parallel_for(0, rows, 1, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> scratch(static_cast<std::size_t>(Sk));
      for (std::int64_t r = begin; r < end; ++r) {
        const std::int64_t o = r * Sk;
        const std::uint8_t* k = keep.defined() ? ptr<const std::uint8_t>(keep) + o : nullptr;
        if (bf16)
          cpu::softmax_row_backward(ptr<const std::uint16_t>(dout) + o, ptr<const std::uint16_t>(probs) + o, k, dscale,
                                    scale, Sk, ptr<std::uint16_t>(grad) + o, scratch.data());
        else
          cpu::softmax_row_backward(ptr<const float>(dout) + o, ptr<const float>(probs) + o, k, dscale, scale, Sk,
                                    ptr<float>(grad) + o, scratch.data());
      }
    });
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor attention_softmax(const at::Tensor& scores, const at::Tensor& additive_mask, double scale, double p) {
  RECORD_FUNCTION("bertx::ops::attention_softmax", std::vector<c10::IValue>());  // visible to profilers (--profile)
  if (!(p >= 0.0 && p < 1.0))
    throw Error("attention_softmax: dropout probability " + std::to_string(p) + " is outside [0, 1)");
  if (scores.dim() != 4)
    throw Error("attention_softmax: expected scores (B, h, Sq, Sk), got " + c10::str(scores.sizes()));
  at::Tensor mask;  // (B or 1, Sk) float32, converted only for the fused path
  const bool fused =
      detail::cpu_kernel_input(scores) && detail::mask_rows(additive_mask, scores.size(0), scores.size(3), mask);
  if (!fused) {  // LibTorch's composition: softmax in the promoted dtype, then dropout
    at::Tensor z = scores * scale;
    if (additive_mask.defined()) z = z + additive_mask.to(z.device());
    at::Tensor probs = at::softmax(z, -1).to(scores.scalar_type());
    return p > 0 ? at::dropout(probs, p, /*train=*/true) : probs;
  }
  return AttentionSoftmaxFn::apply(scores.contiguous(), &mask, scale, p);
}

}  // namespace bertx::ops
