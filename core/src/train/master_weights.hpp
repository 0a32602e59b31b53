// master_weights.hpp - the seeds' `use_pure_fp16`: the model holds fp16/bf16 weights and gradients (half the
// memory of fp32 weights + gradients, no per-step autocast weight casts), the optimizer updates fp32 master
// copies. An Optimizer wrapper, so any optimizer plugin works unchanged:
//   add_param_group: fp32 master = the parameter's current (fp32) value, then the parameter becomes half;
//                    parameters whose name matches a keep_fp32 pattern (LayerNorm) stay fp32, without master.
//   stage_gradients: master.grad = fp32 copy of the half gradient, which is freed (after backward, when the
//                    activations are gone); the loss scaler then unscales in fp32, so tiny gradients do not
//                    flush to zero in fp16.
//   step:            the wrapped optimizer updates the masters; the half parameters get their rounded values.
//   state_dict:      the wrapped optimizer's state + "<param name>.master" (fp32) so resume is exact.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "bertx/optimizer.hpp"

namespace bertx {

class MasterWeights : public Optimizer {
 public:
  MasterWeights(std::shared_ptr<Optimizer> inner, at::ScalarType half, std::vector<std::string> keep_fp32);

  void add_param_group(ParamGroup group) override;
  void step(double lr) override;
  std::map<std::string, at::Tensor> state_dict() const override;
  void load_state_dict(const std::map<std::string, at::Tensor>& state) override;

  // Moves every defined half gradient into its master's .grad() (fp32) and returns the gradients the
  // optimizer will read (masters' and kept-fp32 parameters'), for the loss scaler's unscale + finite check.
  std::vector<at::Tensor> stage_gradients();
  // Master tensors by "<param name>.master", e.g. to broadcast them with the parameters.
  const std::vector<at::Tensor>& masters() const { return masters_; }
  std::vector<std::string> master_names() const;
  // Parameters converted to half / kept in fp32 (for the set-up log line).
  std::size_t half_count() const { return masters_.size(); }
  std::size_t fp32_count() const { return kept_.size(); }

 private:
  std::shared_ptr<Optimizer> inner_;
  at::ScalarType half_;
  std::vector<std::string> keep_fp32_;
  std::vector<at::Tensor> params_, masters_;  // half model parameter i <-> its fp32 master i
  std::vector<std::string> names_;
  std::vector<at::Tensor> kept_;  // fp32 parameters handed to the optimizer as they are
};

}  // namespace bertx
