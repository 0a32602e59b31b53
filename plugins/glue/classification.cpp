// classification.cpp - sequence classification / regression (GLUE and the like): pooled [CLS] -> dropout ->
// linear (the model's classifier.* head, Hugging Face's BertForSequenceClassification), cross-entropy over
// the classes or, with one output, mean squared error (STS-B). Evaluation scores the whole split as GLUE
// does (Matthews for CoLA, accuracy + F1 for MRPC/QQP, Pearson/Spearman for STS-B, accuracy on MNLI matched
// and mismatched) and, in prediction mode, writes the GLUE submission TSVs (CoLA.tsv, MNLI-m.tsv, ...).
// Batch: input_ids, token_type_ids, attention_mask (B, S); labels (B) int64 or float (regression);
// optional example_index / example_set (B) from the glue reader (submission ids, MNLI -m/-mm).
#include <ATen/ATen.h>

#include "bertx/losses.hpp"
#include "bertx/task.hpp"
#include "components.hpp"
#include "metrics.hpp"
#include "serve_text.hpp"
#include "tasks.hpp"

namespace {

namespace glue = bertx::glue;

struct ClassificationConfig {
  std::string glue_task;        // GLUE task (labels, metrics, submission files); "" = a custom task of num_labels
  std::int64_t num_labels = 0;  // classes (1 = regression); 0 = the GLUE task's
};

// Labels of a batch must be class ids < C (a task/data mismatch otherwise surfaces as an obscure kernel error).
void check_labels(const at::Tensor& labels, const glue::TaskSpec& spec) {
  if (spec.regression() || labels.numel() == 0) return;
  const std::int64_t lo = labels.min().item<std::int64_t>(), hi = labels.max().item<std::int64_t>();
  if (lo < 0 || hi >= spec.num_labels())
    throw bertx::Error("[task] classification (" + spec.name + "): batch label " + std::to_string(lo < 0 ? lo : hi) +
                       " outside [0, " + std::to_string(spec.num_labels()) +
                       ") - do [task] glue_task/num_labels and the [data] task agree?");
}

class ClassificationEvaluator final : public bertx::Evaluator {
 public:
  ClassificationEvaluator(const glue::TaskSpec& spec, bertx::EvalContext context)
      : spec_(spec), ctx_(std::move(context)) {}

  void add(bertx::Model& model, const bertx::Batch& batch) override {
    at::Tensor logits = model.classifier_logits(model.encode(batch).pooled_output).to(at::kFloat);  // (B, C)
    const std::int64_t B = logits.size(0);
    const bool labelled = batch.has("labels");
    if (labelled) {
      check_labels(batch.at("labels"), spec_);
      loss_sum_ += bertx::losses::classification(logits, batch.at("labels")).item<double>() * static_cast<double>(B);
      loss_count_ += B;
    }
    // Host copies, (B) each: predicted value or class, gold, submission id, example set.
    auto host = [](const at::Tensor& t, at::ScalarType type) { return t.to(at::kCPU, type).contiguous(); };
    at::Tensor pred = spec_.regression() ? host(logits.squeeze(-1), at::kDouble) : host(logits.argmax(-1), at::kDouble);
    at::Tensor gold = labelled ? host(batch.at("labels"), at::kDouble) : at::zeros({B}, at::kDouble);
    const std::int64_t first = static_cast<std::int64_t>(outcomes_.size());
    at::Tensor index = batch.has("example_index") ? host(batch.at("example_index"), at::kLong)
                                                  : at::arange(first, first + B, at::kLong);
    at::Tensor set = batch.has("example_set") ? host(batch.at("example_set"), at::kLong) : at::zeros({B}, at::kLong);
    const double *p = pred.data_ptr<double>(), *g = gold.data_ptr<double>();
    const std::int64_t *i = index.data_ptr<std::int64_t>(), *s = set.data_ptr<std::int64_t>();
    for (std::int64_t b = 0; b < B; ++b) {
      glue::Outcome o;
      o.index = i[b];
      o.set = s[b];
      o.labelled = labelled;
      if (spec_.regression())
        o.value = p[b], o.gold_value = g[b];
      else
        o.label = static_cast<std::int64_t>(p[b]), o.gold = labelled ? static_cast<std::int64_t>(g[b]) : -1;
      outcomes_.push_back(o);
    }
  }

