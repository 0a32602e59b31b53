// bertx/ops.hpp - fused operators of the training step, with autograd, for models, tasks and plugins
// (library bertx::ops; bertx_add_plugin(... TORCH ...) links it). One dispatch point per operator: contiguous
// float32 / bfloat16 CPU tensors take bertx's fused CPU kernels (core/src/ops/cpu/kernels_cpu.cpp), anything
// else (CUDA, other dtypes) the equivalent LibTorch composition, so every device gets the same results up
// to rounding.
//  - cross_entropy: log-softmax + NLL + argmax accuracy in one pass over the logits forward and one writing
//    the gradient backward (LibTorch's path: log_softmax, its backward, nll_loss and a separate argmax,
//    each a full pass over (N, C) plus an fp32 copy of bf16 logits; for BERT's MLM head C = 30522).
//  - dropout / dropout_add: the keep mask comes from a counter-based hash of (seed, element index), the seed
//    drawn from the default CPU generator per call, so runs replay exactly from the generator's state (seeded
//    runs, resume from a checkpoint, activation checkpointing); the mask is kept as 1 byte per element (ATen
//    keeps a float tensor) and the residual add shares the pass.
//  - linear: x w^T + b (+ activation) on the CPU through oneDNN (its own JIT kernels for the CPU it runs on)
//    instead of LibTorch's BLAS: float32 training (forward and backward GEMMs) and float32 / bf16 inference
//    with bias and activation fused into the GEMM. Built when oneDNN is found.
//  - attention: multi-head attention on (B, S, H)-laid-out q, k, v with the heads read in place (oneDNN's strided
//    batched GEMMs on the CPU; no head transposes or contiguous copies), softmax through attention_softmax.
//  - add_layer_norm: residual add, dropout and LayerNorm in one pass per row (bf16 x read directly).
//  - attention_softmax: scale, additive mask, softmax (in float32, also for bf16 scores) and dropout of the
//    attention probabilities in one pass per row forward and one backward (LibTorch: four passes and a
//    float32 copy of bf16 scores).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "bertx/version.hpp"

namespace bertx::ops {

namespace onednn {
struct Packed;  // gemm_onednn.hpp
}

struct CrossEntropy {
  at::Tensor loss;      // 0-dim float32: mean over rows whose label != ignore_index (NaN when none, as torch)
  at::Tensor accuracy;  // 0-dim float32: share of those rows whose argmax is the label (0 when none); no gradient
};

// logits (N, C) floating point, labels (N) int64 in [0, C) or ignore_index. Differentiable in logits.
// A label outside [0, C) that is not ignore_index throws bertx::Error naming the row.
BERTX_EXPORT CrossEntropy cross_entropy(const at::Tensor& logits, const at::Tensor& labels, std::int64_t ignore_index);

// Training-mode dropout: each element kept with probability 1 - p and scaled by 1 / (1 - p). p in [0, 1].
BERTX_EXPORT at::Tensor dropout(const at::Tensor& x, double p);

// residual + dropout(x, p): a transformer sub-layer's output joining the residual stream. x and residual have
// the same shape; a bf16 x (autocast) onto a float32 residual gives float32, as `residual + x` would.
BERTX_EXPORT at::Tensor dropout_add(const at::Tensor& x, const at::Tensor& residual, double p);

// LayerNorm(residual + dropout(x, p)) over the last dimension H with the biased variance, in weight's dtype:
// a transformer sub-layer's output joining the residual stream (x may be the bf16 output of an autocast matmul,
// the result float32 as LibTorch's autocast LayerNorm gives). x and residual (..., H) of one shape, weight and
// bias (H); p in [0, 1), 0 for no dropout (the mask as dropout()'s). Differentiable in all four. CPU float32
// residual/weight/bias with a float32 or bf16 x: one fused pass forward (saving the sum, 1-byte keep bits and
// each row's mean and 1/std) and one backward; else LibTorch's composition. `bf16_copy`, when given, receives
// the result rounded to bf16 as well (written in the same pass without autograd): the input of the next bf16 GEMM.
BERTX_EXPORT at::Tensor add_layer_norm(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
                                       const at::Tensor& bias, double eps, double p, at::Tensor* bf16_copy = nullptr);

// dropout(softmax(scores * scale + mask), p) over the last dimension. scores (B, h, Sq, Sk); additive_mask
// (B, 1, 1, Sk) or (1, 1, 1, Sk) (0 keep, very negative drop) or undefined; p = 0 for no dropout. Returns
// probabilities in scores' dtype, differentiable in scores.
BERTX_EXPORT at::Tensor attention_softmax(const at::Tensor& scores, const at::Tensor& additive_mask, double scale,
                                          double p);

// The activation linear() applies to its output: exact (erf) GELU, tanh-approximated GELU, ReLU.
enum class Activation { none, gelu, gelu_tanh, relu };

// act(x (N, in) @ weight (out, in)^T + bias (out)) -> (N, out); bias may be undefined. Differentiable in x, weight
// and bias, as at::linear followed by the activation (no double backward on the oneDNN paths). With oneDNN
// (when bertx is built with it), on the CPU:
//  - under autograd, float32 outside autocast: oneDNN's sgemm forward and for both backward GEMMs;
//  - under autograd with bf16 autocast and float32 weights: x, weight and bias cast to bf16 as autocast would,
//    one bf16 matmul forward; backward the input gradient in x's dtype and the weight gradient in float32, both
//    written from the GEMM's float32 accumulator (autocast rounds them to bf16 first);
//  - without autograd (inference), float32, or bf16 weights with a bf16 or float32 x under bf16 autocast (or x and
//    weights both bf16): one oneDNN matmul with bias and activation fused, output in the weights' dtype;
// anything else (fp16, CUDA) at::linear and LibTorch's activation. The paths agree up to
// rounding (another GEMM's summation order; the fused activation sees the float32 accumulator). Shapes that do
// not fit throw bertx::Error.
BERTX_EXPORT at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                               Activation act = Activation::none);

