// test_ops.cpp - bertx::ops (fused cross-entropy, dropout, dropout_add) against LibTorch's compositions:
// values and gradients for float32 and bfloat16 on every device this LibTorch has (the CPU takes the fused
// kernels, CUDA the fallback), linear (oneDNN's sgemm) against a float64 reference, the ignore index, bad labels, NaN propagation, and the dropout masks'
// statistics, scaling, replay from the generator state and independence from the thread count.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/function.h>
#include <torch/cuda.h>

#include "doctest_torch.hpp"

#include "bertx/error.hpp"
#include "bertx/ops.hpp"
#include "bertx/compat.hpp"
#include "ops/attention_blocked.hpp"
#include "ops/onednn/gemm_onednn.hpp"
#include "ops/cpu/kernels_cpu.hpp"

namespace {

std::vector<at::Device> devices() {
  std::vector<at::Device> d{at::kCPU};
  if (torch::cuda::is_available()) d.emplace_back(at::kCUDA, 0);
  return d;
}

double max_abs(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Reference: LibTorch's cross_entropy on the float32 copy of the logits, and argmax accuracy.
struct Reference {
  double loss, accuracy;
  at::Tensor grad;
};
Reference reference(const at::Tensor& logits, const at::Tensor& labels, std::int64_t ignore) {
  at::Tensor l = logits.detach().clone().requires_grad_(true);
  at::Tensor loss = at::cross_entropy_loss(l.to(at::kFloat), labels, {}, at::Reduction::Mean, ignore);
  loss.backward();
  at::Tensor valid = labels.ne(ignore);
  const double hits = logits.argmax(-1).eq(labels).logical_and(valid).sum().item<double>();
  return {loss.item<double>(), hits / std::max(1.0, valid.sum().item<double>()), l.grad()};
}

}  // namespace

TEST_CASE("ops::cross_entropy equals log_softmax + nll_loss and argmax accuracy (device x dtype)") {
  for (const at::Device& device : devices())
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      CAPTURE(device.str());
      CAPTURE(std::string(c10::toString(dtype)));
      at::manual_seed(1);
      const std::int64_t N = 37, C = 1001;  // odd sizes: vector tails
      at::Tensor logits = (at::randn({N, C}) * 4).to(dtype).to(device);
      at::Tensor labels = at::randint(0, C, {N}, at::kLong);
      for (std::int64_t i = 0; i < N; i += 5) labels[i] = -100;  // ignored rows
      labels[1] = logits[1].argmax().item<std::int64_t>();       // at least one hit
      labels = labels.to(device);
      const Reference ref = reference(logits, labels, -100);

      at::Tensor x = logits.detach().clone().requires_grad_(true);
      bertx::ops::CrossEntropy ce = bertx::ops::cross_entropy(x, labels, -100);
      CHECK(ce.loss.dim() == 0);
      CHECK((ce.loss.scalar_type() == at::kFloat));
      CHECK(ce.loss.item<double>() == doctest::Approx(ref.loss).epsilon(1e-5));
      CHECK(ce.accuracy.item<double>() == doctest::Approx(ref.accuracy));
      CHECK(ref.accuracy > 0);
      (ce.loss * 3).backward();
      REQUIRE(x.grad().defined());
      CHECK((x.grad().scalar_type() == dtype));
      // float32: to rounding; bf16: within one bf16 rounding of the reference (which rounds before the x3).
      at::Tensor err =
          (x.grad().to(at::kDouble) - ref.grad.to(at::kDouble) * 3).abs() - ref.grad.to(at::kDouble).abs() * 3 * 8e-3;
      CHECK(err.max().item<double>() <= (dtype == at::kFloat ? 1e-7 : 1e-9));
      CHECK(x.grad()[0].abs().sum().item<double>() == 0.0);  // an ignored row gets no gradient
    }
}

TEST_CASE("ops::cross_entropy: large logits, no valid row, NaN rows, bad labels") {
  at::Tensor big = at::tensor({1e4f, -1e4f, 3e3f, 0.f, 1e4f - 1}).view({1, 5});
  at::Tensor label = at::tensor({std::int64_t{4}});
  CHECK(bertx::ops::cross_entropy(big, label, -100).loss.item<double>() ==
        doctest::Approx(reference(big, label, -100).loss));

  at::Tensor x = at::randn({3, 7}).requires_grad_(true);
  at::Tensor none = at::full({3}, -100, at::kLong);
  bertx::ops::CrossEntropy ce = bertx::ops::cross_entropy(x, none, -100);
  CHECK(std::isnan(ce.loss.item<double>()));  // torch's mean over zero targets
  CHECK(ce.accuracy.item<double>() == 0.0);

  at::Tensor nan = at::randn({2, 9});
  nan[1][4] = std::nanf("");
  CHECK(std::isnan(
      bertx::ops::cross_entropy(nan, at::tensor({std::int64_t{0}, std::int64_t{1}}), -100).loss.item<double>()));

  try {
    bertx::ops::cross_entropy(at::randn({2, 5}), at::tensor({std::int64_t{1}, std::int64_t{5}}), -100);
    FAIL("expected bertx::Error");
  } catch (const bertx::Error& e) {
    CHECK(std::string(e.what()).find("label 5 at row 1 is outside [0, 5)") != std::string::npos);
  }
  CHECK_THROWS_AS(bertx::ops::cross_entropy(at::randn({2, 5}), at::zeros({3}, at::kLong), -100), bertx::Error);
}

