// test_optim_fused.cpp - the fused CPU optimizer kernels (plugins/optimizers/fused_cpu.*) against each
// optimizer's ATen op sequence: the same parameters and gradients go through both paths for several steps
// (fused::set_enabled(false) forces the ATen one), on tensors of an odd size (1000003 elements: many
// vectors and parallel chunks, then a scalar tail), a 7-element one (tail only) and a 37x29 matrix, with and
// without weight decay, clipping and trust ratios. Also: the fused path really runs, and what it does not
// take (non-contiguous parameters) still steps through ATen; bf16 parameters and gradients take it via
// their float32 working copies.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/randn.h>

#include "doctest_torch.hpp"

#include "bertx/optimizer.hpp"
#include "fused_cpu.hpp"
#include "optimizers.hpp"

namespace {

using namespace bertx::optim;
using Maker = std::function<std::shared_ptr<bertx::Optimizer>()>;

struct Param {
  std::string name;
  at::Tensor init;
  double weight_decay;
};

struct Result {
  std::map<std::string, at::Tensor> params;  // after the last step
  std::map<std::string, at::Tensor> state;   // exp_avg / exp_avg_sq
  std::int64_t fused_updates = 0;            // tensors the fused kernels updated during the run
};

constexpr int kSteps = 5;
constexpr double kLr = 1e-2;

at::Generator generator(std::uint64_t seed) { return at::detail::createCPUGenerator(seed); }

// A big odd-sized vector with weight decay, a 7-element one without, a matrix with; gradients of each step
// scaled so that clipping thresholds of 1.0 are crossed for the big tensor and not for the small one.
std::vector<Param> make_params(at::ScalarType dtype) {
  auto gen = generator(7);
  auto f32 = at::TensorOptions().dtype(at::kFloat);
  return {{"big", at::randn({1000003}, gen, f32).to(dtype), 0.1},
          {"tiny", at::randn({7}, gen, f32).to(dtype), 0.0},
          {"matrix", at::randn({37, 29}, gen, f32).to(dtype), 0.1}};
}

using Grads = std::vector<std::vector<at::Tensor>>;  // [step][param]

Grads make_grads(const std::vector<Param>& params) {
  auto gen = generator(11);
  Grads grads(kSteps);
  for (auto& step : grads)
    for (const auto& p : params) {
      const double scale = p.init.numel() < 10 ? 0.05 : 1.0;
      at::Tensor g = at::randn(p.init.sizes(), gen, at::TensorOptions().dtype(at::kFloat)).mul(scale);
      step.push_back(g.to(p.init.scalar_type()));
    }
  return grads;
}

// Parameters and gradients of a dtype, made once (doctest reruns a test case from the top for each SUBCASE).
struct Data {
  std::vector<Param> params;
  Grads grads;
};
const Data& data(at::ScalarType dtype) {
  static const Data f32{make_params(at::kFloat), make_grads(make_params(at::kFloat))};
  static const Data bf16{make_params(at::kBFloat16), make_grads(make_params(at::kBFloat16))};
  return dtype == at::kBFloat16 ? bf16 : f32;
}

// Steps a fresh optimizer from make() over copies of params (laid out by `layout`, default a contiguous
// clone) with the given gradients, with the fused kernels on or off.
Result run(const Maker& make, const std::vector<Param>& params, const Grads& grads, bool fused,
           const std::function<at::Tensor(const at::Tensor&)>& layout = {}) {
  std::shared_ptr<bertx::Optimizer> opt = make();
  std::vector<at::Tensor> live;
  for (const auto& p : params) {
    at::Tensor t = layout ? layout(p.init) : p.init.clone();
    t.set_requires_grad(true);
    opt->add_param_group({{p.name}, {t}, p.weight_decay});
    live.push_back(t);
  }
  fused::set_enabled(fused);
  const std::int64_t before = fused::update_count();
  for (const auto& step : grads) {
    for (std::size_t i = 0; i < live.size(); ++i) live[i].mutable_grad() = step[i].clone();
    opt->step(kLr);
  }
  Result r;
  r.fused_updates = fused::update_count() - before;
  fused::set_enabled(true);
  for (std::size_t i = 0; i < live.size(); ++i) r.params[params[i].name] = live[i].detach().to(at::kFloat).contiguous();
  for (const auto& [k, v] : opt->state_dict())
    if (k != "step") r.state[k] = v.contiguous();
  return r;
}

// |a - b| <= rtol * |b| + atol * max|b| element-wise; false with the worst element in *why otherwise.
bool close(const at::Tensor& a, const at::Tensor& b, double rtol, double atol, std::string* why) {
  REQUIRE(a.sizes() == b.sizes());
  const at::Tensor diff = a.to(at::kDouble).sub(b.to(at::kDouble)).abs();
  const double scale = b.abs().max().item<double>();
  if (diff.le(b.to(at::kDouble).abs().mul(rtol).add(atol * scale)).all().item<bool>()) return true;
  std::ostringstream s;
  s << "max abs diff " << diff.max().item<double>() << ", max |ref| " << scale << ", max rel diff "
    << diff.div(b.to(at::kDouble).abs()).max().item<double>();
  *why = s.str();
  return false;
}

// Every parameter (rtol) and state tensor (state_rtol) of `got` close to `want`; CHECKs each when `check`.
bool same(const Result& got, const Result& want, double rtol, double state_rtol, double atol, bool check = true) {
  bool all = true;
  auto one = [&](const std::string& what, const at::Tensor& a, const at::Tensor& b, double tol) {
    std::string why;
    const bool ok = close(a, b, tol, atol, &why);
    if (check) CHECK_MESSAGE(ok, what << ": " << why);
    all = all && ok;
  };
  for (const auto& [name, t] : want.params) one("param " + name, got.params.at(name), t, rtol);
  for (const auto& [key, t] : want.state) one("state " + key, got.state.at(key), t, state_rtol);
  return all;
}

// Tolerances of the float32 comparisons. Rounding differences (ATen's FMA, sums in double) are ~1e-7
// relative, but ATen 1.13's float32 norm() of a 1e6-element tensor is off by ~1e-5 relative (the fused
// double sums are closer to exact), so where a gradient is scaled by a norm the ATen path's moments are
// scaled ~1e-5 differently (v by twice that); the parameters hardly move from it (Adam is scale invariant).
constexpr double kRtol = 1e-5;       // parameters
constexpr double kStateRtol = 1e-4;  // exp_avg, exp_avg_sq
constexpr double kAtol = 1e-6;       // times the largest |value| of the tensor

struct Case {
  const char* name;
  Maker make;
};

std::vector<Case> cases() {
  NvLambConfig all;
  all.use_nvlamb = true;
  return {{"adamw (global clipping)", [] { return make_adamw({}); }},
          {"adamw (no clipping)", [] { return make_adamw({.max_grad_norm = 0.0}); }},
          {"bertadam (per-tensor clipping)", [] { return make_bertadam({}); }},
          {"bertadam (no clipping)", [] { return make_bertadam({.max_grad_norm = 0.0}); }},
          {"lamb", [] { return make_lamb({}); }},
          {"nvlamb (ratio where wd != 0)", [] { return make_nvlamb({}); }},
          {"nvlamb (ratio everywhere)", [all] { return make_nvlamb(all); }},
          {"nvlamb (no gradient scaling, eps 0)", [] { return make_nvlamb({.eps = 0.0, .max_grad_norm = 0.0}); }}};
}

}  // namespace

