// test_ops_int8.cpp - the execution policy (bertx/execution.hpp) and the int8 inference linears (ops::linear with
// an ops::QuantizedWeight), parametrised over device x dtype: every policy each device can or cannot run, and the
// linears of each dtype against a reference written here with ATen alone (int8: the same quantization arithmetic
// in float32 and an exact float64 integer product, so a saturating or misrounded kernel fails). CUDA cases are
// compiled everywhere and run where LibTorch sees a GPU (none here: they are skipped, and say so).
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <torch/cuda.h>

#include "doctest_torch.hpp"

#include "bertx/compat.hpp"
#include "bertx/error.hpp"
#include "bertx/execution.hpp"
#include "bertx/ops.hpp"
#include "io/quantized.hpp"
#include "ops/onednn/gemm_onednn.hpp"

using namespace bertx;

namespace {

std::vector<at::Device> all_devices() { return {at::Device(at::kCPU), at::Device(at::kCUDA, 0)}; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

double max_rel(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor d = (a.to(at::kDouble) - b.to(at::kDouble)).abs().max();
  return d.item<double>() / std::max(1e-12, b.to(at::kDouble).abs().max().item<double>());
}

// The int8 linear as ops.hpp defines it, in ATen: per-row symmetric activations at `levels`, per-channel weights.
at::Tensor reference_int8(const at::Tensor& x, const ops::QuantizedWeight& w, const at::Tensor& bias, int levels) {
  const at::Tensor m = std::get<0>(x.abs().max(1));                                         // (N)
  const at::Tensor s = at::where(m > 0, m / static_cast<float>(levels), at::ones_like(m));  // (N) float32
  const at::Tensor inv = 1.0f / s;
  const at::Tensor qx = at::clamp(at::round(x * inv.unsqueeze(1)), -levels, levels);      // (N, in), values
  const at::Tensor acc = at::matmul(qx.to(at::kDouble), w.values().to(at::kDouble).t());  // exact integers
  at::Tensor y = acc.to(at::kFloat) * (s.unsqueeze(1) * w.scales().unsqueeze(0));
  return bias.defined() ? y + bias : y;
}

}  // namespace

TEST_CASE("execution policy: each precision on each device, for training and inference") {
  for (const at::Device& device : all_devices()) {
    const bool cuda = device.is_cuda();
    for (const PolicyUse use : {PolicyUse::Training, PolicyUse::Inference}) {
      const bool train = use == PolicyUse::Training;
      INFO(device.str() << (train ? " training" : " inference"));
      const ExecutionPolicy fp32 = make_policy({Precision::Fp32, device, use}, "[train] precision");
      CHECK(!fp32.autocast);
      CHECK(fp32.quantization == Quantization::None);
      CHECK(fp32.activation_bytes() == 4);
      CHECK(make_policy({Precision::Tf32, device, use}, "p").tf32 == cuda);

      const std::string amp_error = error_of([&] { make_policy({Precision::Amp, device, use}, "[train] precision"); });
      if (cuda) {
        const ExecutionPolicy amp = make_policy({Precision::Amp, device, use}, "p");
        CHECK((amp.autocast == at::kHalf));
        CHECK(amp.loss_scaling == train);
        CHECK(amp.activation_bytes() == 2);
      } else {
        CHECK(amp_error ==
              "[train] precision = \"amp\" (fp16 autocast) needs CUDA; use \"amp-bf16\" (bf16) on the CPU");
      }
      const ExecutionPolicy bf16 = make_policy({Precision::AmpBf16, device, use, true, {"LayerNorm", "bias"}}, "p");
      CHECK((bf16.autocast == at::kBFloat16));
      CHECK(bf16.half_weights);
      CHECK(bf16.master_weights == train);
      CHECK(bf16.fp32_params == std::vector<std::string>{"LayerNorm", "bias"});
      CHECK(bf16.describe().find("bf16 autocast, pure half weights; fp32: LayerNorm, bias") != std::string::npos);
      CHECK(error_of([&] {
              make_policy({Precision::Fp32, device, use, true}, "[train] precision");
            }).find("half weights (use_pure_fp16 / --half-weights) need \"amp\"") != std::string::npos);

      const std::string int8_error = error_of([&] {
        make_policy({Precision::Int8, device, use}, "[train] precision");
      });
      if (train)
        CHECK(int8_error.find("[train] precision = \"int8\" is for inference") == 0);
      else if (cuda)
        CHECK(int8_error.find("runs on the CPU (oneDNN's int8 GEMMs); this run is on cuda:0") != std::string::npos);
      else {
        CHECK(int8_error.empty());
        const ExecutionPolicy int8 = make_policy({Precision::Int8, device, use}, "p");
        CHECK(int8.quantization == Quantization::Int8Dynamic);
        CHECK(!int8.autocast);
        CHECK(int8.describe() == "int8 on cpu (int8 linears, per-channel weights, per-token dynamic activations)");
      }
    }
  }
}

TEST_CASE("--precision flags: names, the fp16/bf16 aliases, and a one-line refusal listing the choices") {
  CHECK(precision_from_flag("fp32", "x") == Precision::Fp32);
  CHECK(precision_from_flag("fp16", "x") == Precision::Amp);
  CHECK(precision_from_flag("bf16", "x") == Precision::AmpBf16);
  CHECK(precision_from_flag("amp-bf16", "x") == Precision::AmpBf16);
  CHECK(precision_from_flag("int8", "x") == Precision::Int8);
  CHECK(error_of([] { precision_from_flag("int4", "bench infer"); }) ==
        "bench infer: --precision 'int4': expected fp32 | tf32 | amp (fp16) | amp-bf16 (bf16) | int8");
}

TEST_CASE("ExecutionScope turns the policy's autocast on for its device and off after") {
  const ExecutionPolicy bf16 = make_policy({Precision::AmpBf16, at::Device(at::kCPU)}, "p");
  CHECK(!compat::autocast_dtype(at::kCPU));
  {
    ExecutionScope scope(bf16);
    CHECK((compat::autocast_dtype(at::kCPU) == at::kBFloat16));
  }
  CHECK(!compat::autocast_dtype(at::kCPU));
  {
    ExecutionScope scope(make_policy({Precision::Int8, at::Device(at::kCPU)}, "p"));
    CHECK(!compat::autocast_dtype(at::kCPU));
  }
}

TEST_CASE("oneDNN's u8 x s8 GEMM is exact over the activation range int8 inference uses on this CPU") {
  if (!ops::PackedWeight::available()) {
    MESSAGE("skipped: built without oneDNN");
    return;
  }
  const int L = ops::int8_activation_levels();
  MESSAGE("CPU ISA " << ops::gemm_isa() << ", activation levels +-" << L);
  CHECK((L == 127 || L == 63));
  CHECK((L == 127) == ops::onednn::int8_exact_products());
  at::manual_seed(3);
  for (const auto& [M, N, K] : std::vector<std::tuple<int, int, int>>{{1, 7, 5}, {37, 96, 768}, {64, 64, 3072}}) {
    // Extremes on purpose: every activation at +-L and weights at +-127 is where 16-bit pair sums saturate.
    at::Tensor a = at::randint(0, 2, {M, K}, at::kInt) * (2 * L) - L;  // (M, K) in {-L, L}
    at::Tensor b = at::randint(0, 2, {N, K}, at::kInt) * 254 - 127;    // (N, K) in {-127, 127}
    a.index_put_({0}, at::randint(-L, L + 1, {K}, at::kInt));
    at::Tensor au = (a + (L + 1)).to(at::kByte).contiguous(), bs = b.to(at::kChar).contiguous();
    at::Tensor c = at::empty({M, N}, at::kInt);
    ops::onednn::gemm_u8s8s32(M, N, K, au.data_ptr<std::uint8_t>(), K, static_cast<std::uint8_t>(L + 1),
                              bs.data_ptr<std::int8_t>(), K, c.data_ptr<std::int32_t>(), N);
    const at::Tensor exact = at::matmul(a.to(at::kDouble), b.to(at::kDouble).t());
    INFO(M << "x" << N << "x" << K);
    CHECK(at::equal(c.to(at::kDouble), exact));
  }
}

TEST_CASE("ops::QuantizedWeight: per-channel int8 values and scales, round trip, bad input") {
  at::manual_seed(4);
  at::Tensor w = at::randn({6, 10}) * at::arange(1, 7, at::kFloat).unsqueeze(1);
  w[2].zero_();
  const ops::QuantizedWeight q(w);
  CHECK((q.values().scalar_type() == at::kChar));
  CHECK(q.values().abs().max().item<int>() == 127);
  CHECK(q.scales()[2].item<float>() == 1.0f);  // a zero row: scale 1, values 0
  CHECK(q.values()[2].abs().sum().item<int>() == 0);
  for (int r : {0, 1, 3, 4, 5}) CHECK(q.values()[r].abs().max().item<int>() == 127);
  CHECK(max_rel(q.dequantized(), w) < 0.5 / 127 + 1e-6);
  const ops::QuantizedWeight again(q.dequantized());  // the int8 folder's weights quantize to themselves
  CHECK(at::equal(again.values(), q.values()));
  const ops::QuantizedWeight stored(q.values(), q.scales());
  CHECK(at::equal(stored.dequantized(), q.dequantized()));
  CHECK(error_of([&] { ops::QuantizedWeight(q.values(), q.scales().narrow(0, 0, 3)); }).find("expected int8 values") !=
        std::string::npos);
  CHECK(error_of([&] { ops::QuantizedWeight(q.values(), at::zeros({6})); }) ==
        "QuantizedWeight: every scale must be finite and > 0");
  CHECK(error_of([&] { ops::QuantizedWeight(at::randn({4})); }).find("expected a non-empty CPU weight") !=
        std::string::npos);
}

TEST_CASE("ops::linear inference (device x dtype: fp32, bf16, int8) against references, with activations") {
  at::manual_seed(5);
  for (const at::Device& device : all_devices()) {
    if (device.is_cuda() && !torch::cuda::is_available()) {
      MESSAGE("skipped: CUDA cases (no GPU visible to this LibTorch)");
      continue;
    }
    for (const auto dtype : {at::kFloat, at::kBFloat16, at::kChar}) {
      for (const ops::Activation act : {ops::Activation::none, ops::Activation::gelu, ops::Activation::relu}) {
        for (const std::int64_t N : {1, 7, 130}) {
          INFO(device.str() << " " << c10::toString(dtype) << " act " << static_cast<int>(act) << " N " << N);
          at::NoGradGuard no_grad;
          const at::Tensor x = at::randn({N, 96}).to(device), w = (at::randn({48, 96}) * 0.1).to(device),
                           b = at::randn({48}).to(device);
          at::Tensor exact = at::linear(x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble));
          exact = act == ops::Activation::gelu   ? at::gelu(exact)
                  : act == ops::Activation::relu ? at::relu(exact)
                                                 : exact;
          if (dtype == at::kChar) {
            if (device.is_cuda()) {
              CHECK(!error_of([&] { ops::linear(x, ops::QuantizedWeight(w.cpu()), b, act); }).empty());
              continue;
            }
            if (!ops::PackedWeight::available()) continue;
            const ops::QuantizedWeight q(w);
            const at::Tensor y = ops::linear(x, q, b, act);
            at::Tensor ref = reference_int8(x, q, b, ops::int8_activation_levels());
            ref = act == ops::Activation::gelu ? at::gelu(ref) : act == ops::Activation::relu ? at::relu(ref) : ref;
            CHECK((y.scalar_type() == at::kFloat));
            CHECK(max_rel(y, ref) < 1e-6);    // the same arithmetic: equal up to float32 rounding
            CHECK(max_rel(y, exact) < 0.05);  // and a quantized linear, not something else
          } else {
            const ops::PackedWeight packed(w.cpu(), dtype);
            const at::Tensor y = device.is_cpu() && ops::PackedWeight::available()
                                     ? ops::linear(x.to(dtype), packed, b, act)
                                     : ops::linear(x.to(dtype), w.to(dtype), b.to(dtype), act);
            CHECK(max_rel(y, exact) < (dtype == at::kFloat ? 1e-5 : 2e-2));
          }
        }
      }
    }
  }
}