TEST_CASE("ops::dropout: keep rate, scaling, gradient, replay from the generator, thread count (dtype)") {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    CAPTURE(std::string(c10::toString(dtype)));
    const double p = 0.1;
    const std::int64_t n = 1 << 20;
    at::Tensor x = (at::rand({n}) + 0.5).to(dtype).requires_grad_(true);  // no zeros: y == 0 means dropped
    at::manual_seed(7);
    at::Tensor y = bertx::ops::dropout(x, p);
    at::Tensor kept = y.ne(0);
    const double rate = kept.to(at::kDouble).mean().item<double>();
    CHECK(std::abs(rate - (1 - p)) < 5 * std::sqrt(p * (1 - p) / n));  // within 5 sigma
    // Kept values are x * (1 / (1 - p)) as ATen's dropout computes them (rounded once in bf16), dropped ones 0.
    const auto scale = static_cast<float>(1 / (1 - p));
    at::Tensor expect = at::where(kept, (x.detach().to(at::kFloat) * scale).to(dtype), at::zeros_like(x));
    CHECK(max_abs(y, expect) == 0.0);
    y.backward(at::ones_like(y));
    CHECK(max_abs(x.grad(), at::where(kept, at::full_like(x, scale), at::zeros_like(x))) == 0.0);

    at::manual_seed(7);
    CHECK(at::equal(bertx::ops::dropout(x.detach(), p), y.detach()));        // same generator state, same mask
    CHECK_FALSE(at::equal(bertx::ops::dropout(x.detach(), p), y.detach()));  // the generator moved on
    const int threads = at::get_num_threads();
    at::set_num_threads(1);
    at::manual_seed(7);
    at::Tensor one_thread = bertx::ops::dropout(x.detach(), p);
    at::set_num_threads(threads);
    CHECK(at::equal(one_thread, y.detach()));
  }
  at::Tensor x = at::randn({4, 4});
  CHECK(bertx::ops::dropout(x, 0.0).is_same(x));
  CHECK(bertx::ops::dropout(x, 1.0).abs().sum().item<double>() == 0.0);
  CHECK_THROWS_AS(bertx::ops::dropout(x, 1.5), bertx::Error);
}

TEST_CASE("ops::dropout_add equals residual + dropout(x) with the same mask, also bf16 onto float32") {
  at::Tensor residual = at::randn({3, 50, 17}).requires_grad_(true);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    CAPTURE(std::string(c10::toString(dtype)));
    at::Tensor x = (at::rand({3, 50, 17}) + 0.5).to(dtype).requires_grad_(true);
    at::manual_seed(3);
    at::Tensor y = bertx::ops::dropout_add(x, residual, 0.25);
    CHECK((y.scalar_type() == at::kFloat));
    at::manual_seed(3);
    at::Tensor d = bertx::ops::dropout(x.detach(), 0.25);  // same seed draw: same mask
    // bf16: dropout_add adds x * scale unrounded, residual + dropout(x) rounds it to bf16 first (half an ulp).
    CHECK(max_abs(y, residual.detach() + d.to(at::kFloat)) <= (dtype == at::kFloat ? 1e-6 : 4e-3));
    y.backward(at::full_like(y, 2.0));
    CHECK(max_abs(residual.grad(), at::full_like(residual, 2.0)) == 0.0);
    CHECK((x.grad().scalar_type() == dtype));
    CHECK(max_abs(x.grad(), at::where(d.ne(0), at::full_like(d, 2.0 / 0.75), at::zeros_like(d))) <= 1e-6);
    residual.mutable_grad() = at::Tensor();
  }
  CHECK_THROWS_AS(bertx::ops::dropout_add(at::randn({2, 3}), at::randn({3, 2}), 0.1), bertx::Error);
}

TEST_CASE("dropout hash: uniform top bits, no correlation between neighbouring elements") {
  const int buckets = 16, n = 1 << 18;
  std::vector<double> count(buckets, 0);
  double same = 0;
  bool prev = false;
  for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(n); ++i) {
    const std::uint32_t h = bertx::ops::cpu::dropout_hash(0x1234567887654321ull, i);
    count[h >> 28] += 1;
    const bool keep = h < 0xE6666666u;  // p = 0.1
    if (i) same += keep == prev;
    prev = keep;
  }
  double chi2 = 0;
  for (double c : count) chi2 += (c - n / buckets) * (c - n / buckets) / (n / buckets);
  CHECK(chi2 < 40);  // 15 degrees of freedom: p < 0.001 beyond ~37.7
  // P(two neighbours agree) = 0.9^2 + 0.1^2 = 0.82 for independent draws.
  CHECK(std::abs(same / (n - 1) - 0.82) < 0.005);
}

