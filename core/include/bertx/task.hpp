// bertx/task.hpp - the Task plugin interface: what a model is trained for (MLM+NSP pre-training, SQuAD,
// GLUE classification, a user's own task).
//
// The host calls attach() once, before the optimizer sees the parameters, so the task can add the heads
// it needs. step() runs forward and loss on one micro-batch; the host does backward, accumulation,
// clipping and the optimizer step. Metrics are detached 0-dim tensors, so logging syncs with the device
// only when a line is printed; the host averages them over the micro-batches of a log window (and over
// the evaluation set, weighted by batch size).
#pragma once
#include <map>
#include <string>

#include "bertx/batch.hpp"
#include "bertx/model.hpp"
#include "bertx/plugin.hpp"

namespace bertx {

struct StepOutput {
  at::Tensor loss;                            // scalar, differentiable (training) - the quantity minimised
  std::map<std::string, at::Tensor> metrics;  // detached scalars, e.g. mlm_loss, mlm_accuracy
};

class Task {
 public:
  virtual ~Task() = default;
  // Adds the heads this task needs (Model::add_head).
  virtual void attach(Model& model) = 0;
  // Forward + loss of one micro-batch (batch already on the model's device).
  virtual StepOutput step(Model& model, const Batch& batch) = 0;
};

template <class F>
void add_task(Registry& registry, std::string name, std::string description, Schema schema, F make) {
  registry.add(BuilderSpec{Kind::Task, std::move(name), std::move(description), std::move(schema),
                           [make](const Options& o) -> std::shared_ptr<void> {
                             std::shared_ptr<Task> p = make(o);
                             return p;
                           }});
}

}  // namespace bertx
