// common.cpp - see common.hpp.
#include "common.hpp"

#include <cmath>
#include <set>
#include <sstream>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros_like.h>

#include "bertx/error.hpp"
#include "fused_cpu.hpp"

namespace bertx::optim {
namespace {

std::string shape_str(at::IntArrayRef sizes) {
  std::ostringstream s;
  s << '[';
  for (std::size_t i = 0; i < sizes.size(); ++i) s << (i ? ", " : "") << sizes[i];
  s << ']';
  return s.str();
}

}  // namespace

void AdamFamily::fail(const std::string& what) const { throw Error("optimizer " + label_ + ": " + what); }

void AdamFamily::add_param_group(ParamGroup group) {
  if (group.names.size() != group.params.size())
    fail("parameter group has " + std::to_string(group.names.size()) + " names but " +
         std::to_string(group.params.size()) + " tensors");
  if (!std::isfinite(group.weight_decay)) fail("parameter group has a non-finite weight_decay");
  std::set<std::string> names;
  std::set<const void*> impls;
  for (const auto& s : slots_) {
    names.insert(s.name);
    impls.insert(s.param.unsafeGetTensorImpl());
  }
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < group.params.size(); ++i) {
    const std::string& name = group.names[i];
    const at::Tensor& p = group.params[i];
    if (name.empty()) fail("a parameter has an empty name");
    if (!p.defined()) fail("parameter '" + name + "' is undefined");
    if (!at::isFloatingType(p.scalar_type()))
      fail("parameter '" + name + "' has dtype " + std::string(c10::toString(p.scalar_type())) +
           ", not floating point");
    if (!names.insert(name).second) fail("parameter '" + name + "' appears twice");
    if (!impls.insert(p.unsafeGetTensorImpl()).second)
      fail("parameter '" + name + "' is the same tensor as another one");
    auto f32 = p.options().dtype(at::kFloat);
    slots_.push_back(Slot{name, p, at::zeros_like(p, f32), at::zeros_like(p, f32), group.weight_decay});
  }
}

std::map<std::string, at::Tensor> AdamFamily::state_dict() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& s : slots_) {
    out.emplace(s.name + ".exp_avg", s.exp_avg);
    out.emplace(s.name + ".exp_avg_sq", s.exp_avg_sq);
  }
  out.emplace("step", at::scalar_tensor(static_cast<double>(step_), at::TensorOptions().dtype(at::kLong)));
  return out;
}

void AdamFamily::load_state_dict(const std::map<std::string, at::Tensor>& state) {
  // Validate everything before touching the state.
  std::set<std::string> expected{"step"};
  for (const auto& s : slots_) {
    for (const char* slot : {".exp_avg", ".exp_avg_sq"}) {
      const std::string key = s.name + slot;
      expected.insert(key);
      auto it = state.find(key);
      if (it == state.end()) fail("state key '" + key + "' is missing");
      const at::Tensor& t = it->second;
      if (!t.defined()) fail("state key '" + key + "' is an undefined tensor");
      if (!at::isFloatingType(t.scalar_type()))
        fail("state key '" + key + "' has dtype " + std::string(c10::toString(t.scalar_type())) +
             ", not floating point");
      if (t.sizes() != s.param.sizes())
        fail("state key '" + key + "' has shape " + shape_str(t.sizes()) + " but the parameter has " +
             shape_str(s.param.sizes()));
    }
  }
  for (const auto& [key, t] : state)
    if (!expected.count(key)) fail("state key '" + key + "' matches no parameter of this optimizer");
  auto it = state.find("step");
  if (it == state.end()) fail("state key 'step' is missing");
  const at::Tensor& st = it->second;
  if (!st.defined() || st.numel() != 1 || st.scalar_type() == at::kBool ||
      !(at::isFloatingType(st.scalar_type()) || at::isIntegralType(st.scalar_type(), false)))
    fail("state key 'step' must hold one integer");
  const double step = st.item<double>();
  if (!(step >= 0) || step != std::floor(step) || step > 9e15)
    fail("state key 'step' holds " + std::to_string(step) + ", not a step count");

  at::NoGradGuard no_grad;
  for (auto& s : slots_) {
    s.exp_avg.copy_(state.at(s.name + ".exp_avg"));
    s.exp_avg_sq.copy_(state.at(s.name + ".exp_avg_sq"));
  }
  step_ = static_cast<std::int64_t>(step);
}

std::vector<Slot*> AdamFamily::with_grad() {
  std::vector<Slot*> out;
  for (auto& s : slots_) {
    const at::Tensor& g = s.param.grad();
    if (!g.defined()) continue;
    if (g.is_sparse()) fail("parameter '" + s.name + "' has a sparse gradient (not supported)");
    if (g.sizes() != s.param.sizes())
      fail("parameter '" + s.name + "' has shape " + shape_str(s.param.sizes()) + " but its gradient " +
           shape_str(g.sizes()));
    out.push_back(&s);
  }
  return out;
}

at::Tensor grad_f32(const Slot& s) {
  const at::Tensor& g = s.param.grad();
  return g.scalar_type() == at::kFloat ? g : g.to(at::kFloat);
}

at::Tensor param_f32(const Slot& s) { return s.param.scalar_type() == at::kFloat ? s.param : s.param.to(at::kFloat); }

void write_back(const Slot& s, const at::Tensor& p32) {
  if (!p32.is_same(s.param)) s.param.copy_(p32);
}

at::Tensor global_grad_norm(const std::vector<Slot*>& slots) {
  if (slots.empty()) return at::scalar_tensor(0.0, at::TensorOptions().dtype(at::kFloat));
  // Contiguous float32 CPU gradients: sums of squares by the fused kernel, in double; the rest: ATen norms.
  const auto device = slots.front()->param.grad().device();
  std::vector<at::Tensor> norms;
  double fused_sum = 0.0;
  bool any_fused = false;
  for (const Slot* s : slots) {
    at::Tensor g = grad_f32(*s);
    if (fused::usable(g)) {
      fused_sum += fused::sum_squares(g);
      any_fused = true;
    } else {
      norms.push_back(g.norm().to(device));
    }
  }
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  if (norms.empty()) return at::scalar_tensor(std::sqrt(fused_sum), f32);
  if (any_fused) norms.push_back(at::scalar_tensor(std::sqrt(fused_sum), f32).to(device));
  return at::stack(norms).norm();
}

void read_betas(const Options& options, double& beta1, double& beta2) {
  const auto& b = options.get_floats("betas");
  if (b.size() != 2 || !(b[0] >= 0 && b[0] < 1) || !(b[1] >= 0 && b[1] < 1)) {
    std::string got;
    for (double x : b) got += (got.empty() ? "" : ", ") + std::to_string(x);
    throw Error(options.where() + ": option 'betas' must be two floats in [0, 1), got [" + got + "]");
  }
  beta1 = b[0];
  beta2 = b[1];
}

void check_nonnegative(const Options& options, const std::string& key, double v) {
  if (!(std::isfinite(v) && v >= 0))
    throw Error(options.where() + ": option '" + key + "' must be a finite float >= 0, got " + std::to_string(v));
}

}  // namespace bertx::optim