TEST_CASE("ops::attention_softmax equals dropout(softmax(scores * scale + mask)) and its gradient (dtype)") {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16})
    for (const double p : {0.0, 0.2}) {
      CAPTURE(std::string(c10::toString(dtype)));
      CAPTURE(p);
      at::manual_seed(5);
      const std::int64_t B = 2, h = 3, S = 19, D = 8;
      at::Tensor scores = (at::randn({B, h, S, S}) * 3).to(dtype);
      at::Tensor keep_keys = at::ones({B, S});
      keep_keys[1].slice(0, 15).zero_();  // the second sequence's last 4 keys are padding
      at::Tensor mask = ((1 - keep_keys) * std::numeric_limits<float>::lowest()).view({B, 1, 1, S});
      const double scale = 1 / std::sqrt(double(D));

      at::Tensor x = scores.clone().requires_grad_(true);
      at::Tensor out = bertx::ops::attention_softmax(x, mask, scale, p);
      CHECK((out.scalar_type() == dtype));
      // Reference in float32 with the fused op's keep mask (an output of 0 where the probability is not 0).
      at::Tensor r = scores.to(at::kFloat).clone().requires_grad_(true);
      at::Tensor probs = at::softmax(r * scale + mask, -1);
      at::Tensor keep = p > 0 ? (out.ne(0).logical_or(probs.detach().eq(0))).to(at::kFloat) : at::ones_like(probs);
      at::Tensor ref = probs * keep / (1 - p);
      const double tol = dtype == at::kFloat ? 1e-6 : 1e-2;  // bf16: rounding of the stored probabilities
      CHECK(max_abs(out, ref) <= tol);
      CHECK(max_abs(out.to(at::kFloat).sum(-1).narrow(0, 1, 1), at::ones({1, h, S})) <= (p > 0 ? 1.0 : 2e-2));
      if (p > 0) {
        const double dropped = 1 - keep.mean().item<double>();
        CHECK(dropped > 0.1);
        CHECK(dropped < 0.35);
      }
      at::Tensor g = at::randn(out.sizes());
      out.backward(g.to(dtype));
      ref.backward(g.to(dtype).to(at::kFloat));
      CHECK(max_abs(x.grad(), r.grad()) <= (dtype == at::kFloat ? 1e-5 : 3e-2 * r.grad().abs().max().item<double>()));
    }
  {  // no mask (the unpadded encoder's per-sequence attention), under autograd
    at::Tensor x = at::randn({1, 2, 5, 5}).requires_grad_(true), r = x.detach().clone().requires_grad_(true);
    at::Tensor out = bertx::ops::attention_softmax(x, at::Tensor(), 0.5, 0.0), ref = at::softmax(r * 0.5, -1);
    CHECK(max_abs(out, ref) <= 1e-6);
    at::Tensor g = at::randn(out.sizes());
    out.backward(g);
    ref.backward(g);
    CHECK(max_abs(x.grad(), r.grad()) <= 1e-6);
  }
  CHECK_THROWS_AS(bertx::ops::attention_softmax(at::randn({2, 3}), at::Tensor(), 1.0, 0.0), bertx::Error);
  CHECK_THROWS_AS(bertx::ops::attention_softmax(at::randn({1, 1, 2, 2}), at::Tensor(), 1.0, 1.0), bertx::Error);
}

TEST_CASE("ops::all_finite finds one NaN or infinity anywhere (float32, bf16, non-contiguous)") {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    CAPTURE(std::string(c10::toString(dtype)));
    std::vector<at::Tensor> grads{at::randn({1000003}).to(dtype), at::randn({7, 3}).to(dtype)};
    CHECK(bertx::ops::all_finite(grads));
    for (const float bad :
         {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), std::nanf("")})
      for (const std::int64_t at : {std::int64_t{0}, std::int64_t{654321}, std::int64_t{1000002}}) {
        grads[0][at] = bad;
        CHECK_FALSE(bertx::ops::all_finite(grads));
        grads[0][at] = 1.0f;
      }
    grads[1][6][2] = std::nanf("");
    CHECK_FALSE(bertx::ops::all_finite(grads));
    CHECK_FALSE(bertx::ops::all_finite({grads[1].t()}));  // non-contiguous: LibTorch's isfinite path
  }
  CHECK(bertx::ops::all_finite({at::full({5}, 3e38f), at::Tensor()}));  // large but finite; undefined skipped
}

// A build that found oneDNN must use it: on the PyPI LibTorch through libbertx_onednn.so (RTLD_DEEPBIND), where a
// library that fails to open would otherwise only warn and leave the linears on LibTorch's slower GEMMs.
TEST_CASE("the oneDNN GEMMs are in use wherever the build found oneDNN") {
#if BERTX_EXPECT_ONEDNN
  CHECK(bertx::ops::onednn::available());
  CHECK(bertx::ops::gemm_library().rfind("oneDNN 2.", 0) == 0);
  MESSAGE("GEMMs: " << bertx::ops::gemm_library());
#else
  CHECK_FALSE(bertx::ops::onednn::available());
#endif
}

