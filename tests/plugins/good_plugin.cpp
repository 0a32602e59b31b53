// good_plugin.cpp - a real (tiny) optimizer plugin used by the plugin-host tests: plain SGD with an
// lr multiplier, plus a builder whose factory rejects its options (to test error wrapping).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "bertx/optimizer.hpp"

namespace {

class TestSgd final : public bertx::Optimizer {
 public:
  explicit TestSgd(double lr_scale) : lr_scale_(lr_scale) {}
  void add_param_group(bertx::ParamGroup group) override { groups_.push_back(std::move(group)); }
  void step(double lr) override {
    at::NoGradGuard no_grad;
    for (auto& g : groups_)
      for (auto& p : g.params)
        if (p.grad().defined()) p.sub_(p.grad(), lr * lr_scale_);
    ++steps_;
  }
  std::map<std::string, at::Tensor> state_dict() const override {
    return {{"step", at::scalar_tensor(steps_, at::kLong)}};
  }
  void load_state_dict(const std::map<std::string, at::Tensor>& s) override {
    auto it = s.find("step");
    if (it == s.end()) throw bertx::Error("test_sgd state: missing key 'step'");
    steps_ = it->second.item<std::int64_t>();
  }

 private:
  double lr_scale_;
  std::int64_t steps_ = 0;
  std::vector<bertx::ParamGroup> groups_;
};

void register_test(bertx::Registry& r) {
  bertx::add_optimizer(r, "test_sgd", "plain SGD for tests",
                       {bertx::opt_float("lr_scale", 1.0, "multiplies the learning rate"),
                        bertx::opt_bool("verbose", false, "unused flag, tests boolean options")},
                       [](const bertx::Options& o) { return std::make_shared<TestSgd>(o.get_float("lr_scale")); });
  bertx::add_optimizer(r, "test_throwing", "factory always rejects its options", {},
                       [](const bertx::Options&) -> std::shared_ptr<bertx::Optimizer> {
                         throw bertx::Error("lr_scale must be positive");
                       });
}

}  // namespace

BERTX_PLUGIN("test_plugin", "1.2.3", "plugin-host test fixture", register_test)
