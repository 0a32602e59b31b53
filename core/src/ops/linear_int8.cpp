// linear_int8.cpp - int8 inference linears (ops.hpp: QuantizedWeight, linear with a QuantizedWeight): dynamic
// quantization as ONNX Runtime's and PyTorch's, weights per output channel, activations per row at run time.
//   x (N, in) float32 -> per row r: scale_r = max|x_r| / L, q = round(x / scale_r) + zero   (N, in) uint8
//   acc (N, out) int32 = (q - zero) w_q^T                                                    oneDNN u8 x s8 GEMM
//   y (N, out) float32 = act(acc * scale_r * w_scale[c] + bias[c])                           one pass, then act
// L = int8_activation_levels() (127 with VNNI / AMX, 63 on AVX2: see ops.hpp). Rounding is half-to-even on
// x * (1 / scale_r) in float32, the arithmetic a PyTorch reference reproduces bit for bit (tests/real/int8_parity.py).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>

#include "bertx/error.hpp"
#include "bertx/ops.hpp"
#include "ops/onednn/gemm_onednn.hpp"

namespace bertx::ops {

namespace {

std::string shape(const at::Tensor& t) { return c10::str(t.sizes()) + " " + c10::toString(t.scalar_type()); }

// Rows per parallel task: enough work per task to amortise the task's start.
std::int64_t grain(std::int64_t cols) { return std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(cols, 1)); }

// x (N, K) float32 contiguous -> q (N, K) uint8 with |q - zero| <= levels, scales (N).
void quantize_rows(const float* x, std::int64_t N, std::int64_t K, int levels, std::uint8_t* q, float* scales) {
  const float zero = static_cast<float>(levels + 1), L = static_cast<float>(levels);
  at::parallel_for(0, N, grain(K), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * K;
      float m = 0.0f;
      for (std::int64_t k = 0; k < K; ++k) m = std::max(m, std::fabs(xr[k]));
      const float s = m > 0.0f && std::isfinite(m) ? m / L : 1.0f;
      const float inv = 1.0f / s;
      scales[r] = s;
      std::uint8_t* qr = q + r * K;
      for (std::int64_t k = 0; k < K; ++k) {
        const float r = std::nearbyint(xr[k] * inv);                   // half to even, as torch.round
        const float v = r == r ? std::min(std::max(r, -L), L) : 0.0f;  // a NaN input quantizes to 0, never UB
        qr[k] = static_cast<std::uint8_t>(v + zero);
      }
    }
  });
}

// y (N, M) = acc * row_scale[r] * col_scale[c] (+ bias[c]), float32.
void dequantize(const std::int32_t* acc, std::int64_t N, std::int64_t M, const float* row_scale, const float* col_scale,
                const float* bias, float* y) {
  at::parallel_for(0, N, grain(M), [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> s(static_cast<std::size_t>(M));
    for (std::int64_t r = r0; r < r1; ++r) {
      const float sr = row_scale[r];
      for (std::int64_t c = 0; c < M; ++c) s[c] = sr * col_scale[c];
      const std::int32_t* a = acc + r * M;
      float* yr = y + r * M;
      if (bias)
        for (std::int64_t c = 0; c < M; ++c) yr[c] = static_cast<float>(a[c]) * s[c] + bias[c];
      else
        for (std::int64_t c = 0; c < M; ++c) yr[c] = static_cast<float>(a[c]) * s[c];
    }
  });
}

void activate_(at::Tensor& y, Activation act) {
  switch (act) {
    case Activation::none:
      return;
    case Activation::gelu:
      at::gelu_(y);
      return;
    case Activation::gelu_tanh:
      at::gelu_(y, "tanh");
      return;
    case Activation::relu:
      at::relu_(y);
      return;
  }
}

}  // namespace

QuantizedWeight::QuantizedWeight(const at::Tensor& weight) {
  if (weight.dim() != 2 || !weight.device().is_cpu() || weight.size(0) == 0 || weight.size(1) == 0)
    throw Error("QuantizedWeight: expected a non-empty CPU weight (out, in), got " + shape(weight));
  at::NoGradGuard no_grad;
  const at::Tensor w = weight.to(at::kFloat).contiguous();                // (out, in)
  at::Tensor m = std::get<0>(w.abs().max(1));                             // (out)
  scales_ = at::where(m > 0, m / 127.0f, at::ones_like(m)).contiguous();  // (out)
  values_ = at::clamp(at::round(w / scales_.unsqueeze(1)), -127, 127).to(at::kChar).contiguous();
}