TEST_CASE("ops::linear equals x w^T + b and its gradients (bias or not, which inputs need gradients, layouts)") {
  for (const bool with_bias : {true, false})
    for (const int needs : {0b111, 0b110, 0b001, 0b010}) {  // bits: x, w, b need a gradient
      CAPTURE(with_bias);
      CAPTURE(needs);
      at::manual_seed(7);
      const std::int64_t N = 37, in = 70, out = 51;  // odd sizes: kernel tails
      at::Tensor x = at::randn({N, in}), w = at::randn({out, in}) * 0.1, b = at::randn({out});
      at::Tensor xv = x.clone().requires_grad_((needs & 1) != 0), wv = w.clone().requires_grad_((needs & 2) != 0),
                 bv = with_bias ? b.clone().requires_grad_((needs & 4) != 0) : at::Tensor();
      at::Tensor y = bertx::ops::linear(xv, wv, bv);
      at::Tensor xd = x.to(at::kDouble).requires_grad_(true), wd = w.to(at::kDouble).requires_grad_(true),
                 bd = b.to(at::kDouble).requires_grad_(true);
      at::Tensor ref = at::linear(xd, wd, with_bias ? bd : at::Tensor());
      CHECK((y.scalar_type() == at::kFloat));
      CHECK(max_abs(y, ref) <= 1e-5);
      if (bertx::ops::onednn::available() && y.requires_grad())  // the oneDNN autograd function ran, not addmm
        CHECK(y.grad_fn()->name().find("Addmm") == std::string::npos);
      if (!y.requires_grad()) continue;
      at::Tensor g = at::randn({N, out});
      y.backward(g);
      ref.backward(g.to(at::kDouble));
      if (xv.requires_grad()) CHECK(max_abs(xv.grad(), xd.grad()) <= 1e-5);
      if (wv.requires_grad()) CHECK(max_abs(wv.grad(), wd.grad()) <= 1e-4);
      if (with_bias && bv.requires_grad()) CHECK(max_abs(bv.grad(), bd.grad()) <= 1e-4);
      if (!xv.requires_grad()) CHECK_FALSE(xv.grad().defined());
      if (!wv.requires_grad()) CHECK_FALSE(wv.grad().defined());
    }
  at::manual_seed(8);
  {  // a transposed (non-contiguous) input, a zero-row batch, and the weight shared by two calls (tied decoder)
    at::Tensor xt = at::randn({9, 5}).t(), w = at::randn({3, 9}).requires_grad_(true);
    CHECK(max_abs(bertx::ops::linear(xt, w, at::Tensor()),
                  at::linear(xt.to(at::kDouble), w.detach().to(at::kDouble))) <= 1e-5);
    at::Tensor empty = bertx::ops::linear(at::randn({0, 9}), w, at::zeros({3}));
    CHECK(empty.sizes() == at::IntArrayRef({0, 3}));
    at::Tensor a = at::randn({4, 9}), c = at::randn({6, 9});
    (bertx::ops::linear(a, w, at::Tensor()).sum() + bertx::ops::linear(c, w, at::Tensor()).sum()).backward();
    CHECK(max_abs(w.grad(), a.sum(0).unsqueeze(0).expand({3, 9}) + c.sum(0).unsqueeze(0).expand({3, 9})) <= 1e-4);
  }
  {  // under CPU autocast the result is bf16, as at::linear's
    bertx::compat::AutocastScope autocast(at::kCPU, at::kBFloat16);
    at::Tensor y = bertx::ops::linear(at::randn({4, 8}), at::randn({2, 8}), at::randn({2}));
    CHECK((y.scalar_type() == at::kBFloat16));
  }
  CHECK((bertx::ops::gemm_library().rfind("oneDNN", 0) == 0) == bertx::ops::onednn::available());
  {  // under autograd an activation is applied after the GEMM
    at::Tensor x = at::randn({5, 8}).requires_grad_(true), w = at::randn({3, 8});
    at::Tensor y = bertx::ops::linear(x, w, at::Tensor(), bertx::ops::Activation::gelu);
    CHECK(max_abs(y, at::gelu(at::linear(x.detach().to(at::kDouble), w.to(at::kDouble)))) <= 1e-5);
    y.sum().backward();
    CHECK(x.grad().defined());
  }
  CHECK_THROWS_AS(bertx::ops::linear(at::randn({4, 8}), at::randn({2, 7}), at::Tensor()), bertx::Error);
  CHECK_THROWS_AS(bertx::ops::linear(at::randn({4, 8}), at::randn({2, 8}), at::randn({3})), bertx::Error);
}

TEST_CASE("ops::linear in inference: bias and activation fused, float32 and bf16 (autocast, bf16 weights)") {
  using bertx::ops::Activation;
  at::manual_seed(9);
  const std::int64_t N = 45, in = 96, out = 130;
  at::Tensor x = at::randn({N, in}), w = at::randn({out, in}) * 0.2, b = at::randn({out});
  at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble), bd = b.to(at::kDouble);
  for (const Activation act : {Activation::none, Activation::gelu, Activation::gelu_tanh, Activation::relu})
    for (const bool with_bias : {true, false}) {
      CAPTURE(static_cast<int>(act));
      CAPTURE(with_bias);
      at::Tensor ref = at::linear(xd, wd, with_bias ? bd : at::Tensor());
      ref = act == Activation::gelu        ? at::gelu(ref)
            : act == Activation::gelu_tanh ? at::gelu(ref, "tanh")
            : act == Activation::relu      ? at::relu(ref)
                                           : ref;
      at::NoGradGuard no_grad;
      at::Tensor y = bertx::ops::linear(x, w, with_bias ? b : at::Tensor(), act);  // float32
      CHECK((y.scalar_type() == at::kFloat));
      CHECK(max_abs(y, ref) <= 1e-4);
      // bf16: x rounded to bf16 (autocast casts it) against bf16 weights; float32 accumulation, one bf16 rounding
      // of the output (|y| < ~10 here: half an ulp is <= 0.03) plus the inputs' rounding
      at::Tensor wb = w.to(at::kBFloat16), bb = b.to(at::kBFloat16);
      at::Tensor refb = at::linear(x.to(at::kBFloat16).to(at::kDouble), wb.to(at::kDouble),
                                   with_bias ? bb.to(at::kDouble) : at::Tensor());
      refb = act == Activation::gelu        ? at::gelu(refb)
             : act == Activation::gelu_tanh ? at::gelu(refb, "tanh")
             : act == Activation::relu      ? at::relu(refb)
                                            : refb;
      {
        bertx::compat::AutocastScope autocast(at::kCPU, at::kBFloat16);
        at::Tensor yb = bertx::ops::linear(x, wb, with_bias ? bb : at::Tensor(), act);
        CHECK((yb.scalar_type() == at::kBFloat16));
        CHECK(max_abs(yb, refb) <= 0.05);
      }
      at::Tensor yb =
          bertx::ops::linear(x.to(at::kBFloat16), wb, with_bias ? bb : at::Tensor(), act);  // bf16 weights, no autocast
      CHECK((yb.scalar_type() == at::kBFloat16));
      CHECK(max_abs(yb, refb) <= 0.05);
    }
  at::NoGradGuard no_grad;
  CHECK(bertx::ops::linear(at::randn({0, in}), w, b).sizes() == at::IntArrayRef({0, out}));
  CHECK(max_abs(bertx::ops::linear(x.t().contiguous().t(), w, b), at::linear(xd, wd, bd)) <= 1e-4);  // column-major x
}