  std::map<std::string, double> finish() override {
    std::map<std::string, double> metrics = glue::score(spec_, outcomes_);
    if (loss_count_ > 0) metrics["loss"] = loss_sum_ / static_cast<double>(loss_count_);
    if (ctx_.predict) glue::write_submission(spec_, ctx_.output_dir.empty() ? "." : ctx_.output_dir, outcomes_);
    return metrics;
  }

 private:
  const glue::TaskSpec& spec_;
  bertx::EvalContext ctx_;
  std::vector<glue::Outcome> outcomes_;
  double loss_sum_ = 0;
  std::int64_t loss_count_ = 0;
};

glue::TaskSpec spec_for(const ClassificationConfig& c) {
  if (c.glue_task.empty()) {
    if (c.num_labels == 0)
      throw bertx::Error("[task] classification: set glue_task (cola, mrpc, ...) or num_labels (1 = regression)");
    return glue::generic_task(c.num_labels);
  }
  glue::TaskSpec spec = glue::task(c.glue_task);
  if (c.num_labels != 0 && c.num_labels != spec.num_labels())
    throw bertx::Error("[task] classification: num_labels = " + std::to_string(c.num_labels) + " but GLUE task " +
                       c.glue_task + " has " + std::to_string(spec.num_labels()) + " (leave num_labels at 0)");
  return spec;
}

class Classification final : public bertx::Task {
 public:
  explicit Classification(const ClassificationConfig& c) : spec_(spec_for(c)) {}

  void attach(bertx::Model& model) override { model.add_head(bertx::Head::Classification, spec_.num_labels()); }

  bertx::StepOutput step(bertx::Model& model, const bertx::Batch& batch) override {
    return heads(model, batch, model.encode(batch));
  }

  bertx::StepOutput heads(bertx::Model& model, const bertx::Batch& batch,
                          const bertx::EncoderOutput& encoding) override {
    const at::Tensor& labels = batch.at("labels");                        // (B)
    if (!checked_) check_labels(labels, spec_), checked_ = true;          // once: it syncs with the device
    at::Tensor logits = model.classifier_logits(encoding.pooled_output);  // (B, C)
    bertx::StepOutput out;
    out.loss = bertx::losses::classification(logits, labels);
    out.metrics["loss"] = out.loss.detach();
    if (!spec_.regression()) out.metrics["accuracy"] = bertx::losses::accuracy(logits.detach(), labels);
    out.outputs["logits"] = logits;
    return out;
  }

  std::unique_ptr<bertx::Evaluator> evaluator(bertx::Model&, bertx::DatasetReader&,
                                              const bertx::EvalContext& context) override {
    return std::make_unique<ClassificationEvaluator>(spec_, context);
  }

  // `bertx serve`'s /v1/models/NAME/classify: the reader's featurization on a request's text.
  std::shared_ptr<bertx::TextHandler> text_handler(const bertx::TextSetup& setup) const override {
    return glue::make_text_handler(setup, spec_);
  }

 private:
  glue::TaskSpec spec_;
  bool checked_ = false;
};

std::vector<std::string> glue_choices() {
  std::vector<std::string> c{""};
  for (const auto& n : glue::task_names()) c.push_back(n);
  return c;
}

const bertx::Fields<ClassificationConfig>& classification_fields() {
  using C = ClassificationConfig;
  static const bertx::Fields<ClassificationConfig> f{
      bertx::field("glue_task", &C::glue_task, "GLUE task: labels, metrics, submission file names (\"\" = custom)",
                   glue_choices()),
      bertx::field("num_labels", &C::num_labels, "classes (1 = regression); 0 = the GLUE task's"),
  };
  return f;
}

void register_classification(bertx::Registry& r) {
  bertx::add_task(
      r, "classification",
      "sequence classification / regression: pooled [CLS] -> dropout -> linear; GLUE metrics and submission files",
      classification_fields().schema(),
      [](const bertx::Options& o) { return std::make_shared<Classification>(classification_fields().read(o)); });
}

}  // namespace

void bertx::glue::register_classification(Registry& registry) { ::register_classification(registry); }
