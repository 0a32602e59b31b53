// packed.cpp - see packed.hpp. T real tokens, B sequences of length S, H hidden, h heads, d = H / h.
#include "packed.hpp"

#include <ATen/ATen.h>

#include "bertx/ops.hpp"

namespace bertx::bert {

std::optional<Packing> Packing::plan(const at::Tensor& mask, double min_padding) {
  if (mask.dim() != 2 || !mask.device().is_cpu()) return std::nullopt;
  const std::int64_t B = mask.size(0), S = mask.size(1);
  const at::Tensor keep = mask.ne(0);                             // (B, S)
  const at::Tensor counts = keep.sum(1).to(at::kLong).contiguous();  // (B,)
  const auto* c = counts.data_ptr<std::int64_t>();
  Packing p;
  p.offsets_.assign(static_cast<std::size_t>(B + 1), 0);
  for (std::int64_t b = 0; b < B; ++b) {
    if (c[b] == 0) return std::nullopt;  // an all-padding row: keep the padded path's semantics
    p.offsets_[static_cast<std::size_t>(b + 1)] = p.offsets_[static_cast<std::size_t>(b)] + c[b];
  }
  if (static_cast<double>(p.tokens()) > (1.0 - min_padding) * static_cast<double>(B * S)) return std::nullopt;
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
  const std::int64_t H = q.size(1);
  std::vector<at::Tensor> parts;
  parts.reserve(static_cast<std::size_t>(batch_));
  for (std::int64_t b = 0; b < batch_; ++b) {
    const std::int64_t first = offsets_[static_cast<std::size_t>(b)], L = offsets_[static_cast<std::size_t>(b + 1)] - first;
    auto one = [&](const at::Tensor& t) { return t.narrow(0, first, L).view({1, L, H}); };  // (1, L, H)
    parts.push_back(ops::attention(one(q), one(k), one(v), heads, at::Tensor(), dropout_p).view({L, H}));  // (L, H)
  }
  return at::cat(parts, 0);  // (T, H)
}

}  // namespace bertx::bert
