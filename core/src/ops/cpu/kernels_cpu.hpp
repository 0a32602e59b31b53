// kernels_cpu.hpp - the CPU loops behind bertx::ops (ops.hpp), on raw pointers: no LibTorch here, so this
// file compiles in seconds and the loops are vectorised by the compiler for the running CPU (function clones
// for AVX-512 / AVX2 / baseline x86-64, chosen at load time). The ops/*.cpp files own the tensors, autograd
// and threading (at::parallel_for over rows or chunks) and call these per row or per chunk.
// bf16 values travel as their 16-bit patterns (c10::BFloat16's layout); rounding is to nearest even, as c10.
#pragma once
#include <cstdint>

namespace bertx::ops::cpu {

// --- cross-entropy over one row of C logits --------------------------------------------------------------
struct RowStats {
  float max;            // the row's maximum m
  float log_sum;        // log(sum(exp(x - m))): NaN when the row holds a NaN or an infinity
  std::int64_t argmax;  // first index of the maximum
};                      // log-sum-exp = m + log_sum; the loss is (m - x[label]) + log_sum, exact even for logits ~1e4
RowStats ce_row_forward(const float* x, std::int64_t C);
// bf16 row: widened into `scratch` (C floats) first.
RowStats ce_row_forward(const std::uint16_t* x, std::int64_t C, float* scratch);
// grad[j] = (exp((x[j] - max) - log_sum) - (j == label)) * scale.
void ce_row_backward(const float* x, std::int64_t C, RowStats st, std::int64_t label, float scale, float* grad);
void ce_row_backward(const std::uint16_t* x, std::int64_t C, RowStats st, std::int64_t label, float scale,
                     std::uint16_t* grad, float* scratch);

// --- dropout over elements [offset, offset + n) of a tensor ------------------------------------------------
// Element i is kept when hash(seed, i) < keep_threshold (a uint32; keep probability = threshold / 2^32): the
// mask depends on (seed, i) only, not on threads or chunking. y = x * (keep ? scale : 0) (a NaN stays visible,
// as with at::dropout); mask[i] = keep.
// With `residual`, y = residual + x * (keep ? scale : 0) (dropout + residual add in one pass).
void dropout(const float* x, const float* residual, float* y, std::uint8_t* mask, std::int64_t n, std::uint64_t offset,
             std::uint64_t seed, std::uint32_t keep_threshold, float scale);
void dropout(const std::uint16_t* x, const std::uint16_t* residual, std::uint16_t* y, std::uint8_t* mask,
             std::int64_t n, std::uint64_t offset, std::uint64_t seed, std::uint32_t keep_threshold, float scale);
// bf16 x (an autocast matmul's output) onto a float residual stream: float y.
void dropout(const std::uint16_t* x, const float* residual, float* y, std::uint8_t* mask, std::int64_t n,
             std::uint64_t offset, std::uint64_t seed, std::uint32_t keep_threshold, float scale);
// Backward: out = g * (mask ? scale : 0).
void masked_scale(const float* g, const std::uint8_t* mask, float scale, float* out, std::int64_t n);
void masked_scale(const std::uint16_t* g, const std::uint8_t* mask, float scale, std::uint16_t* out, std::int64_t n);
void masked_scale(const float* g, const std::uint8_t* mask, float scale, std::uint16_t* out, std::int64_t n);

// --- attention probabilities over one row of C scores ------------------------------------------------------
// z = x * scale + mask (mask: C floats or nullptr), p = softmax(z), written to `probs`; with dropout
// (`out` != nullptr) out = p * (keep ? dropout_scale : 0) and keep bits
// in `keep`, keyed by element index `offset + j` as dropout(). `scratch`: C floats.
void softmax_row_forward(const float* x, const float* mask, float scale, std::int64_t C, float* probs, float* out,
                         std::uint8_t* keep, std::uint64_t offset, std::uint64_t seed, std::uint32_t keep_threshold,
                         float dropout_scale, float* scratch);
void softmax_row_forward(const std::uint16_t* x, const float* mask, float scale, std::int64_t C, std::uint16_t* probs,
                         std::uint16_t* out, std::uint8_t* keep, std::uint64_t offset, std::uint64_t seed,
                         std::uint32_t keep_threshold, float dropout_scale, float* scratch);
// Inference, one row of float32 scores x (a GEMM's float32 accumulator): z = x * scale + mask (mask: C floats),
// p = exp(z - max z) written as bf16 into e, or over x when e is nullptr; returns sum(p) (float32 terms).
// softmax(z) = p / sum: the caller divides the row's product p V by it (flash attention's order: the C
// probabilities are rounded once).
float softmax_row_exp(float* x, const float* mask, float scale, std::int64_t C, std::uint16_t* e);
// y = x * scale over n elements, rounded to bf16 or float32 (the division by that sum).
void scale_row(const float* x, float scale, std::int64_t n, std::uint16_t* y);
void scale_row(const float* x, float scale, std::int64_t n, float* y);
// Backward: dp = dout * (keep ? dropout_scale : 1 when keep == nullptr), grad = p * (dp - sum(dp * p)) * scale.
void softmax_row_backward(const float* dout, const float* probs, const std::uint8_t* keep, float dropout_scale,
                          float scale, std::int64_t C, float* grad, float* scratch);
void softmax_row_backward(const std::uint16_t* dout, const std::uint16_t* probs, const std::uint8_t* keep,
                          float dropout_scale, float scale, std::int64_t C, std::uint16_t* grad, float* scratch);

// --- residual + dropout + LayerNorm over one row of H ----------------------------------------------------
// s = residual + x * (keep ? scale : 0), keep bits in `keep` keyed by element index `offset + j` as dropout();
// keep == nullptr: no dropout, s = residual + x. y = (s - mean) * rstd * gamma + beta with the biased variance
// (two passes: mean, then squared deviations) and rstd = 1 / sqrt(var + eps). `sum` receives s for the backward
// pass (nullptr in inference: y's storage serves); `y16`, when not nullptr, receives y rounded to bf16 too.
struct NormStats {
  float mean;
  float rstd;
};
NormStats add_norm_row_forward(const float* x, const float* residual, const float* gamma, const float* beta, float eps,
                               std::int64_t H, float* sum, float* y, std::uint16_t* y16, std::uint8_t* keep,
                               std::uint64_t offset, std::uint64_t seed, std::uint32_t keep_threshold, float scale);
NormStats add_norm_row_forward(const std::uint16_t* x, const float* residual, const float* gamma, const float* beta,
                               float eps, std::int64_t H, float* sum, float* y, std::uint16_t* y16, std::uint8_t* keep,
                               std::uint64_t offset, std::uint64_t seed, std::uint32_t keep_threshold, float scale);
// Backward of one row: xhat = (s - mean) * rstd, g = dy * gamma, ds = rstd * (g - mean(g) - xhat * mean(g * xhat))
// into d_sum (the residual's gradient); dx = ds * (keep ? scale : 0) (ds when keep == nullptr) in x's type, skipped
// when dx is nullptr; dgamma += dy * xhat and dbeta += dy (H floats each, the caller's per-thread sums).
void add_norm_row_backward(const float* dy, const float* sum, NormStats st, const float* gamma, std::int64_t H,
                           const std::uint8_t* keep, float scale, float* d_sum, float* dx, float* dgamma, float* dbeta);
void add_norm_row_backward(const float* dy, const float* sum, NormStats st, const float* gamma, std::int64_t H,
                           const std::uint8_t* keep, float scale, float* d_sum, std::uint16_t* dx, float* dgamma,
                           float* dbeta);

// --- non-finite check -------------------------------------------------------------------------------------
// True when no element is NaN or +-inf (x * 0 summed: 0 for finite values, NaN otherwise).
bool all_finite(const float* x, std::int64_t n);
bool all_finite(const std::uint16_t* x, std::int64_t n);  // bf16: exponent bits all ones means inf or NaN

// The keep decision's hash (exposed for tests: uniformity and independence from chunking).
std::uint32_t dropout_hash(std::uint64_t seed, std::uint64_t index);

}  // namespace bertx::ops::cpu