TEST_CASE("ops::linear with a PackedWeight equals the row-major weight's result (bf16, float32, any M)") {
  using bertx::ops::Activation;
  if (!bertx::ops::PackedWeight::available()) {
    CHECK_THROWS_AS(bertx::ops::PackedWeight(at::randn({3, 4}), at::kBFloat16), bertx::Error);
    return;
  }
  at::manual_seed(10);
  const std::int64_t in = 96, out = 130;
  at::Tensor w = at::randn({out, in}) * 0.2, b = at::randn({out});
  at::NoGradGuard no_grad;
  for (const at::ScalarType dt : {at::kBFloat16, at::kFloat}) {
    CAPTURE(std::string(c10::toString(dt)));
    const bertx::ops::PackedWeight packed(w, dt);  // from the float32 weight: conversion and layout in one reorder
    // Where oneDNN has no bf16 matmul (an AVX2-only CPU) a bf16 request is packed and computed in float32.
    const at::ScalarType computed = dt == at::kBFloat16 && !bertx::ops::onednn::bf16_matmul() ? at::kFloat : dt;
    MESSAGE("oneDNN bf16 matmul on this CPU: " << bertx::ops::onednn::bf16_matmul());
    CHECK((packed.dtype() == computed));
    CHECK(packed.out_features() == out);
    CHECK(packed.in_features() == in);
    for (const std::int64_t N : {std::int64_t{1}, std::int64_t{7}, std::int64_t{165}, std::int64_t{0}})
      for (const Activation act : {Activation::none, Activation::gelu}) {
        CAPTURE(N);
        at::Tensor x = at::randn({N, in}).to(dt);
        at::Tensor y = bertx::ops::linear(x, packed, b, act);
        at::Tensor ref = bertx::ops::linear(x, w.to(dt), b.to(dt), act);  // row-major weight, same dtype
        CHECK((y.scalar_type() == computed));
        CHECK(y.sizes() == at::IntArrayRef({N, out}));
        if (N > 0) CHECK(max_abs(y, ref) <= (dt == at::kFloat ? 1e-4 : 0.05));
      }
  }
  const bertx::ops::PackedWeight packed(w, at::kBFloat16);
  CHECK_THROWS_AS(bertx::ops::linear(at::randn({2, in + 1}), packed, b), bertx::Error);
  CHECK_THROWS_AS(bertx::ops::PackedWeight(at::randn({3, 4}).to(at::kDouble), at::kBFloat16), bertx::Error);
  {
    at::GradMode::set_enabled(true);
    CHECK_THROWS_AS(bertx::ops::linear(at::randn({2, in}).requires_grad_(true), packed, b), bertx::Error);
    at::GradMode::set_enabled(false);
  }
}

TEST_CASE(
    "ops::attention equals softmax(q k^T / sqrt(d) + mask) v per head, and its gradients (dtype, strided inputs)") {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16})
    for (const bool fused_qkv : {false, true}) {  // q, k, v as column slices of one (B, S, 3H) tensor: row stride 3H
      CAPTURE(std::string(c10::toString(dtype)));
      CAPTURE(fused_qkv);
      at::manual_seed(11);
      const std::int64_t B = 2, S = 13, h = 3, d = 8, H = h * d;
      at::Tensor base = at::randn({B, S, 3 * H}).to(dtype);
      at::Tensor qkv = fused_qkv ? base.detach().requires_grad_(true) : at::Tensor();
      auto input = [&](int i) {
        return fused_qkv ? qkv.narrow(2, i * H, H) : base.narrow(2, i * H, H).contiguous().requires_grad_(true);
      };
      at::Tensor q = input(0), k = input(1), v = input(2);
      at::Tensor keep = at::ones({B, S});
      keep[1].slice(0, 10).zero_();  // the second sequence's last 3 keys are padding
      at::Tensor mask = ((1 - keep) * std::numeric_limits<float>::lowest()).view({B, 1, 1, S});
      at::Tensor out = bertx::ops::attention(q, k, v, h, mask, 0.0);
      CHECK((out.scalar_type() == dtype));
      CHECK(out.sizes() == at::IntArrayRef({B, S, H}));
      // Reference in float64 on (B, h, S, d) views.
      at::Tensor r = base.to(at::kDouble).requires_grad_(true);
      auto heads = [&](int i) { return r.narrow(2, i * H, H).view({B, S, h, d}).transpose(1, 2); };
      at::Tensor scores =
          at::matmul(heads(0), heads(1).transpose(-2, -1)) / std::sqrt(double(d)) + mask.to(at::kDouble);
      at::Tensor ref = at::matmul(at::softmax(scores, -1), heads(2)).transpose(1, 2).reshape({B, S, H});
      const double tol = dtype == at::kFloat ? 1e-5 : 3e-2;
      CHECK(max_abs(out, ref) <= tol);
      at::Tensor g = at::randn({B, S, H});
      out.backward(g.to(dtype));
      ref.backward(g.to(at::kDouble));
      at::Tensor grad = fused_qkv ? qkv.grad() : at::cat({q.grad(), k.grad(), v.grad()}, 2);
      const double gtol = dtype == at::kFloat ? 1e-4 : 4e-2 * r.grad().abs().max().item<double>();
      CHECK(max_abs(grad, r.grad()) <= gtol);
    }
  {  // inference (no autograd) and a head count that does not divide H
    at::NoGradGuard no_grad;
    at::Tensor q = at::randn({1, 5, 8}), k = at::randn({1, 5, 8}), v = at::randn({1, 5, 8});
    at::Tensor ref = at::matmul(at::softmax(at::matmul(q, k.transpose(1, 2)) / std::sqrt(8.0), -1), v);  // one head
    CHECK(max_abs(bertx::ops::attention(q, k, v, 1, at::Tensor(), 0.0), ref) <= 1e-5);
    CHECK_THROWS_AS(bertx::ops::attention(q, k, v, 3, at::Tensor(), 0.0), bertx::Error);
  }
}

