// attention_strided.cpp - bertx::ops::attention (ops.hpp): multi-head attention on q, k, v laid out (B, S, H), the
// heads read and the context written in place through strides (oneDNN's batched matmul, gemm_onednn.hpp) - no
// head transposes, no contiguous copies of k^T (LibTorch 1.13's CPU bmm copies any non-contiguous operand, and
// runs float32 strided batches at a fraction of its GEMM speed). Softmax, mask and dropout: ops::attention_softmax.
// Autograd: one function per product, each backward two more strided products:
//   scores = Q K^T   (B, h, S, S): dQ = dS K,   dK = dS^T Q
//   context = P V    (B, h, S, d): dP = dC V^T, dV = P^T dC
// Inference without dropout: attention_blocked.cpp (per head, scores kept in cache).
// Without oneDNN, off the CPU or for other dtypes: compat::attention on transposed views (SDPA on LibTorch 2.x).
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/autograd.h>

#include "bertx/compat.hpp"
#include "bertx/error.hpp"
#include "bertx/ops.hpp"
#include "ops/attention_blocked.hpp"
#include "ops/onednn/gemm_onednn.hpp"
#include "ops/ops_common.hpp"

namespace bertx::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A (B, h, rows, cols) view's four strides.
using View = std::array<std::int64_t, 4>;
View heads_of(const at::Tensor& t, std::int64_t d) {
  return {t.stride(0), d, t.stride(1), 1};
}  // (B, S, H) -> (B, h, S, d)
View heads_transposed(const at::Tensor& t, std::int64_t d) {
  return {t.stride(0), d, 1, t.stride(1)};
}  // -> (B, h, d, S)
View scores_view(const at::Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2), 1}; }  // (B, h, S, S)
View scores_transposed(const at::Tensor& t) { return {t.stride(0), t.stride(1), 1, t.stride(2)}; }

// C = A B over (B, h): A (M, K), B (K, N), C (M, N) per head.
void product(const at::Tensor& a, const View& av, const at::Tensor& b, const View& bv, at::Tensor& c, const View& cv,
             std::int64_t B, std::int64_t h, std::int64_t M, std::int64_t N, std::int64_t K) {
  onednn::Strides st{};
  std::copy(av.begin(), av.end(), st.a);
  std::copy(bv.begin(), bv.end(), st.b);
  std::copy(cv.begin(), cv.end(), st.c);
  onednn::batched_matmul(a.scalar_type() == at::kBFloat16, B, h, M, N, K, a.data_ptr(), b.data_ptr(), c.data_ptr(), st);
}

// q, k (B, S, H), last dimension contiguous -> scores (B, h, S, S).
at::Tensor scores_of(const at::Tensor& q, const at::Tensor& k, std::int64_t h) {
  const std::int64_t B = q.size(0), S = q.size(1), d = q.size(2) / h;
  at::Tensor scores = at::empty({B, h, S, S}, q.options());
  product(q, heads_of(q, d), k, heads_transposed(k, d), scores, scores_view(scores), B, h, S, S, d);
  return scores;
}

// p (B, h, S, S) contiguous, v (B, S, H) -> context (B, S, H).
at::Tensor context_of(const at::Tensor& p, const at::Tensor& v, std::int64_t h) {
  const std::int64_t B = v.size(0), S = v.size(1), H = v.size(2), d = H / h;
  at::Tensor context = at::empty({B, S, H}, v.options());
  product(p, scores_view(p), v, heads_of(v, d), context, heads_of(context, d), B, h, S, d, S);
  return context;
}

struct ScoresFn : torch::autograd::Function<ScoresFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, std::int64_t h) {
    ctx->save_for_backward({q, k});
    ctx->saved_data["h"] = h;
    return scores_of(q, k, h);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1];
    const std::int64_t h = ctx->saved_data["h"].toInt(), B = q.size(0), S = q.size(1), d = q.size(2) / h;
    const at::Tensor g = grads[0].to(q.scalar_type()).contiguous();  // dS (B, h, S, S)
    at::Tensor dq, dk;
    if (ctx->needs_input_grad(0)) {
      dq = at::empty({B, S, q.size(2)}, q.options());  // dQ = dS K
      product(g, scores_view(g), k, heads_of(k, d), dq, heads_of(dq, d), B, h, S, d, S);
    }
    if (ctx->needs_input_grad(1)) {
      dk = at::empty({B, S, k.size(2)}, k.options());  // dK = dS^T Q
      product(g, scores_transposed(g), q, heads_of(q, d), dk, heads_of(dk, d), B, h, S, d, S);
    }
    return {dq, dk, at::Tensor()};
  }
};