TEST_SUITE("optim fused") {
  TEST_CASE("optim fused: CPU kernels match the ATen sequence over several steps") {
    const auto& [params, grads] = data(at::kFloat);
    for (const auto& c : cases()) {
      SUBCASE(c.name) {
        const Result fused = run(c.make, params, grads, true);
        const Result aten = run(c.make, params, grads, false);
        CHECK(fused.fused_updates == kSteps * static_cast<std::int64_t>(params.size()));
        CHECK(aten.fused_updates == 0);
        same(fused, aten, kRtol, kStateRtol, kAtol);
      }
    }
  }

  TEST_CASE("optim fused: the comparison catches a wrong hyper-parameter") {
    // Guards the tolerance of the test above: 1% off (1 - beta2), or weight decay left out, fails it.
    const auto& [params, grads] = data(at::kFloat);
    const Result a = run([] { return make_adamw({}); }, params, grads, true);
    const Result b = run([] { return make_adamw({.beta2 = 0.99901}); }, params, grads, false);
    CHECK_FALSE(same(a, b, kRtol, kStateRtol, kAtol, false));
    auto no_decay = params;
    for (auto& p : no_decay) p.weight_decay = 0.0;
    const Result l = run([] { return make_lamb({}); }, params, grads, true);
    const Result d = run([] { return make_lamb({}); }, no_decay, grads, false);
    CHECK_FALSE(same(l, d, kRtol, kStateRtol, kAtol, false));
  }

  TEST_CASE("optim fused: non-contiguous parameters take the ATen path with the same result") {
    const auto& [params, grads] = data(at::kFloat);
    // The matrix as the transpose of a contiguous [29, 37] tensor: same values, not contiguous.
    auto transposed = [](const at::Tensor& t) { return t.dim() == 2 ? t.t().contiguous().t() : t.clone(); };
    for (const auto& c : cases()) {
      const std::string name = c.name;
      if (name.find("no ") != std::string::npos) continue;  // the variants without clipping add nothing here
      SUBCASE(c.name) {
        const Result strided = run(c.make, params, grads, true, transposed);
        const Result aten = run(c.make, params, grads, false);
        CHECK(strided.fused_updates == kSteps * static_cast<std::int64_t>(params.size() - 1));
        same(strided, aten, kRtol, kStateRtol, kAtol);
      }
    }
  }

  TEST_CASE("optim fused: bf16 parameters and gradients go through float32 copies") {
    // One step: the float32 updates differ in the last bits at most, which can round a bf16 parameter to
    // the neighbouring value (one bf16 ulp <= 2^-7 |p|); the float32 moments do not depend on p.
    const auto& [params, grads] = data(at::kBFloat16);
    const Grads one_step{grads.front()};
    for (const auto& c : cases()) {
      SUBCASE(c.name) {
        const Result fused = run(c.make, params, one_step, true);
        const Result aten = run(c.make, params, one_step, false);
        CHECK(fused.fused_updates == static_cast<std::int64_t>(params.size()));
        same(fused, aten, 1.0 / 128, kStateRtol, kAtol);
      }
    }
  }

  TEST_CASE("optim fused: unusable tensors are refused with a bertx::Error") {
    auto f32 = at::TensorOptions().dtype(at::kFloat);
    at::Tensor a = at::randn({8}, f32), b = at::randn({9}, f32), strided = at::randn({4, 4}, f32).t();
    CHECK(fused::usable(a));
    CHECK_FALSE(fused::usable(strided));
    CHECK_FALSE(fused::usable(a.to(at::kDouble)));
    CHECK_FALSE(fused::usable(fused::Tensors{a, a.clone(), a.clone(), b}));
    CHECK_THROWS_AS(fused::adamw({a, a.clone(), a.clone(), b}, {}, {}), bertx::Error);
    CHECK_THROWS_AS(fused::sum_squares(strided), bertx::Error);
    fused::set_enabled(false);
    CHECK_FALSE(fused::usable(a));
    fused::set_enabled(true);
    CHECK(fused::sum_squares(at::ones({1000003}, f32)) == 1000003.0);
  }
}