TEST_CASE(
    "cpu::softmax_row_exp: exp(x * scale + mask - max) to ~1 ulp, masked entries exactly 0, NaN kept, bf16 rounding") {
  for (const std::int64_t C : {1, 15, 16, 31, 32, 33, 100, 384}) {  // tail only, full vectors, pairs of them, mixed
    CAPTURE(C);
    at::manual_seed(C);
    // x * scale + mask - max exact in float32 (multiples of 1/64, scale a power of two): only exp's error is measured
    const at::Tensor x0 = (at::randn({C}) * 30 * 64).round() / 64, mask = at::zeros({C});
    if (C > 2) mask[1] = std::numeric_limits<float>::lowest();
    const float scale = 0.5f;
    const at::Tensor z = x0.to(at::kDouble) * scale + mask.to(at::kDouble);
    const at::Tensor ref = (z - z.max()).exp();  // (C) float64
    at::Tensor x = x0.clone();
    const float sum = bertx::ops::cpu::softmax_row_exp(x.data_ptr<float>(), mask.data_ptr<float>(), scale, C, nullptr);
    CHECK(((x.to(at::kDouble) - ref).abs() <= 4e-7 * ref + 1e-30).all().item<bool>());  // relative, float32 exp
    CHECK(std::abs(sum - ref.sum().item<double>()) <= 1e-6 * ref.sum().item<double>());
    if (C > 2) CHECK(x[1].item<float>() == 0.0f);
    at::Tensor e = at::empty({C}, at::kBFloat16), x2 = x0.clone();
    bertx::ops::cpu::softmax_row_exp(x2.data_ptr<float>(), mask.data_ptr<float>(), scale, C,
                                     reinterpret_cast<std::uint16_t*>(e.data_ptr()));
    CHECK(at::equal(e, x.to(at::kBFloat16)));  // the float32 result rounded by c10, bit for bit
  }
  at::Tensor x = at::zeros({40}), mask = at::zeros({40});
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[35] = std::numeric_limits<float>::quiet_NaN();               // one in the vector body, one in the tail
  mask[5] = mask[36] = -std::numeric_limits<float>::infinity();  // an -inf mask gives exactly 0, also in the tail
  bertx::ops::cpu::softmax_row_exp(x.data_ptr<float>(), mask.data_ptr<float>(), 1.0f, 40, nullptr);
  CHECK(std::isnan(x[3].item<float>()));
  CHECK(std::isnan(x[35].item<float>()));
  CHECK(x[0].item<float>() == 1.0f);
  CHECK(x[5].item<float>() == 0.0f);
  CHECK(x[36].item<float>() == 0.0f);
}

TEST_CASE(
    "ops::attention in inference (blocked per head) equals float64 softmax(q k^T / sqrt(d) + mask) v (dtype, S, "
    "mask)") {
  at::NoGradGuard no_grad;
  const int threads = at::get_num_threads();
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16})
    for (const std::int64_t S : {13, 257, 300})  // one block; two blocks of 129 + 128 rows; two of 150
      if (dtype == at::kBFloat16 && !bertx::ops::onednn::bf16_matmul()) {
        MESSAGE("bf16 skipped: oneDNN has no bf16 matmul on this CPU (ops::attention takes LibTorch's path there)");
      } else
        for (const int mask_kind :
             {0, 1, 2, 3}) {  // none; per sequence (B, 1, 1, S); shared (1, 1, 1, S); per query (B, 1, S, S)
          CAPTURE(std::string(c10::toString(dtype)));
          CAPTURE(S);
          CAPTURE(mask_kind);
          at::manual_seed(5);
          const std::int64_t B = 3, h = 2, d = 32, H = h * d;
          const at::Tensor qkv = (at::randn({B, S, 3 * H}) * 2).to(dtype);  // q, k, v: column views, row stride 3H
          const at::Tensor q = qkv.narrow(2, 0, H), k = qkv.narrow(2, H, H), v = qkv.narrow(2, 2 * H, H);
          at::Tensor keep = at::ones({B, S});
          keep[1].slice(0, S - 5).zero_();  // padding at the end of sequence 1, at the start of sequence 2
          keep[2].slice(0, 0, 3).zero_();
          at::Tensor mask;
          if (mask_kind == 1) mask = ((1 - keep) * std::numeric_limits<float>::lowest()).view({B, 1, 1, S});
          if (mask_kind == 2) mask = ((1 - keep[1]) * -10000.0f).view({1, 1, 1, S});
          if (mask_kind == 3) mask = at::randn({B, 1, S, S});
          const at::Tensor out = bertx::ops::attention(q, k, v, h, mask, 0.0);
          CHECK((out.scalar_type() == dtype));
          const at::Tensor r = qkv.to(at::kDouble);
          auto heads = [&](int i) { return r.narrow(2, i * H, H).view({B, S, h, d}).transpose(1, 2); };
          at::Tensor scores = at::matmul(heads(0), heads(1).transpose(-2, -1)) / std::sqrt(double(d));
          if (mask.defined()) scores = scores + mask.to(at::kDouble);
          const at::Tensor ref = at::matmul(at::softmax(scores, -1), heads(2)).transpose(1, 2).reshape({B, S, H});
          // bf16: the blocked path rounds the probabilities once (2^-9); the batched one also the scores (|z| ~ 16 here)
          const double tol =
              dtype == at::kFloat ? 2e-5 : (mask_kind == 3 ? 5e-2 : 1e-2) * ref.abs().max().item<double>();
          CHECK(max_abs(out, ref) <= tol);
          // a per-query mask takes the batched path; without oneDNN there is no blocked path
          if (mask_kind == 3 || !bertx::ops::onednn::available()) continue;
          at::Tensor rows;
          if (mask.defined()) rows = mask.reshape({mask.size(0), S}).contiguous();
          const at::Tensor blocked =
              bertx::ops::detail::attention_blocked(q, k, v, h, rows, 1.0 / std::sqrt(double(d)));
          CHECK(at::equal(blocked, out));  // ops::attention took the blocked path
          at::set_num_threads(1);
          const at::Tensor one = bertx::ops::attention(q, k, v, h, mask, 0.0);
          at::set_num_threads(threads);
          CHECK(at::equal(one, out));  // the same bits on one thread
        }
}

