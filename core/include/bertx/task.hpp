// bertx/task.hpp - the Task plugin interface: what a model is trained for (MLM+NSP pre-training, SQuAD,
// GLUE classification, a user's own task).
//
// The host calls attach() once, before the optimizer sees the parameters, so the task can add the heads
// it needs. step() runs forward and loss on one micro-batch; the host does backward, accumulation,
// clipping and the optimizer step. Metrics are detached 0-dim tensors, so logging syncs with the device
// only when a line is printed; the host averages them over the micro-batches of a log window (and over
// the evaluation set). A task whose metrics are not batch averages (Matthews correlation, F1, SQuAD EM/F1)
// or that writes prediction files returns an Evaluator, which sees the whole split and scores it at once.
//
// Calls, in order: attach() once, after the model is built and before pretrained weights are loaded, the
// model is moved to its device and the optimizer collects parameters - a task may register modules of its
// own into model.module() here (e.g. a per-token head "classifier"): they are trained, checkpointed and loaded
// like the model's own heads. step() per micro-batch (module in train mode, under autocast when asked; the
// host runs backward). evaluator() once per evaluation pass (rank 0 only under data parallelism), then
// add() per batch under NoGradGuard in eval mode, then finish() once.
// Ownership: the Model&, Batch& and DatasetReader& passed in are the host's; they stay valid for the call
// (the reader and model also until the evaluator's finish() returns) - do not keep them longer. Tensors the
// task keeps (heads) are the task's. Threading: every call comes from the host's training thread.
// Errors: throw bertx::Error with one line naming the option or file at fault.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "bertx/batch.hpp"
#include "bertx/dataset.hpp"
#include "bertx/model.hpp"
#include "bertx/plugin.hpp"

namespace bertx {

struct StepOutput {
  at::Tensor loss;                            // scalar, differentiable (training) - the quantity minimised
  std::map<std::string, at::Tensor> metrics;  // detached scalars, e.g. mlm_loss, mlm_accuracy
};

// What an evaluation pass is for.
struct EvalContext {
  std::string split = "eval";  // the reader split being scored: "eval" (labelled) or "test" (no labels)
  bool predict = false;        // write prediction files (e.g. GLUE submission TSV, SQuAD predictions.json)
  std::string output_dir;      // where prediction files go: the run's output folder
  std::int64_t step = 0;       // the training step the model is at (for file names and logs)
};

// One pass over a split: add() every batch (the host runs it under NoGradGuard with the module in eval
// mode), then finish() once. Metric names carry no prefix; the host adds "eval_".
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual void add(Model& model, const Batch& batch) = 0;
  // Metrics over everything added (empty for an unlabelled split); writes prediction files when asked.
  virtual std::map<std::string, double> finish() = 0;
};

class Task {
 public:
  virtual ~Task() = default;
  // Adds the heads this task needs (Model::add_head).
  virtual void attach(Model& model) = 0;
  // Forward + loss of one micro-batch (batch already on the model's device).
  virtual StepOutput step(Model& model, const Batch& batch) = 0;
  // Whole-split evaluation. nullptr (the default): the host averages step()'s metrics over the split.
  // `reader` is the split's reader, already open: a task may ask a reader of its own plugin for the
  // examples behind the batches (SQuAD maps token spans back to context text).
  virtual std::unique_ptr<Evaluator> evaluator(Model& model, DatasetReader& reader, const EvalContext& context) {
    (void)model, (void)reader, (void)context;
    return nullptr;
  }
  // Positions per sequence at which step() computes vocabulary logits besides the encoder's (pre-training's
  // masked positions), given the run's [data] options; the dry-run memory estimate counts that head's
  // activations. Default 0: no per-position vocabulary head.
  virtual std::int64_t predictions_per_sequence(const Options& data) const {
    (void)data;
    return 0;
  }
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
