// common.hpp - what the optimizers of this plugin share (internal to the plugin and its tests): one slot per
// parameter (the live tensor + float32 Adam moments), the step counter, state_dict()/load_state_dict(),
// gradient norms, float32 working copies, and the option readers.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "bertx/optimizer.hpp"
#include "bertx/options.hpp"

namespace bertx::optim {

struct Slot {
  std::string name;           // HF parameter name: prefix of its state keys
  at::Tensor param;           // the live parameter, updated in place
  at::Tensor exp_avg;         // first moment: float32, same shape and device as param
  at::Tensor exp_avg_sq;      // second moment: float32, same shape and device as param
  double weight_decay = 0.0;  // from its ParamGroup
};

// Base of the four Adam-family optimizers: parameter bookkeeping and state; subclasses implement step().
class AdamFamily : public Optimizer {
 public:
  explicit AdamFamily(std::string label) : label_(std::move(label)) {}
  void add_param_group(ParamGroup group) override;
  // Live state tensors (no copies: clone them to keep a snapshot across later steps) and a fresh "step".
  std::map<std::string, at::Tensor> state_dict() const override;
  // Checks every key first (missing, unexpected, wrong shape, non-floating), then copies; all or nothing.
  void load_state_dict(const std::map<std::string, at::Tensor>& state) override;

 protected:
  // The slots whose parameter has a gradient now (throws bertx::Error for a sparse one).
  std::vector<Slot*> with_grad();
  // Error("optimizer <label>: <what>").
  [[noreturn]] void fail(const std::string& what) const;

  std::vector<Slot> slots_;
  std::int64_t step_ = 0;  // steps taken; one counter for all parameters (every BERT parameter gets a gradient)
  std::string label_;      // optimizer name, for messages
};

// The slot's gradient as float32 (no copy when it already is).
at::Tensor grad_f32(const Slot& s);
// A float32 working copy of the parameter (the parameter itself when float32); write_back copies it back
// when it is a copy.
at::Tensor param_f32(const Slot& s);
void write_back(const Slot& s, const at::Tensor& p32);
// L2 norm of all the gradients together, computed like torch.nn.utils.clip_grad_norm_ (norm of the
// per-tensor norms): a 0-dim float32 tensor on the first slot's device. The fused::usable gradients' squares
// are summed by the fused CPU kernel (in double, one host value), the others' norms by ATen on their device.
at::Tensor global_grad_norm(const std::vector<Slot*>& slots);

// Option readers and checks; they throw bertx::Error naming options.where() and the key.
void read_betas(const Options& options, double& beta1, double& beta2);             // key "betas": 2 floats in [0, 1)
void check_nonnegative(const Options& options, const std::string& key, double v);  // a finite float >= 0

// The "betas" option of a config with members beta1 and beta2: [beta1, beta2], read by read_betas.
template <class C>
Field<C> betas_field() {
  return field_custom<C>(
      "betas", OptionType::FloatList, "decay rates of the first and second moment estimates",
      [](const Options& o, C& c) { read_betas(o, c.beta1, c.beta2); },
      [](const C& c) {
        return OptionValue(std::vector<double>{c.beta1, c.beta2});
      });
}

}  // namespace bertx::optim
