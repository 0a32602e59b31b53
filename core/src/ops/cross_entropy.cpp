// cross_entropy.cpp - bertx::ops::cross_entropy (ops.hpp): the dispatch point, the autograd function around
// the CPU row kernels (kernels_cpu.hpp), and the LibTorch composition for other devices and dtypes.
// Forward saves the logits and each row's max and log-sum; backward writes softmax - one_hot in one pass.
#include <cmath>
#include <cstring>
#include <limits>
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

bool fused(const at::Tensor& logits) { return detail::cpu_kernel_input(logits) && logits.dim() == 2; }

const std::uint16_t* bf16(const at::Tensor& t) {
  return reinterpret_cast<const std::uint16_t*>(t.data_ptr<at::BFloat16>());
}

struct CrossEntropyFn : torch::autograd::Function<CrossEntropyFn> {
  // logits (N, C) contiguous float32/bf16 on the CPU, labels (N) int64 contiguous, checked by the caller.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& labels,
                               std::int64_t ignore_index) {
    const std::int64_t N = logits.size(0), C = logits.size(1);
    const bool is_bf16 = logits.scalar_type() == at::kBFloat16;
    const std::int64_t* label = labels.data_ptr<std::int64_t>();
    at::Tensor stats = at::zeros({N, 2}, logits.options().dtype(at::kFloat));  // (N, 2): max, log-sum
    float* stats_p = stats.data_ptr<float>();
    std::vector<double> row_loss(static_cast<std::size_t>(N), 0.0);
    std::vector<char> hit(static_cast<std::size_t>(N), 0);
    at::parallel_for(0, N, 1, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> scratch(is_bf16 ? static_cast<std::size_t>(C) : 0);
      for (std::int64_t i = begin; i < end; ++i) {
        if (label[i] == ignore_index) continue;
        cpu::RowStats st;
        float target;
        if (is_bf16) {
          st = cpu::ce_row_forward(bf16(logits) + i * C, C, scratch.data());
          target = scratch[static_cast<std::size_t>(label[i])];
        } else {
          const float* row = logits.data_ptr<float>() + i * C;
          st = cpu::ce_row_forward(row, C);
          target = row[label[i]];
        }
        stats_p[2 * i] = st.max;
        stats_p[2 * i + 1] = st.log_sum;
        row_loss[static_cast<std::size_t>(i)] = (static_cast<double>(st.max) - target) + st.log_sum;
        hit[static_cast<std::size_t>(i)] = st.argmax == label[i];
      }
    });
    double total = 0;
    std::int64_t count = 0, hits = 0;
    for (std::int64_t i = 0; i < N; ++i)
      if (label[i] != ignore_index)
        total += row_loss[static_cast<std::size_t>(i)], ++count, hits += hit[static_cast<std::size_t>(i)];
    const auto f32 = logits.options().dtype(at::kFloat);
    at::Tensor loss =
        at::scalar_tensor(count ? total / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN(), f32);
    at::Tensor accuracy = at::scalar_tensor(count ? static_cast<double>(hits) / static_cast<double>(count) : 0.0, f32);
    ctx->save_for_backward({logits, labels, stats});
    ctx->saved_data["ignore_index"] = ignore_index;
    ctx->saved_data["count"] = count;
    ctx->mark_non_differentiable({accuracy});
    return {loss, accuracy};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &labels = saved[1], &stats = saved[2];
    const std::int64_t ignore_index = ctx->saved_data["ignore_index"].toInt(), count = ctx->saved_data["count"].toInt();
    const std::int64_t N = logits.size(0), C = logits.size(1);
    const bool is_bf16 = logits.scalar_type() == at::kBFloat16;
    const float scale = grads[0].defined() && count > 0 ? grads[0].item<float>() / static_cast<float>(count) : 0.0f;
    at::Tensor grad = at::empty_like(logits, at::MemoryFormat::Contiguous);  // (N, C)
    const std::int64_t* label = labels.data_ptr<std::int64_t>();
    const float* stats_p = stats.data_ptr<float>();
    const std::int64_t row_bytes = C * static_cast<std::int64_t>(grad.element_size());
    at::parallel_for(0, N, 1, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> scratch(is_bf16 ? static_cast<std::size_t>(C) : 0);
      for (std::int64_t i = begin; i < end; ++i) {
        if (label[i] == ignore_index) {
          std::memset(static_cast<char*>(grad.data_ptr()) + i * row_bytes, 0, static_cast<std::size_t>(row_bytes));
          continue;
        }
        const cpu::RowStats st{stats_p[2 * i], stats_p[2 * i + 1], 0};
        if (is_bf16)
          cpu::ce_row_backward(bf16(logits) + i * C, C, st, label[i], scale,
                               reinterpret_cast<std::uint16_t*>(grad.data_ptr<at::BFloat16>()) + i * C, scratch.data());
        else
          cpu::ce_row_backward(logits.data_ptr<float>() + i * C, C, st, label[i], scale,
                               grad.data_ptr<float>() + i * C);
      }
    });
    return {grad, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

CrossEntropy cross_entropy(const at::Tensor& logits, const at::Tensor& labels, std::int64_t ignore_index) {
  RECORD_FUNCTION("bertx::ops::cross_entropy", std::vector<c10::IValue>());  // visible to profilers (--profile)
  if (logits.dim() != 2 || labels.dim() != 1 || labels.size(0) != logits.size(0))
    throw Error("cross_entropy: expected logits (N, C) and labels (N), got " + c10::str(logits.sizes()) + " and " +
                c10::str(labels.sizes()));
  if (!fused(logits)) {  // LibTorch's composition (CUDA: its fused kernels), same definitions
    at::Tensor loss = at::cross_entropy_loss(logits.to(at::kFloat), labels, {}, at::Reduction::Mean, ignore_index);
    at::Tensor valid = labels.ne(ignore_index);
    at::Tensor hits = logits.detach().argmax(-1).eq(labels).logical_and(valid);
    return {loss, hits.sum().to(at::kFloat) / valid.sum().clamp_min(1).to(at::kFloat)};
  }
  at::Tensor l = labels.to(at::kLong).contiguous();
  const std::int64_t C = logits.size(1), N = l.size(0);
  const std::int64_t* p = l.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < N; ++i)
    if (p[i] != ignore_index && (p[i] < 0 || p[i] >= C))
      throw Error(c10::str("cross_entropy: label ", p[i], " at row ", i, " is outside [0, ", C,
                           ") and not the ignore index ", ignore_index));
  variable_list out = CrossEntropyFn::apply(logits.contiguous(), l, ignore_index);
  return {out[0], out[1]};
}

}  // namespace bertx::ops