struct ContextFn : torch::autograd::Function<ContextFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& p, const at::Tensor& v, std::int64_t h) {
    ctx->save_for_backward({p, v});
    ctx->saved_data["h"] = h;
    return context_of(p, v, h);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &p = saved[0], &v = saved[1];
    const std::int64_t h = ctx->saved_data["h"].toInt(), B = v.size(0), S = v.size(1), d = v.size(2) / h;
    const at::Tensor g = grads[0].to(v.scalar_type()).contiguous();  // dC (B, S, H)
    at::Tensor dp, dv;
    if (ctx->needs_input_grad(0)) {
      dp = at::empty({B, h, S, S}, p.options());  // dP = dC V^T
      product(g, heads_of(g, d), v, heads_transposed(v, d), dp, scores_view(dp), B, h, S, S, d);
    }
    if (ctx->needs_input_grad(1)) {
      dv = at::empty({B, S, v.size(2)}, v.options());  // dV = P^T dC
      product(p, scores_transposed(p), g, heads_of(g, d), dv, heads_of(dv, d), B, h, S, d, S);
    }
    return {dp, dv, at::Tensor()};
  }
};

bool strided_ok(const at::Tensor& t, at::ScalarType dtype) {
  return detail::cpu_kernel_input(t, dtype) && t.stride(2) == 1;
}

}  // namespace

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::int64_t heads,
                     const at::Tensor& additive_mask, double p) {
  RECORD_FUNCTION("bertx::ops::attention", std::vector<c10::IValue>());
  if (q.dim() != 3 || !q.sizes().equals(k.sizes()) || !q.sizes().equals(v.sizes()) || heads < 1 ||
      q.size(2) % heads != 0)
    throw Error("ops::attention: expected q, k, v of one shape (B, S, H) with H divisible by heads " +
                std::to_string(heads) + ", got " + c10::str(q.sizes()) + ", " + c10::str(k.sizes()) + ", " +
                c10::str(v.sizes()));
  const std::int64_t B = q.size(0), S = q.size(1), H = q.size(2), d = H / heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const at::ScalarType dt = q.scalar_type();
  const bool fast = onednn::available() && (dt != at::kBFloat16 || onednn::bf16_matmul()) && B > 0 && S > 0 &&
                    detail::cpu_kernel_input(q) && detail::cpu_kernel_input(k, dt) && detail::cpu_kernel_input(v, dt);
  if (!fast) {  // LibTorch: (B, h, S, d) views, compat::attention, back to (B, S, H)
    auto split = [&](const at::Tensor& t) { return t.view({B, S, heads, d}).transpose(1, 2); };
    return compat::attention(split(q), split(k), split(v), additive_mask, p).transpose(1, 2).reshape({B, S, H});
  }
  auto dense_rows = [&](const at::Tensor& t) { return strided_ok(t, dt) ? t : t.contiguous(); };
  const at::Tensor qc = dense_rows(q), kc = dense_rows(k), vc = dense_rows(v);
  const bool grad = at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  at::Tensor mask;                                                      // (B or 1, S) float32
  if (!grad && p == 0 && detail::mask_rows(additive_mask, B, S, mask))  // inference: no (B, h, S, S) tensor at all
    return detail::attention_blocked(qc, kc, vc, heads, mask, scale);
  if (!grad) return context_of(attention_softmax(scores_of(qc, kc, heads), additive_mask, scale, p), vc, heads);
  const at::Tensor scores = ScoresFn::apply(qc, kc, heads);                     // (B, h, S, S)
  const at::Tensor probs = attention_softmax(scores, additive_mask, scale, p);  // (B, h, S, S), contiguous
  return ContextFn::apply(probs, vc, heads);                                    // (B, S, H)
}

}  // namespace bertx::ops