TEST_CASE(
    "ops::linear under bf16 autocast with autograd: bf16 output, gradients against float64 on the bf16-rounded "
    "inputs") {
  for (const bool with_bias : {true, false})
    for (const bool x_bf16 : {false, true}) {
      CAPTURE(with_bias);
      CAPTURE(x_bf16);
      at::manual_seed(12);
      const std::int64_t N = 33, in = 72, out = 41;
      at::Tensor x0 = at::randn({N, in}), w0 = at::randn({out, in}) * 0.2, b0 = at::randn({out});
      at::Tensor x = (x_bf16 ? x0.to(at::kBFloat16) : x0).requires_grad_(true), w = w0.clone().requires_grad_(true),
                 b = with_bias ? b0.clone().requires_grad_(true) : at::Tensor();
      at::Tensor y;
      {
        bertx::compat::AutocastScope autocast(at::kCPU, at::kBFloat16);
        y = bertx::ops::linear(x, w, b, bertx::ops::Activation::gelu);
      }
      CHECK((y.scalar_type() == at::kBFloat16));
      // float64 reference on the values autocast computes with (inputs rounded to bf16)
      auto rounded = [](const at::Tensor& t) {
        return t.detach().to(at::kBFloat16).to(at::kDouble).requires_grad_(true);
      };
      at::Tensor xr = rounded(x0), wr = rounded(w0), br = rounded(b0);
      at::Tensor ref = at::gelu(at::linear(xr, wr, with_bias ? br : at::Tensor()));
      CHECK(max_abs(y, ref) <= 0.05);
      at::Tensor g = at::randn({N, out});
      y.backward(g.to(at::kBFloat16));
      ref.backward(g.to(at::kBFloat16).to(at::kDouble));
      CHECK((x.grad().scalar_type() == x.scalar_type()));
      CHECK((w.grad().scalar_type() == at::kFloat));
      CHECK(max_abs(x.grad(), xr.grad()) <= 0.02 * xr.grad().abs().max().item<double>());
      CHECK(max_abs(w.grad(), wr.grad()) <= 0.02 * wr.grad().abs().max().item<double>());
      if (with_bias) CHECK(max_abs(b.grad(), br.grad()) <= 0.02 * br.grad().abs().max().item<double>());
      if (bertx::ops::onednn::bf16_matmul()) {  // the oneDNN function ran, not autocast's addmm
        bertx::compat::AutocastScope autocast(at::kCPU, at::kBFloat16);
        CHECK(bertx::ops::linear(x, w, b).grad_fn()->name().find("Addmm") == std::string::npos);
      }
    }
}

TEST_CASE(
    "ops::add_layer_norm equals LayerNorm(residual + dropout(x)) in float64 and its gradients (x dtype, dropout)") {
  const std::int64_t H = 37;  // not a multiple of the kernels' 16 lanes
  at::manual_seed(11);
  const at::Tensor w0 = at::randn({H}) * 0.5 + 1.0, b0 = at::randn({H}) * 0.1;
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16})
    for (const double p : {0.0, 0.3}) {
      CAPTURE(std::string(c10::toString(dtype)));
      CAPTURE(p);
      // Rows with a large common offset: a one-pass variance would lose them.
      at::Tensor residual = (at::randn({3, 5, H}) + 300.0).requires_grad_(true);
      at::Tensor x = at::randn({3, 5, H}).to(dtype).requires_grad_(true);
      at::Tensor w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
      at::manual_seed(5);
      at::Tensor y = bertx::ops::add_layer_norm(x, residual, w, b, 1e-12, p);
      CHECK((y.scalar_type() == at::kFloat));
      at::manual_seed(5);  // the same seed draw: ops::dropout's mask
      const at::Tensor kept =
          p > 0 ? bertx::ops::dropout(at::ones_like(x.detach(), at::kFloat), p) : at::ones_like(x.detach(), at::kFloat);
      // Reference in float64 on the same (bf16-rounded) x with the same mask.
      at::Tensor xr = x.detach().to(at::kDouble).requires_grad_(true),
                 rr = residual.detach().to(at::kDouble).requires_grad_(true);
      at::Tensor wr = w0.to(at::kDouble).requires_grad_(true), br = b0.to(at::kDouble).requires_grad_(true);
      at::Tensor ref = at::layer_norm(rr + xr * kept.to(at::kDouble), {H}, wr, br, 1e-12);
      CHECK(max_abs(y, ref) <= 2e-4);
      const at::Tensor g = at::randn_like(ref);
      y.backward(g.to(at::kFloat));
      ref.backward(g);
      CHECK(max_abs(residual.grad(), rr.grad()) <= 2e-3);
      CHECK((x.grad().scalar_type() == dtype));
      CHECK(max_abs(x.grad(), xr.grad()) <= (dtype == at::kFloat ? 2e-3 : 2e-2));
      CHECK(max_abs(w.grad(), wr.grad()) <= 2e-3);
      CHECK(max_abs(b.grad(), br.grad()) <= 1e-4);
      CHECK(max_abs(b.grad(), g.sum(std::vector<std::int64_t>{0, 1})) <=
            1e-4);  // dbeta = sum of dy: a hand-derived value
    }
}

