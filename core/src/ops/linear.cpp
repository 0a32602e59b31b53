// linear.cpp - bertx::ops::linear (ops.hpp): the dispatch point; autograd functions around oneDNN (gemm_onednn.hpp)
// for CPU training in float32 (sgemm) and under bf16 autocast (matmul, float32 weight gradients); oneDNN's matmul
// with bias and activation fused for CPU inference (float32, bf16); at::linear + LibTorch's activation otherwise.
// Training forward: y = x w^T (+ b, copied into y first, as addmm does). Backward: dx = g w, dw = g^T x,
// db = sum_rows g, each computed only when its input needs it. Saves x and w (as addmm's autograd does).
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/autograd.h>

#include "bertx/compat.hpp"
#include "bertx/error.hpp"
#include "bertx/ops.hpp"
#include "ops/onednn/gemm_onednn.hpp"
#include "ops/ops_common.hpp"

namespace bertx::ops {

namespace {

using detail::ptr;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x (N, in), w (out, in), both row-contiguous float32; bias (out) or undefined -> (N, out).
at::Tensor forward_cpu(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  const std::int64_t N = x.size(0), in = x.size(1), out = w.size(0);
  const bool with_bias = bias.defined();
  if (N == 0 || out == 0 || in == 0)
    return with_bias ? bias.expand({N, out}).contiguous() : at::zeros({N, out}, x.options());
  at::Tensor y = with_bias ? bias.expand({N, out}).contiguous() : at::empty({N, out}, x.options());  // (N, out)
  onednn::sgemm(false, true, N, out, in, ptr<const float>(x), in, ptr<const float>(w), in, with_bias ? 1.0f : 0.0f,
                ptr<float>(y), out);
  return y;
}

// Shared by both functions below: gradients of x (N, in) and w (out, in) from g (N, out).
void backward_cpu(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w, bool need_x, bool need_w,
                  at::Tensor& dx, at::Tensor& dw) {
  const std::int64_t N = x.size(0), in = x.size(1), out = w.size(0);
  const bool empty = N == 0 || out == 0 || in == 0;
  if (need_x) {
    dx = empty ? at::zeros_like(x) : at::empty_like(x);  // (N, in) = g (N, out) @ w (out, in)
    if (!empty)
      onednn::sgemm(false, false, N, in, out, ptr<const float>(g), out, ptr<const float>(w), in, 0.0f, ptr<float>(dx),
                    in);
  }
  if (need_w) {
    dw = empty ? at::zeros_like(w) : at::empty_like(w);  // (out, in) = g^T (out, N) @ x (N, in)
    if (!empty)
      onednn::sgemm(true, false, out, in, N, ptr<const float>(g), out, ptr<const float>(x), in, 0.0f, ptr<float>(dw),
                    in);
  }
}

struct LinearBiasFn : torch::autograd::Function<LinearBiasFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
    ctx->save_for_backward({x, w});
    return forward_cpu(x, w, bias);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor g = grads[0].contiguous();
    at::Tensor dx, dw, db;
    backward_cpu(g, saved[0], saved[1], ctx->needs_input_grad(0), ctx->needs_input_grad(1), dx, dw);
    if (ctx->needs_input_grad(2)) db = g.sum(0);
    return {dx, dw, db};
  }
};

struct LinearFn : torch::autograd::Function<LinearFn> {  // no bias: apply() cannot take an undefined tensor in 1.13
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w) {
    ctx->save_for_backward({x, w});
    return forward_cpu(x, w, at::Tensor());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor dx, dw;
    backward_cpu(grads[0].contiguous(), saved[0], saved[1], ctx->needs_input_grad(0), ctx->needs_input_grad(1), dx, dw);
    return {dx, dw};
  }
};

