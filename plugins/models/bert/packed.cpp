// packed.cpp - see packed.hpp. T real tokens, B sequences of length S, H hidden, h heads, d = H / h.
#include "packed.hpp"

#include <ATen/ATen.h>

#include <limits>

#include "bertx/ops.hpp"

namespace bertx::bert {

at::Tensor additive_attention_mask(const at::Tensor& mask) {
  return (1.0 - mask.to(at::kFloat)).mul(std::numeric_limits<float>::lowest()).view({mask.size(0), 1, 1, mask.size(1)});
}

std::optional<Packing> Packing::plan(const at::Tensor& mask, double min_padding) {
  if (mask.dim() != 2 || !mask.device().is_cpu()) return std::nullopt;
  const std::int64_t B = mask.size(0), S = mask.size(1);
  const at::Tensor keep = mask.ne(0);                                // (B, S)
  const at::Tensor counts = keep.sum(1).to(at::kLong).contiguous();  // (B,)
  const auto* c = counts.data_ptr<std::int64_t>();
  Packing p;
  p.offsets_.assign(static_cast<std::size_t>(B + 1), 0);
  for (std::int64_t b = 0; b < B; ++b) {
    if (c[b] == 0) return std::nullopt;  // an all-padding row: keep the padded path's semantics
    p.offsets_[static_cast<std::size_t>(b + 1)] = p.offsets_[static_cast<std::size_t>(b)] + c[b];
  }
  if (static_cast<double>(p.tokens()) > (1.0 - min_padding) * static_cast<double>(B * S)) return std::nullopt;
  double sum_sq = 0;  // sum of L^2: the per-sequence attention's score work
  for (std::int64_t b = 0; b < B; ++b) sum_sq += static_cast<double>(c[b]) * static_cast<double>(c[b]);
  const double mean_length = static_cast<double>(p.tokens()) / static_cast<double>(B);
  if (static_cast<double>(B * S * S) <= kPaddedAttentionWaste * sum_sq || mean_length <= kPerSequenceMinMeanLength)
    p.additive_mask_ = additive_attention_mask(mask);     // (B, 1, 1, S)
  p.index_ = at::nonzero(keep.reshape({-1})).squeeze(1);  // (T,) row-major: batch, then position
  p.positions_ = p.index_.remainder(S);
  p.batch_ = B;
  p.seq_ = S;
  return p;
}

at::Tensor Packing::pack(const at::Tensor& x) const { return x.flatten(0, 1).index_select(0, index_); }

at::Tensor Packing::unpack(const at::Tensor& x) const {
  const std::int64_t H = x.size(1);
  return at::zeros({batch_ * seq_, H}, x.options()).index_copy(0, index_, x).view({batch_, seq_, H});  // (B, S, H)
}

at::Tensor Packing::attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::int64_t heads,
                              double dropout_p) const {
  if (additive_mask_.defined())  // one batched call over the padded layout; padded keys get exactly 0 weight
    return pack(ops::attention(unpack(q), unpack(k), unpack(v), heads, additive_mask_, dropout_p));  // (T, H)
  const std::int64_t H = q.size(1);
  // One split per operand, not a narrow per sequence: a split's backward joins the B gradients in one copy, where
  // B narrows' backwards each zero-fill a full (T, H) gradient and add it up (3 x B fills and adds per layer: a
  // quarter of a MiniLM fine-tuning step at batch 32).
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(batch_));
  for (std::size_t b = 0; b < lengths.size(); ++b) lengths[b] = offsets_[b + 1] - offsets_[b];
  const std::vector<at::Tensor> qs = q.split_with_sizes(lengths, 0), ks = k.split_with_sizes(lengths, 0),
                                vs = v.split_with_sizes(lengths, 0);  // B x (L, H) each
  std::vector<at::Tensor> parts;
  parts.reserve(lengths.size());
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    auto one = [&](const at::Tensor& t) { return t.view({1, lengths[b], H}); };  // (1, L, H)
    parts.push_back(ops::attention(one(qs[b]), one(ks[b]), one(vs[b]), heads, at::Tensor(), dropout_p)
                        .view({lengths[b], H}));  // (L, H)
  }
  return at::cat(parts, 0);  // (T, H)
}

}  // namespace bertx::bert