TEST_CASE(
    "ops::add_layer_norm: inference writes the bf16 copy in the same pass, weight gradients independent of threads") {
  const std::int64_t H = 64;
  const at::Tensor residual = at::randn({70, H}), x = at::randn({70, H}).to(at::kBFloat16), w = at::randn({H}),
                   b = at::randn({H});
  at::Tensor y, y16;
  {
    at::NoGradGuard no_grad;
    y = bertx::ops::add_layer_norm(x, residual, w, b, 1e-5, 0.0, &y16);
  }
  CHECK(max_abs(y, at::layer_norm(residual + x.to(at::kFloat), {H}, w, b, 1e-5)) <= 1e-4);
  REQUIRE(y16.defined());
  CHECK((y16.scalar_type() == at::kBFloat16));
  CHECK(at::equal(y16, y.to(at::kBFloat16)));  // the copy is y rounded, bit for bit

  auto weight_grads = [&](int threads) {
    const int before = at::get_num_threads();
    at::set_num_threads(threads);
    at::Tensor wg = w.clone().requires_grad_(true), bg = b.clone().requires_grad_(true);
    at::Tensor out = bertx::ops::add_layer_norm(x, residual, wg, bg, 1e-5, 0.0);
    out.backward(at::linspace(-1, 1, out.numel()).view(out.sizes()));
    at::set_num_threads(before);
    return std::make_pair(wg.grad(), bg.grad());
  };
  const auto one = weight_grads(1), two = weight_grads(2);
  CHECK(at::equal(one.first, two.first));
  CHECK(at::equal(one.second, two.second));
}

TEST_CASE("ops::add_layer_norm: constant rows, the LibTorch fallback, bad shapes and probabilities") {
  const std::int64_t H = 8;
  const at::Tensor w = at::randn({H}), b = at::randn({H});
  // A constant row has variance 0: the output is the bias (rstd = 1 / sqrt(eps) times a zero deviation).
  const at::Tensor y = bertx::ops::add_layer_norm(at::full({2, H}, 3.0), at::full({2, H}, 4.0), w, b, 1e-12, 0.0);
  CHECK(max_abs(y, b.expand({2, H})) == 0.0);
  // bf16 weights: not the fused path (LibTorch's composition), same maths.
  const at::Tensor r = at::randn({4, H}), x = at::randn({4, H});
  const at::Tensor yb = bertx::ops::add_layer_norm(x.to(at::kBFloat16), r.to(at::kBFloat16), w.to(at::kBFloat16),
                                                   b.to(at::kBFloat16), 1e-5, 0.0);
  CHECK((yb.scalar_type() == at::kBFloat16));
  CHECK(max_abs(yb, at::layer_norm(r + x, {H}, w, b, 1e-5)) <= 0.1);
  CHECK_THROWS_AS(bertx::ops::add_layer_norm(at::randn({4, H}), at::randn({4, H + 1}), w, b, 1e-5, 0.0), bertx::Error);
  CHECK_THROWS_AS(bertx::ops::add_layer_norm(at::randn({4, H + 1}), at::randn({4, H + 1}), w, b, 1e-5, 0.0),
                  bertx::Error);
  CHECK_THROWS_AS(bertx::ops::add_layer_norm(x, r, w, b, 1e-5, 1.0), bertx::Error);
}

TEST_CASE(
    "oneDNN: a primitive resolved to the reference kernel is counted (and warned about), JIT-kernel shapes are not") {
  if (!bertx::ops::onednn::bf16_matmul()) {
    MESSAGE("skipped: oneDNN has no bf16 matmul on this CPU (AVX2 only)");
    return;
  }
  namespace dn = bertx::ops::onednn;
  const std::int64_t M = 8, N = 16, K = 32;
  // bf16 1.0 and 0.5; float32 output (f32_out), as the bf16 linear's weight gradient.
  std::vector<std::uint16_t> a(M * K, 0x3F80), b(K * N, 0x3F00);
  std::vector<float> c(M * N, 0.0f);
  const std::int64_t before = dn::reference_kernels();
  // A read transposed (A (M, K) stored (K, M)) and batch strides of the matrices' sizes: a JIT kernel.
  dn::batched_matmul(true, 1, 1, M, N, K, a.data(), b.data(), c.data(),
                     {{M * K, M * K, 1, M}, {K * N, K * N, N, 1}, {M * N, M * N, N, 1}},
                     /*f32_out=*/true);
  CHECK(dn::reference_kernels() == before);
  CHECK(c[0] == doctest::Approx(16.0));  // K * 1 * 0.5
  // Zero batch strides and C written transposed: oneDNN 2.6 reads the layouts as "dcab" and falls back to its
  // reference kernel (zero batch strides were the slowdown 777e45d fixed).
  std::fill(c.begin(), c.end(), 0.0f);
  dn::batched_matmul(true, 1, 1, M, N, K, a.data(), b.data(), c.data(), {{0, 0, 1, M}, {0, 0, N, 1}, {0, 0, 1, M}},
                     /*f32_out=*/true);
  CHECK(c[M * N - 1] == doctest::Approx(16.0));
  // Measured with Debian's oneDNN 2.6.3 (ONEDNN_VERBOSE: ref:any); other versions may have a JIT kernel for it.
  if (dn::library().rfind("oneDNN 2.6.", 0) == 0) CHECK(dn::reference_kernels() == before + 1);
}