// bf16 autocast training (weights float32, as autocast's master weights): y = x_bf16 w_bf16^T + b_bf16 in one
// oneDNN matmul, bf16 out (autocast's linear); backward dx = g w_bf16 in x's dtype (as autocast's cast node returns
// it; a float32 dx is written by the GEMM's float32 accumulator, a bf16 one rounded) and dw = g^T x_bf16 accumulated and written in
// float32 - autocast computes both in bf16 and casts them, so this is one rounding and one pass less each. db =
// sum_rows g in float32.
at::Tensor autocast_forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  const at::Tensor xb = x.to(at::kBFloat16).contiguous(), wb = w.to(at::kBFloat16).contiguous();  // (N, in), (out, in)
  const at::Tensor bb = bias.defined() ? bias.to(at::kBFloat16).contiguous() : at::Tensor();
  const std::int64_t N = xb.size(0), in = xb.size(1), out = wb.size(0);
  ctx->save_for_backward({xb, wb});
  ctx->saved_data["x_dtype"] = static_cast<std::int64_t>(x.scalar_type());
  at::Tensor y = at::empty({N, out}, xb.options());  // (N, out) bf16
  if (N == 0 || out == 0) return y;
  if (in == 0) return bb.defined() ? bb.expand({N, out}).contiguous() : y.zero_();
  onednn::matmul(true, N, out, in, xb.data_ptr(), wb.data_ptr(), bb.defined() ? bb.data_ptr() : nullptr,
                 onednn::Eltwise::none, y.data_ptr());
  return y;
}

// The products below are batches of one: the batch strides are the matrices' sizes (zero strides make oneDNN 2.6
// fall back to its reference kernel, ~100x slower).
variable_list autocast_backward(AutogradContext* ctx, const variable_list& grads, bool with_bias) {
  const variable_list saved = ctx->get_saved_variables();
  const at::Tensor &xb = saved[0], &wb = saved[1];
  const at::Tensor g = grads[0].to(at::kBFloat16).contiguous();  // (N, out)
  const std::int64_t N = xb.size(0), in = xb.size(1), out = wb.size(0);
  const bool empty = N == 0 || out == 0 || in == 0;
  at::Tensor dx, dw, db;
  if (ctx->needs_input_grad(0)) {
    // (N, in) = g (N, out) @ w (out, in), written in float32 straight from the accumulator for a float32 x (autocast
    // rounds it to bf16 and casts back), else in bf16 and cast.
    const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const bool f32 = x_dtype == at::kFloat;
    const at::TensorOptions o = xb.options().dtype(f32 ? at::kFloat : at::kBFloat16);
    dx = empty ? at::zeros({N, in}, o) : at::empty({N, in}, o);
    if (!empty)
      onednn::batched_matmul(true, 1, 1, N, in, out, g.data_ptr(), wb.data_ptr(), dx.data_ptr(),
                             {{N * out, N * out, out, 1}, {out * in, out * in, in, 1}, {N * in, N * in, in, 1}},
                             /*f32_out=*/f32);
    dx = dx.to(x_dtype);
  }
  if (ctx->needs_input_grad(1)) {
    const at::TensorOptions f32 = xb.options().dtype(at::kFloat);
    dw =
        empty ? at::zeros({out, in}, f32) : at::empty({out, in}, f32);  // (out, in) = g^T (out, N) @ x (N, in), float32
    if (!empty)
      onednn::batched_matmul(true, 1, 1, out, in, N, g.data_ptr(), xb.data_ptr(), dw.data_ptr(),
                             {{N * out, N * out, 1, out}, {N * in, N * in, in, 1}, {out * in, out * in, in, 1}},
                             /*f32_out=*/true);
  }
  if (with_bias && ctx->needs_input_grad(2)) db = at::sum(g, {0}, false, at::kFloat);
  return with_bias ? variable_list{dx, dw, db} : variable_list{dx, dw};
}

struct AutocastLinearBiasFn : torch::autograd::Function<AutocastLinearBiasFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
    return autocast_forward(ctx, x, w, bias);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return autocast_backward(ctx, grads, true);
  }
};