QuantizedWeight::QuantizedWeight(const at::Tensor& values, const at::Tensor& scales) {
  if (values.dim() != 2 || values.scalar_type() != at::kChar || !values.device().is_cpu() || values.size(0) == 0 ||
      values.size(1) == 0 || scales.dim() != 1 || scales.size(0) != values.size(0) ||
      scales.scalar_type() != at::kFloat || !scales.device().is_cpu())
    throw Error("QuantizedWeight: expected int8 values (out, in) and float32 scales (out) on the CPU, got " +
                shape(values) + " and " + shape(scales));
  if (!(scales > 0).all().item<bool>() || !at::isfinite(scales).all().item<bool>())
    throw Error("QuantizedWeight: every scale must be finite and > 0");
  values_ = values.contiguous();
  scales_ = scales.contiguous();
}

at::Tensor QuantizedWeight::dequantized() const { return values_.to(at::kFloat) * scales_.unsqueeze(1); }

int int8_activation_levels() {
  static const int levels = onednn::int8_exact_products() ? 127 : 63;
  return levels;
}

std::string gemm_isa() { return onednn::cpu_isa(); }

at::Tensor linear(const at::Tensor& x, const QuantizedWeight& weight, const at::Tensor& bias, Activation act) {
  RECORD_FUNCTION("bertx::ops::linear_int8", std::vector<c10::IValue>());
  const std::int64_t in = weight.in_features(), out = weight.out_features();
  if (x.dim() != 2 || x.size(1) != in || !x.device().is_cpu() ||
      (bias.defined() && (bias.dim() != 1 || bias.size(0) != out || !bias.device().is_cpu())))
    throw Error("ops::linear (int8): expected CPU x (N, " + std::to_string(in) + ") and bias (" + std::to_string(out) +
                ") for an int8 weight (" + std::to_string(out) + ", " + std::to_string(in) + "); got x " + shape(x) +
                (bias.defined() ? ", bias " + shape(bias) : std::string()));
  if (at::GradMode::is_enabled() && (x.requires_grad() || (bias.defined() && bias.requires_grad())))
    throw Error("ops::linear (int8): an int8 weight is for inference; run it under no_grad");
  if (!onednn::available())
    throw Error("ops::linear (int8): bertx was built without oneDNN (libdnnl-dev), which runs the int8 GEMMs");
  const std::int64_t N = x.size(0);
  at::Tensor y = at::empty({N, out}, x.options().dtype(at::kFloat));  // (N, out)
  if (N == 0) return y;
  const at::Tensor xc = x.to(at::kFloat).contiguous();
  const at::Tensor bc = bias.defined() ? bias.to(at::kFloat).contiguous() : at::Tensor();
  const int levels = int8_activation_levels();
  at::Tensor q = at::empty({N, in}, xc.options().dtype(at::kByte));    // (N, in) uint8
  at::Tensor row_scale = at::empty({N}, xc.options());                 // (N)
  at::Tensor acc = at::empty({N, out}, xc.options().dtype(at::kInt));  // (N, out) int32
  quantize_rows(xc.data_ptr<float>(), N, in, levels, q.data_ptr<std::uint8_t>(), row_scale.data_ptr<float>());
  onednn::gemm_u8s8s32(N, out, in, q.data_ptr<std::uint8_t>(), in, static_cast<std::uint8_t>(levels + 1),
                       weight.values().data_ptr<std::int8_t>(), in, acc.data_ptr<std::int32_t>(), out);
  dequantize(acc.data_ptr<std::int32_t>(), N, out, row_scale.data_ptr<float>(), weight.scales().data_ptr<float>(),
             bc.defined() ? bc.data_ptr<float>() : nullptr, y.data_ptr<float>());
  activate_(y, act);
  return y;
}

}  // namespace bertx::ops