TEST_CASE("ops::linear (int8): bad shapes and autograd are refused in one line") {
  if (!ops::PackedWeight::available()) return;
  const ops::QuantizedWeight q(at::randn({4, 8}));
  at::NoGradGuard no_grad;
  CHECK(error_of([&] {
          ops::linear(at::randn({2, 7}), q, at::Tensor());
        }).find("ops::linear (int8): expected CPU x (N, 8)") == 0);
  CHECK((ops::linear(at::randn({0, 8}), q, at::Tensor()).sizes() == at::IntArrayRef({0, 4})));
  at::AutoGradMode grad(true);
  CHECK(error_of([&] {
          ops::linear(at::randn({2, 8}).requires_grad_(true), q, at::Tensor());
        }).find("an int8 weight is for inference") != std::string::npos);
}

TEST_CASE("int8 model folders: quantize_linears picks the encoder linears, dequantize_linears reads them back") {
  at::manual_seed(6);
  TensorMap m{{"bert.encoder.layer.0.attention.self.query.weight", at::randn({8, 8})},
              {"encoder.layer.11.intermediate.dense.weight", at::randn({16, 8})},
              {"bert.encoder.layer.0.attention.self.query.bias", at::randn({8})},
              {"bert.embeddings.word_embeddings.weight", at::randn({30, 8})},
              {"classifier.weight", at::randn({2, 8})}};
  TensorMap q = quantize_linears(m, "f");
  CHECK(q.size() == m.size() + 2);
  CHECK((q.at("encoder.layer.11.intermediate.dense.weight").scalar_type() == at::kChar));
  CHECK((q.at("encoder.layer.11.intermediate.dense.weight_scale").sizes() == at::IntArrayRef({16})));
  CHECK((q.at("classifier.weight").scalar_type() == at::kFloat));
  CHECK((q.at("bert.embeddings.word_embeddings.weight").scalar_type() == at::kFloat));
  TensorMap back = q;
  CHECK(dequantize_linears(back, "f") == 2);
  CHECK(back.size() == m.size());
  for (const auto& [name, t] : m) {
    INFO(name);
    CHECK(max_rel(back.at(name), t) < (quantizable_linear(name) ? 0.5 / 127 * 4 : 0.0) + 1e-7);
  }
  TensorMap broken = q;
  broken.erase("encoder.layer.11.intermediate.dense.weight_scale");
  CHECK(error_of([&] { dequantize_linears(broken, "m.safetensors"); }) ==
        "m.safetensors: int8 tensor 'encoder.layer.11.intermediate.dense.weight' has no "
        "'encoder.layer.11.intermediate.dense.weight_scale' (float32 scales per output channel, as bertx quantize "
        "writes)");
}