struct AutocastLinearFn : torch::autograd::Function<AutocastLinearFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w) {
    return autocast_forward(ctx, x, w, at::Tensor());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return autocast_backward(ctx, grads, false);
  }
};

bool is_cpu(const at::Tensor& t, at::ScalarType dtype) { return detail::cpu_kernel_input(t, dtype); }
bool is_cpu_float(const at::Tensor& t) { return is_cpu(t, at::kFloat); }

at::Tensor activate(const at::Tensor& y, Activation act) {
  switch (act) {
    case Activation::none:
      return y;
    case Activation::gelu:
      return at::gelu(y);
    case Activation::gelu_tanh:
      return at::gelu(y, "tanh");
    case Activation::relu:
      return at::relu(y);
  }
  return y;
}

onednn::Eltwise eltwise(Activation act) {
  switch (act) {
    case Activation::none:
      return onednn::Eltwise::none;
    case Activation::gelu:
      return onednn::Eltwise::gelu_erf;
    case Activation::gelu_tanh:
      return onednn::Eltwise::gelu_tanh;
    case Activation::relu:
      return onednn::Eltwise::relu;
  }
  return onednn::Eltwise::none;
}

// Inference through one fused oneDNN matmul, or an undefined tensor when the inputs are not for it: the weights'
// dtype decides (float32 outside autocast; bf16 with autocast bf16 or a bf16 x), x and bias are cast to it.
at::Tensor inference_cpu(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, Activation act) {
  const std::optional<at::ScalarType> autocast = compat::autocast_dtype(at::kCPU);
  at::ScalarType dt;
  if (is_cpu(weight, at::kFloat) && is_cpu(x, at::kFloat) && !autocast)
    dt = at::kFloat;
  else if (onednn::bf16_matmul() && is_cpu(weight, at::kBFloat16) &&
           (is_cpu(x, at::kBFloat16) || (is_cpu(x, at::kFloat) && autocast == at::kBFloat16)))
    dt = at::kBFloat16;
  else
    return at::Tensor();
  if (bias.defined() && !(bias.device().is_cpu() && bias.layout() == at::kStrided)) return at::Tensor();
  const std::int64_t N = x.size(0), in = x.size(1), out = weight.size(0);
  if (N == 0 || out == 0 || in == 0) return at::Tensor();
  const at::Tensor xc = x.to(dt).contiguous(), wc = weight.contiguous(),
                   bc = bias.defined() ? bias.to(dt).contiguous() : at::Tensor();
  at::Tensor y = at::empty({N, out}, xc.options());  // (N, out)
  onednn::matmul(dt == at::kBFloat16, N, out, in, xc.data_ptr(), wc.data_ptr(), bc.defined() ? bc.data_ptr() : nullptr,
                 eltwise(act), y.data_ptr());
  return y;
}

}  // namespace

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, Activation act) {
  RECORD_FUNCTION("bertx::ops::linear", std::vector<c10::IValue>());  // visible to profilers (--profile)
  if (x.dim() != 2 || weight.dim() != 2 || x.size(1) != weight.size(1) ||
      (bias.defined() && (bias.dim() != 1 || bias.size(0) != weight.size(0))))
    throw Error("ops::linear: expected x (N, in), weight (out, in), bias (out); got x " + c10::str(x.sizes()) +
                ", weight " + c10::str(weight.sizes()) +
                (bias.defined() ? ", bias " + c10::str(bias.sizes()) : std::string()));
  const bool grad = at::GradMode::is_enabled() &&
                    (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  if (onednn::available() && !grad)
    if (at::Tensor y = inference_cpu(x, weight, bias, act); y.defined()) return y;
  const std::optional<at::ScalarType> autocast = compat::autocast_dtype(at::kCPU);
  const bool float_weights = is_cpu_float(weight) && (!bias.defined() || is_cpu_float(bias));
  if (onednn::bf16_matmul() && grad && autocast == at::kBFloat16 && float_weights &&
      (is_cpu_float(x) || is_cpu(x, at::kBFloat16))) {
    return activate(bias.defined() ? AutocastLinearBiasFn::apply(x, weight, bias) : AutocastLinearFn::apply(x, weight),
                    act);
  }
  const bool fast = onednn::available() && grad && is_cpu_float(x) && float_weights && !autocast;
  if (!fast) return activate(at::linear(x, weight, bias), act);
  const at::Tensor xc = x.contiguous(), wc = weight.contiguous();
  return activate(bias.defined() ? LinearBiasFn::apply(xc, wc, bias) : LinearFn::apply(xc, wc), act);
}

bool PackedWeight::available() { return onednn::available(); }

PackedWeight::PackedWeight(const at::Tensor& weight, at::ScalarType dtype) {
  if (weight.dim() != 2 || !weight.device().is_cpu() ||
      (weight.scalar_type() != at::kFloat && weight.scalar_type() != at::kBFloat16) ||
      (dtype != at::kFloat && dtype != at::kBFloat16) || weight.size(0) == 0 || weight.size(1) == 0)
    throw Error("PackedWeight: expected a non-empty CPU float32/bf16 weight (out, in) and dtype float32/bf16, got " +
                c10::str(weight.sizes()) + " " + c10::toString(weight.scalar_type()) + " -> " + c10::toString(dtype));
  const at::Tensor w = weight.contiguous();
  // A CPU whose oneDNN has no bf16 matmul (AVX2 only) keeps the weight packed in float32: x is then cast to float32.
  const bool bf16 = dtype == at::kBFloat16 && onednn::bf16_matmul();
  packed_ = onednn::pack(bf16, w.size(0), w.size(1), w.data_ptr(), w.scalar_type() == at::kBFloat16);
}

at::ScalarType PackedWeight::dtype() const { return onednn::packed_bf16(*packed_) ? at::kBFloat16 : at::kFloat; }
std::int64_t PackedWeight::out_features() const { return onednn::packed_n(*packed_); }
std::int64_t PackedWeight::in_features() const { return onednn::packed_k(*packed_); }

at::Tensor linear(const at::Tensor& x, const PackedWeight& weight, const at::Tensor& bias, Activation act) {
  RECORD_FUNCTION("bertx::ops::linear", std::vector<c10::IValue>());
  const std::int64_t N = x.dim() == 2 ? x.size(0) : -1, in = weight.in_features(), out = weight.out_features();
  if (x.dim() != 2 || x.size(1) != in || !x.device().is_cpu() ||
      (bias.defined() && (bias.dim() != 1 || bias.size(0) != out)))
    throw Error("ops::linear: expected CPU x (N, " + std::to_string(in) + ") and bias (" + std::to_string(out) +
                ") for a packed weight (" + std::to_string(out) + ", " + std::to_string(in) + "); got x " +
                c10::str(x.sizes()) + (bias.defined() ? ", bias " + c10::str(bias.sizes()) : std::string()));
  if (at::GradMode::is_enabled() && (x.requires_grad() || (bias.defined() && bias.requires_grad())))
    throw Error("ops::linear: a packed weight is for inference; run it under no_grad (x or bias requires a gradient)");
  const at::ScalarType dt = weight.dtype();
  at::Tensor y = at::empty({N, out}, x.options().dtype(dt));  // (N, out)
  if (N == 0) return y;
  const at::Tensor xc = x.to(dt).contiguous(), bc = bias.defined() ? bias.to(dt).contiguous() : at::Tensor();
  onednn::matmul(weight.packed(), N, xc.data_ptr(), bc.defined() ? bc.data_ptr() : nullptr, eltwise(act), y.data_ptr());
  return y;
}

std::string gemm_library() { return onednn::available() ? onednn::library() : "LibTorch (at::linear)"; }

}  // namespace bertx::ops