// A linear layer's weight prepared once for CPU inference: converted to float32 or bf16 and reordered into the
// blocked layout oneDNN's GEMM kernels read (measured ~10% faster than the row-major weight at BERT-base shapes
// in bf16). A model keeps one per weight while the weight is unchanged (it is a copy). Needs oneDNN (available()).
class BERTX_EXPORT PackedWeight {
 public:
  static bool available();  // bertx was built with oneDNN
  // weight (out, in) CPU float32 or bf16; dtype kFloat or kBFloat16. Throws bertx::Error without oneDNN.
  PackedWeight(const at::Tensor& weight, at::ScalarType dtype);
  at::ScalarType dtype() const;
  std::int64_t out_features() const;
  std::int64_t in_features() const;
  const onednn::Packed& packed() const { return *packed_; }

 private:
  std::shared_ptr<const onednn::Packed> packed_;
};

// Inference (no gradient): act(x weight^T + bias) -> (N, out) in the weight's dtype; x (N, in) and bias (out, or
// undefined) CPU, cast to it. One oneDNN matmul with bias and activation fused.
BERTX_EXPORT at::Tensor linear(const at::Tensor& x, const PackedWeight& weight, const at::Tensor& bias,
                               Activation act = Activation::none);

// A linear layer's weight quantized for int8 inference (linear_int8.cpp): int8 values (out, in) and one float32
// scale per output channel, symmetric (w ~= q * scale[row], q in [-127, 127], scale = max|w_row| / 127; a zero row
// gets scale 1). Quantized once, from a float32 weight or from values and scales already stored (bertx quantize).
class BERTX_EXPORT QuantizedWeight {
 public:
  // weight (out, in) CPU float32 (or anything .to(float32) takes). Throws bertx::Error on another shape.
  explicit QuantizedWeight(const at::Tensor& weight);
  // values (out, in) int8 and scales (out) float32, CPU, as quantize() wrote them. Throws on shapes or dtypes.
  QuantizedWeight(const at::Tensor& values, const at::Tensor& scales);
  const at::Tensor& values() const { return values_; }  // (out, in) int8, contiguous
  const at::Tensor& scales() const { return scales_; }  // (out) float32
  std::int64_t out_features() const { return values_.size(0); }
  std::int64_t in_features() const { return values_.size(1); }
  at::Tensor dequantized() const;  // (out, in) float32: values * scales[:, None]

 private:
  at::Tensor values_, scales_;
};

// The activation levels int8 inference quantizes to on this CPU: x ~= (q - zero) * scale_row with |q - zero| <=
// levels, zero = levels + 1 (uint8). 127 where the CPU multiplies u8 x s8 exactly (VNNI, AMX); 63 otherwise (AVX2's
// vpmaddubsw adds pairs of products into saturating 16-bit sums: 2 x 63 x 127 < 2^15, as ONNX Runtime's and
// fbgemm's reduce_range). Fixed per process.
BERTX_EXPORT int int8_activation_levels();

// int8 inference (no gradient): act(x weight^T + bias) -> (N, out) float32. x (N, in) CPU float32 (bf16 is cast) is
// quantized per row (per token) at run time, symmetric, to int8_activation_levels(); one oneDNN u8 x s8 -> s32 GEMM;
// then one pass scales each int32 sum by its row's and column's scales and adds the bias, then the activation.
// Needs oneDNN (PackedWeight::available()); throws bertx::Error without it, on CUDA tensors or under autograd.
BERTX_EXPORT at::Tensor linear(const at::Tensor& x, const QuantizedWeight& weight, const at::Tensor& bias,
                               Activation act = Activation::none);

// The CPU instruction set oneDNN's GEMMs run on ("avx2", "avx512_core_vnni", "avx512_core_amx", ...; "" without
// oneDNN), for the run record beside gemm_library().
BERTX_EXPORT std::string gemm_isa();

// The GEMM linear() runs for float32 CPU tensors, for the run record: "oneDNN 2.6.3 (dnnl_sgemm, OpenMP)" or
// "LibTorch (at::linear)".
BERTX_EXPORT std::string gemm_library();

// Multi-head attention on q, k, v laid out (B, S, H) (heads side by side in H, as the projections produce
// them): context (B, S, H) = per head dropout(softmax(q k^T / sqrt(H / heads) + mask), p) v. additive_mask as
// attention_softmax's ((B, 1, 1, S), 0 keep / very negative drop) or undefined; p = 0 for no dropout.
// Differentiable in q, k, v. On the CPU with oneDNN (float32 / bf16) the heads are read and the context written
// in place through strides; elsewhere compat::attention on transposed views (SDPA on LibTorch 2.x).
BERTX_EXPORT at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::int64_t heads,
                                  const at::Tensor& additive_mask, double p);

// True when no element of any tensor is NaN or +-inf: one read-only pass per tensor (CPU float32/bf16
// contiguous tensors in bertx's kernel; others through isfinite().all()). Host synchronising.
BERTX_EXPORT bool all_finite(const std::vector<at::Tensor>& tensors);

}  // namespace bertx::ops
