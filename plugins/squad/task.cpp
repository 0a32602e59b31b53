// task.cpp - the `squad` task (span extraction: start/end logits from qa_outputs, loss (CE(start) +
// CE(end)) / 2) and its evaluator, plus the registration of the plugin's three builders: the task, the
// `squad` dataset reader (reader.hpp) and the `squad` scorer of `bertx eval squad` (scorer.cpp). They live in
// one library so the evaluator can reach the reader's examples and features (SquadReader::of: a reader this
// library built). The evaluator keeps each window's logits, then runs run_squad's write_predictions
// (squad_predict.hpp), writes predictions.json, nbest_predictions.json (and null_odds.json for v2.0) into the
// run's output folder, and scores the eval split with the official metrics (squad_eval.hpp): exact_match / f1,
// or v2.0's exact, f1, HasAns_*, NoAns_*, best_*.
#include <limits>
#include <map>
#include <unordered_map>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "bertx/losses.hpp"
#include "bertx/task.hpp"
#include "components.hpp"
#include "reader.hpp"
#include "serve_text.hpp"
#include "squad_eval.hpp"
#include "squad_predict.hpp"

namespace {

using namespace bertx;

struct SquadTaskConfig {
  std::int64_t n_best_size = 20;           // n-best start/end indexes per window and answers kept
  std::int64_t max_answer_length = 30;     // longest answer in word pieces
  double null_score_diff_threshold = 0.0;  // v2.0: predict "" when null score - best score exceeds this
  bool loss_over_padding = false;          // training softmaxes over all S positions, padding too (run_squad, HF)
};

class SquadEvaluator final : public Evaluator {
 public:
  SquadEvaluator(const squad::SquadReader& reader, squad::PredictOptions options, EvalContext context)
      : reader_(reader),
        options_(options),
        context_(std::move(context)),
        logits_(reader.features().features().size()) {}

  void add(Model& model, const Batch& batch) override {
    EncoderOutput enc = model.encode(batch);
    // Padded positions are never answers; their logits are left out of the n-best lists (run_squad ranks all S
    // and drops them after, so a padded logit could take a real one's place - and bert's unpadded path leaves
    // them at the bare head bias).
    const at::Tensor padded = batch.at("attention_mask").eq(0).unsqueeze(-1);  // (B, S, 1)
    const at::Tensor logits = model.span_logits(enc.sequence_output)
                                  .to(at::kCPU, at::kFloat)
                                  .masked_fill(padded.to(at::kCPU), std::numeric_limits<float>::lowest())
                                  .contiguous();                      // (B, S, 2)
    const at::Tensor index = batch.at("feature_index").to(at::kCPU);  // (B)
    const std::int64_t B = logits.size(0), S = logits.size(1);
    const float* p = logits.data_ptr<float>();
    for (std::int64_t b = 0; b < B; ++b) {
      squad::WindowLogits& w = logits_.at(static_cast<std::size_t>(index[b].item<std::int64_t>()));
      w.start.resize(static_cast<std::size_t>(S));
      w.end.resize(static_cast<std::size_t>(S));
      for (std::int64_t s = 0; s < S; ++s) {
        w.start[static_cast<std::size_t>(s)] = p[(b * S + s) * 2];
        w.end[static_cast<std::size_t>(s)] = p[(b * S + s) * 2 + 1];
      }
    }
  }

  std::map<std::string, double> finish() override {
    const squad::Dataset& data = reader_.dataset();
    const auto predictions = squad::predict(data, reader_.features(), logits_, reader_.tokenizer(), options_);
    squad::write_prediction_files(context_.output_dir, predictions, options_.version_2_with_negative);
    spdlog::info("squad: {} predictions ({} questions) written to {}/predictions.json", predictions.size(),
                 data.examples.size(), context_.output_dir);
    std::map<std::string, double> metrics;
    if (context_.split != "eval" || !data.labelled || predictions.empty()) return metrics;
    // Score the questions predicted (all of them unless [train] eval_batches cut the pass short).
    std::unordered_map<std::string, const squad::Example*> by_id;
    for (const auto& e : data.examples) by_id[e.id] = &e;
    squad::GoldSet gold{data.path, data.version, {}};
    std::map<std::string, std::string> answers;
    squad::NaProbs na;
    for (const auto& p : predictions) {
      gold.questions.push_back({p.id, by_id.at(p.id)->answers});
      answers[p.id] = p.text;
      na.emplace_back(p.id, squad::Number{p.null_odds, false});
    }
    // v2.0: as evaluate-v2.0.py --na-prob-file null_odds.json --na-prob-thresh <null_score_diff_threshold>.
    const squad::Result r = options_.version_2_with_negative
                                ? squad::evaluate_v2(gold, answers, &na, options_.null_score_diff_threshold)
                                : squad::evaluate_v1(gold, answers);
    for (const auto& [k, v] : r.fields) metrics[k] = v.value;
    return metrics;
  }

 private:
  const squad::SquadReader& reader_;
  squad::PredictOptions options_;
  EvalContext context_;
  std::vector<squad::WindowLogits> logits_;  // per feature row; empty until its batch is added
};

class SquadTask final : public Task {
 public:
  explicit SquadTask(SquadTaskConfig c) : cfg_(c) {}

  void attach(Model& model) override { model.add_head(Head::SpanQA); }

  // By default the loss runs over real tokens (a padded position is never an answer), so the encoder may skip the
  // padding (bert's unpadded path: SQuAD windows are ~40-60% padding). run_squad and HF softmax over all S
  // positions, padding included (loss_over_padding): the padded positions' logits, computed from hidden states
  // that attend to the real tokens, then take part as extra negatives, and the encoder computes them.
  StepOutput step(Model& model, const Batch& padded_batch) override {
    Batch batch = padded_batch;  // the same tensors
    batch.padding_unread = !cfg_.loss_over_padding;
    return heads(model, batch, model.encode(batch));
  }

