// bertx/optimizer.hpp - the Optimizer plugin interface (LAMB, NVLAMB, AdamW, BertAdam, ...).
//
// The host groups parameters (weight decay or not, by name pattern) and hands them over once; each step
// it calls step(lr) after gradients are in `param.grad()` (already unscaled, not yet clipped: clipping is
// the optimizer's business because LAMB/NVLAMB/BertAdam each clip differently). State is exposed by
// name so checkpoints can store it as safetensors: keys are "<param name>.<slot>" (e.g. "...weight.exp_avg")
// plus optimizer-wide scalars such as "step".
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "bertx/plugin.hpp"

namespace bertx {

struct ParamGroup {
  std::vector<std::string> names;  // HF parameter names, same order as params
  std::vector<at::Tensor> params;  // leaf tensors; gradients in .grad()
  double weight_decay = 0.0;       // decoupled weight decay for this group
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Called before the first step, once per group.
  virtual void add_param_group(ParamGroup group) = 0;
  // One update of every parameter with a defined gradient, at learning rate lr.
  virtual void step(double lr) = 0;
  // Named state tensors (CPU copies are not required; the caller moves them as needed).
  virtual std::map<std::string, at::Tensor> state_dict() const = 0;
  // Restores what state_dict() returned; throws bertx::Error naming a missing or mis-shaped key.
  virtual void load_state_dict(const std::map<std::string, at::Tensor>& state) = 0;
};

// registry.add for optimizers with a typed factory: make(options) -> std::shared_ptr<Optimizer>.
template <class F>
void add_optimizer(Registry& registry, std::string name, std::string description, Schema schema, F make) {
  registry.add(BuilderSpec{Kind::Optimizer, std::move(name), std::move(description), std::move(schema),
                           [make](const Options& o) -> std::shared_ptr<void> {
                             std::shared_ptr<Optimizer> p = make(o);
                             return p;
                           }});
}

}  // namespace bertx
