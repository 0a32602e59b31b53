// master_weights.cpp - fp32 master weights for half-precision parameters (see master_weights.hpp).
#include "train/master_weights.hpp"

#include <algorithm>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "bertx/error.hpp"
#include "bertx/execution.hpp"

namespace bertx {

MasterWeights::MasterWeights(std::shared_ptr<Optimizer> inner, at::ScalarType half, std::vector<std::string> keep_fp32)
    : inner_(std::move(inner)), half_(half), keep_fp32_(std::move(keep_fp32)) {}

void MasterWeights::add_param_group(ParamGroup group) {
  at::NoGradGuard no_grad;
  ParamGroup to_inner{group.names, {}, group.weight_decay};
  for (std::size_t i = 0; i < group.params.size(); ++i) {
    at::Tensor& p = group.params[i];
    const std::string& name = group.names[i];
    const bool keep = kept_fp32(keep_fp32_, name);
    if (keep || p.scalar_type() != at::kFloat) {
      if (!keep)
        throw Error("[train] use_pure_fp16: parameter " + name + " is " + std::string(c10::toString(p.scalar_type())) +
                    ", expected fp32 weights before the conversion");
      kept_.push_back(p);
      to_inner.params.push_back(p);
      continue;
    }
    at::Tensor master = p.detach().clone();  // fp32: the exact initial / pre-trained value
    p.set_data(p.detach().to(half_));        // same Parameter object (module and data parallel keep it), half storage
    params_.push_back(p);
    masters_.push_back(master);
    names_.push_back(name);
    to_inner.params.push_back(master);
  }
  inner_->add_param_group(std::move(to_inner));
}

std::vector<at::Tensor> MasterWeights::stage_gradients() {
  std::vector<at::Tensor> grads;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& g = params_[i].grad();
    masters_[i].mutable_grad() = g.defined() ? g.to(at::kFloat) : at::Tensor();
    if (!g.defined()) continue;
    grads.push_back(masters_[i].grad());
    params_[i].mutable_grad() = at::Tensor();  // the half gradient is no longer needed
  }
  for (const auto& p : kept_)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

void MasterWeights::step(double lr) {
  inner_->step(lr);
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) params_[i].copy_(masters_[i]);  // round to half
}

std::vector<std::string> MasterWeights::master_names() const {
  std::vector<std::string> out;
  for (const auto& n : names_) out.push_back(n + ".master");
  return out;
}

std::map<std::string, at::Tensor> MasterWeights::state_dict() const {
  std::map<std::string, at::Tensor> s = inner_->state_dict();
  for (std::size_t i = 0; i < masters_.size(); ++i) s[names_[i] + ".master"] = masters_[i];
  return s;
}

void MasterWeights::load_state_dict(const std::map<std::string, at::Tensor>& state) {
  at::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> rest = state;
  for (std::size_t i = 0; i < masters_.size(); ++i) {
    auto it = rest.find(names_[i] + ".master");
    if (it == rest.end())
      throw Error("optimizer state has no master weights '" + names_[i] +
                  ".master': the checkpoint was written without "
                  "[train] use_pure_fp16 = true (start a new phase from its weights with from_pretrained instead)");
    if (!it->second.sizes().equals(masters_[i].sizes()))
      throw Error("optimizer state '" + it->first + "' has shape " + c10::str(it->second.sizes()) + ", the model " +
                  c10::str(masters_[i].sizes()));
    masters_[i].copy_(it->second);
    params_[i].copy_(masters_[i]);
    rest.erase(it);
  }
  inner_->load_state_dict(rest);
}

}  // namespace bertx
