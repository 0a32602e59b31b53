// bertx/losses.hpp - the BERT losses, shared by task plugins and `bertx forward` so both compute the same
// numbers (Hugging Face's definitions: mean cross-entropy over non-ignored targets). Cross-entropy goes
// through bertx::ops::cross_entropy (fused on the CPU; link bertx::ops).
#pragma once
#include <ATen/ATen.h>

#include "bertx/ops.hpp"

namespace bertx::losses {

constexpr std::int64_t kIgnoreIndex = -100;  // HF; NVIDIA's code uses -1 for the same meaning

// MLM: logits (..., V), labels (...) with kIgnoreIndex where not masked. Mean over the masked targets.
inline at::Tensor mlm(const at::Tensor& logits, const at::Tensor& labels) {
  return ops::cross_entropy(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}), kIgnoreIndex).loss;
}

// MLM loss and accuracy (argmax == label over the masked targets) from the same pass over the logits.
inline ops::CrossEntropy mlm_with_accuracy(const at::Tensor& logits, const at::Tensor& labels) {
  return ops::cross_entropy(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}), kIgnoreIndex);
}

// NSP / sequence classification with C > 1 classes: logits (B, C), labels (B).
inline at::Tensor classification(const at::Tensor& logits, const at::Tensor& labels) {
  if (logits.size(-1) == 1)
    return at::mse_loss(logits.squeeze(-1).to(at::kFloat), labels.to(at::kFloat));  // regression
  return ops::cross_entropy(logits, labels, kIgnoreIndex).loss;
}

// Span QA: (CE(start) + CE(end)) / 2; positions outside [0, S) are clamped to S and ignored (HF). With an
// attention_mask (B, S), the softmaxes run over real tokens only (padded logits set to kMaskedLogit, whose exp is
// exactly 0 in float32 and bf16: no weight, no gradient); without one over all S positions, as HF's and run_squad's.
// Not float's lowest: the row kernels treat a non-finite row sum as a non-finite logit (a NaN loss), and a few
// hundred lowest values add up to -inf.
inline constexpr double kMaskedLogit = -1e4;
inline at::Tensor span(const at::Tensor& start_logits, const at::Tensor& end_logits, const at::Tensor& start_positions,
                       const at::Tensor& end_positions, const at::Tensor& attention_mask = {}) {
  const std::int64_t S = start_logits.size(1);
  const at::Tensor padded = attention_mask.defined() ? attention_mask.eq(0) : at::Tensor();
  auto ce = [&](const at::Tensor& logits, const at::Tensor& pos) {
    const at::Tensor l = padded.defined() ? logits.masked_fill(padded, kMaskedLogit) : logits;
    return ops::cross_entropy(l, pos.clamp(0, S), S).loss;
  };
  return (ce(start_logits, start_positions) + ce(end_logits, end_positions)) / 2;
}

// Accuracy over non-ignored targets: logits (..., C), labels (...). Returns a 0-dim float tensor (no sync).
inline at::Tensor accuracy(const at::Tensor& logits, const at::Tensor& labels) {
  at::Tensor valid = labels.ne(kIgnoreIndex);
  at::Tensor hits = logits.argmax(-1).eq(labels).logical_and(valid);
  return hits.sum().to(at::kFloat) / valid.sum().clamp_min(1).to(at::kFloat);
}

}  // namespace bertx::losses
