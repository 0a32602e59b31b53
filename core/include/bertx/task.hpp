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
// Distillation: heads() runs the task's heads on an encoding the host made, for the teacher (its heads loaded
// from the teacher's checkpoint; attach() is called on it too) and the student, and names the outputs matched.
// Serving: text_handler() gives `bertx serve` the task's text endpoint (request text -> sequences, their head
// outputs -> the JSON answer), so a served model tokenizes, windows and post-processes exactly as evaluation does.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bertx/batch.hpp"
#include "bertx/dataset.hpp"
#include "bertx/error.hpp"
#include "bertx/model.hpp"
#include "bertx/plugin.hpp"
#include "bertx/tokenizer.hpp"

namespace bertx {

struct StepOutput {
  at::Tensor loss;                            // scalar, differentiable (training) - the quantity minimised
  std::map<std::string, at::Tensor> metrics;  // detached scalars, e.g. mlm_loss, mlm_accuracy
  // The head outputs a distilled student matches to its teacher's (Task::heads), differentiable, one row per
  // prediction, the class dimension last: "logits" (B, C), "start_logits" / "end_logits" (B, S), "mlm_logits"
  // (B*P, V) with "mlm_logits_mask" (B*P) marking the real masked positions, "nsp_logits" (B, 2). An output
  // "<name>_mask" (rows,) marks the rows of <name> that count (default: all); a row of one value is a regression.
  std::map<std::string, at::Tensor> outputs;
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

// One sequence of a text request, unpadded: [CLS] ... [SEP] ids and their token types.
struct TextSequence {
  std::vector<std::int32_t> input_ids;       // WordPiece ids with [CLS] / [SEP]
  std::vector<std::int32_t> token_type_ids;  // one per id
};

// A sequence's head outputs by name: classification "logits" (num_labels values); span QA "start_logits" and
// "end_logits" (one value per id of the sequence).
using TextOutputs = std::map<std::string, std::vector<float>>;

// One text request: the sequences to run (a long SQuAD context is several windows, several sequences), then the
// JSON answer from their outputs.
class TextQuery {
 public:
  virtual ~TextQuery() = default;
  virtual const std::vector<TextSequence>& sequences() const = 0;
  // outputs[i] are sequences()[i]'s. Returns the response body (a JSON text).
  virtual std::string answer(const std::vector<TextOutputs>& outputs) const = 0;
};

// What a text handler is built with.
struct TextSetup {
  std::shared_ptr<const Tokenizer> tokenizer;  // the served model's vocab and casing
  std::int64_t max_positions = 512;            // the model's max_position_embeddings: no sequence may be longer
  std::vector<std::string> labels;             // classification: class names by id (config.json id2label); or none
};

// A task's text endpoint, POST /v1/models/NAME/<endpoint()> with a JSON body. query() is called from the server's
// threads concurrently: it must not change the handler.
class TextHandler {
 public:
  virtual ~TextHandler() = default;
  virtual std::string endpoint() const = 0;  // the path segment, e.g. "classify", "squad"
  // Throws bertx::Error with one line naming what is wrong in the body (the server answers 400 with it).
  virtual std::unique_ptr<TextQuery> query(const std::string& body) const = 0;
};

class Task {
 public:
  virtual ~Task() = default;
  // Adds the heads this task needs (Model::add_head).
  virtual void attach(Model& model) = 0;
  // Forward + loss of one micro-batch (batch already on the model's device).
  virtual StepOutput step(Model& model, const Batch& batch) = 0;
  // The heads, loss and head outputs (StepOutput::outputs) of one micro-batch on an encoding the host computed
  // (distillation encodes with all hidden states and attention scores, teacher and student alike). A task that
  // implements it computes step() as heads(model, batch, model.encode(batch)). Default: this task cannot be
  // distilled (bertx::Error).
  virtual StepOutput heads(Model& model, const Batch& batch, const EncoderOutput& encoding) {
    (void)model, (void)batch, (void)encoding;
    throw Error("this task has no heads() on a given encoding, so it cannot be distilled ([distill] teacher)");
  }
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
  // The text endpoint of a model trained for this task (`bertx serve`); nullptr (the default): none.
  virtual std::shared_ptr<TextHandler> text_handler(const TextSetup& setup) const {
    (void)setup;
    return nullptr;
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
