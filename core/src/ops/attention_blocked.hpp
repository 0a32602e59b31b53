// attention_blocked.hpp - ops::attention's CPU inference path (attention_blocked.cpp), called by its dispatch in
// attention_strided.cpp.
#pragma once
#include <cstdint>

#include <ATen/ATen.h>

namespace bertx::ops::detail {

// q, k, v (B, S, H) float32 or bf16 CPU, last dimension contiguous (row stride free: column views of a joined QKV
// tensor); mask (B or 1, S) float32 contiguous, or undefined for none. Returns the context (B, S, H), contiguous,
// in q's dtype: per head softmax(q k^T * scale + mask) v. No autograd, no dropout. Needs oneDNN.
at::Tensor attention_blocked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::int64_t heads,
                             const at::Tensor& mask, double scale);

}  // namespace bertx::ops::detail
