// bertx/compat.hpp - every difference between LibTorch 1.13 (Debian, CI) and LibTorch 2.x (CUDA users)
// lives here and nowhere else. Include it only from translation units that already use ATen.
//
//  - attention: 2.x has fused at::scaled_dot_product_attention (flash / memory-efficient kernels);
//    1.13 gets softmax(q k^T / sqrt(d) + mask) v with bertx::ops::attention_softmax (scale, mask, softmax in
//    float32 and dropout in one fused pass on the CPU; link bertx::ops).
//  - autocast: LibTorch 2.4 replaced set_cpu_enabled / set_autocast_cpu_dtype / set_enabled /
//    set_autocast_gpu_dtype with device-generic set_autocast_enabled / set_autocast_dtype.
//  - TF32: LibTorch 2.9 added per-backend float32 precision settings (setFloat32Precision) and rejects a mix of
//    them with the older setAllowTF32CuBLAS / CuDNN switches; used from 2.11, the version built and tested here.
#pragma once
#include <cmath>
#include <optional>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "bertx/ops.hpp"

#define BERTX_TORCH_AT_LEAST(MAJOR, MINOR) \
  (TORCH_VERSION_MAJOR > (MAJOR) || (TORCH_VERSION_MAJOR == (MAJOR) && TORCH_VERSION_MINOR >= (MINOR)))

namespace bertx::compat {

// True when attention() dispatches to LibTorch's fused kernel.
constexpr bool kFusedAttention = BERTX_TORCH_AT_LEAST(2, 0);

// Multi-head attention core. q, k, v: (B, heads, S, head_dim); additive_mask: broadcastable to
// (B, heads, S, S) with 0 for keep and a large negative for masked keys (or undefined for none).
// dropout_p applies to the attention probabilities (pass 0 in eval). Returns (B, heads, S, head_dim).
inline at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& additive_mask, double dropout_p) {
#if BERTX_TORCH_AT_LEAST(2, 0)
  std::optional<at::Tensor> mask;
  if (additive_mask.defined()) mask = additive_mask.to(q.scalar_type());
  return at::scaled_dot_product_attention(q, k, v, mask, dropout_p, /*is_causal=*/false);
#else
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1));  // (B, h, S, S), unscaled
  at::Tensor probs =
      ops::attention_softmax(scores, additive_mask, 1.0 / std::sqrt(static_cast<double>(q.size(-1))), dropout_p);
  return at::matmul(probs, v);  // (B, h, S, head_dim)
#endif
}

// TF32 for CUDA float32 matmuls and convolutions (cuBLAS, cuDNN) on or off: precision = "tf32" and the rest.
inline void set_cuda_tf32(bool enabled) {
#if BERTX_TORCH_AT_LEAST(2, 11)
  const auto p = enabled ? at::Float32Precision::TF32 : at::Float32Precision::IEEE;
  at::globalContext().setFloat32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL, p);
  at::globalContext().setFloat32Precision(at::Float32Backend::CUDA, at::Float32Op::CONV, p);
#else
  at::globalContext().setAllowTF32CuBLAS(enabled);
  at::globalContext().setAllowTF32CuDNN(enabled);
#endif
}

// Turns autocast on/off for one device type with the given lower-precision dtype (kBFloat16 / kHalf).
inline void set_autocast(at::DeviceType device, bool enabled, at::ScalarType dtype) {
#if BERTX_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, enabled);
  if (enabled) at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == at::kCPU) {
    at::autocast::set_cpu_enabled(enabled);
    if (enabled) at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_enabled(enabled);
    if (enabled) at::autocast::set_autocast_gpu_dtype(dtype);
  }
#endif
  if (!enabled) at::autocast::clear_cache();
}

// The autocast dtype active for a device type on this thread, or nullopt when autocast is off there.
inline std::optional<at::ScalarType> autocast_dtype(at::DeviceType device) {
#if BERTX_TORCH_AT_LEAST(2, 4)
  if (!at::autocast::is_autocast_enabled(device)) return std::nullopt;
  return at::autocast::get_autocast_dtype(device);
#else
  if (device == at::kCPU)
    return at::autocast::is_cpu_enabled() ? std::optional(at::autocast::get_autocast_cpu_dtype()) : std::nullopt;
  return at::autocast::is_enabled() ? std::optional(at::autocast::get_autocast_gpu_dtype()) : std::nullopt;
#endif
}

// RAII: autocast on for a scope (the seeds' `with autocast(...)`).
class AutocastScope {
 public:
  AutocastScope(at::DeviceType device, at::ScalarType dtype) : device_(device) { set_autocast(device, true, dtype); }
  ~AutocastScope() { set_autocast(device_, false, at::kFloat); }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  at::DeviceType device_;
};

}  // namespace bertx::compat