  // Distillation's outputs: start/end logits; without loss_over_padding the padded positions' are -1e4 (teacher
  // and student alike, so they take no part in the soft targets).
  StepOutput heads(Model& model, const Batch& batch, const EncoderOutput& enc) override {
    const at::Tensor logits = model.span_logits(enc.sequence_output);         // (B, S, 2)
    const at::Tensor start = logits.select(2, 0), end = logits.select(2, 1);  // (B, S) each
    const at::Tensor& start_pos = batch.at("start_positions");                // (B)
    const at::Tensor& end_pos = batch.at("end_positions");                    // (B)
    StepOutput out;
    out.loss = cfg_.loss_over_padding ? losses::span(start, end, start_pos, end_pos)
                                      : losses::span(start, end, start_pos, end_pos, batch.at("attention_mask"));
    out.metrics["loss"] = out.loss.detach();
    out.metrics["start_accuracy"] = losses::accuracy(start.detach(), start_pos);
    out.metrics["end_accuracy"] = losses::accuracy(end.detach(), end_pos);
    if (cfg_.loss_over_padding) {
      out.outputs["start_logits"] = start, out.outputs["end_logits"] = end;
    } else {
      const at::Tensor padded = batch.at("attention_mask") == 0;  // (B, S)
      out.outputs["start_logits"] = start.masked_fill(padded, -1e4);
      out.outputs["end_logits"] = end.masked_fill(padded, -1e4);
    }
    return out;
  }

  std::unique_ptr<Evaluator> evaluator(Model& model, DatasetReader& reader, const EvalContext& context) override {
    (void)model;
    const squad::SquadReader* squad_reader = squad::SquadReader::of(reader);
    if (!squad_reader)
      throw Error("[task] squad: needs [data] type = \"squad\" (its evaluator maps logits back to the SQuAD text)");
    squad::PredictOptions o;
    o.n_best_size = cfg_.n_best_size;
    o.max_answer_length = cfg_.max_answer_length;
    o.null_score_diff_threshold = cfg_.null_score_diff_threshold;
    o.version_2_with_negative = squad_reader->config().version_2_with_negative;
    return std::make_unique<SquadEvaluator>(*squad_reader, o, context);
  }

  // `bertx serve`'s /v1/models/NAME/squad: evaluation's windowing and post-processing on a request's text.
  std::shared_ptr<TextHandler> text_handler(const TextSetup& setup) const override {
    squad::PredictOptions o;
    o.n_best_size = cfg_.n_best_size;
    o.max_answer_length = cfg_.max_answer_length;
    o.null_score_diff_threshold = cfg_.null_score_diff_threshold;
    return squad::make_text_handler(setup, o);
  }

 private:
  SquadTaskConfig cfg_;
};

const Fields<SquadTaskConfig>& task_fields() {
  using T = SquadTaskConfig;
  static const Fields<SquadTaskConfig> f{
      field("n_best_size", &T::n_best_size,
            "n-best start/end indexes per window and answers in nbest_predictions.json"),
      field("max_answer_length", &T::max_answer_length, "longest predicted answer, in word pieces"),
      field("null_score_diff_threshold", &T::null_score_diff_threshold,
            "v2.0: predict no answer when null score - best span score exceeds this"),
      field("loss_over_padding", &T::loss_over_padding,
            "training loss softmaxes over all positions, padding included, as run_squad.py / HF (the encoder then "
            "computes the padding); default: real tokens only"),
  };
  return f;
}

const Fields<squad::SquadDataConfig>& data_fields() {
  using D = squad::SquadDataConfig;
  static const Fields<squad::SquadDataConfig> f{
      field("train_file", &D::train_file, "training JSON (train-v1.1.json)"),
      field("eval_file", &D::eval_file, "labelled JSON scored by [train] eval (dev-v1.1.json)"),
      field("test_file", &D::test_file, "JSON predicted by [train] predict (empty: eval_file)"),
      field_required("vocab", &D::vocab, "the model's vocab.txt"),
      field("do_lower_case", &D::do_lower_case, "uncased vocabulary"),
      field("version_2_with_negative", &D::version_2_with_negative, "SQuAD 2.0: questions may have no answer"),
      field("max_seq_length", &D::features, &squad::FeatureOptions::max_seq_length, "tokens per window"),
      field("doc_stride", &D::features, &squad::FeatureOptions::doc_stride, "document pieces between window starts"),
      field("max_query_length", &D::features, &squad::FeatureOptions::max_query_length, "question pieces kept"),
  };
  return f;
}

void register_squad(Registry& r) {
  add_task(r, "squad", "SQuAD v1.1/v2.0 span extraction (run_squad.py predictions, official metrics)",
           task_fields().schema(), [](const Options& o) {
             const SquadTaskConfig c = task_fields().read(o);
             if (c.n_best_size < 1 || c.max_answer_length < 1)
               throw Error("[task] squad: n_best_size and max_answer_length must be >= 1");
             return std::make_shared<SquadTask>(c);
           });
  add_dataset(r, "squad", "SQuAD v1.1/v2.0 JSON as run_squad.py features (windows, max-context flags)",
              data_fields().schema(),
              [](const Options& o) { return std::make_shared<squad::SquadReader>(data_fields().read(o)); });
  squad::register_scorer(r);
}

}  // namespace

BERTX_PLUGIN("squad", "0.1.0", "SQuAD fine-tuning: the squad task and dataset reader, and the official scorer",
             register_squad)
