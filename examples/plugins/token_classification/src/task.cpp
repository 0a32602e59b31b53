// task.cpp - token classification (Hugging Face's BertForTokenClassification, BioBERT's NER fine-tuning):
// last-layer hidden states -> dropout (hidden_dropout_prob) -> linear `classifier` (H -> num_labels), mean
// cross-entropy over the positions whose label is not -100 (each word's first WordPiece).
// The head is the task's own module, registered into the model's tree as `classifier.*` during attach(),
// so it is trained, checkpointed and loaded like any head of the model - no change to the Model interface.
// Evaluation gathers each word's prediction (its first piece's argmax), re-assembles whole sentences from
// the reader's chunks and scores them with strict-IOB2 entity precision / recall / F1 (entity_metrics.hpp);
// logged as eval_precision, eval_recall, eval_f1, eval_accuracy (word level), eval_loss and eval_f1_<TYPE>
// (a labelled test split, scored when predicting: eval_test_f1, ...).
#include "task.hpp"

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/linear.h>

#include <filesystem>
#include <fstream>

#include "entity_metrics.hpp"
#include "reader.hpp"

namespace ner {

namespace {

at::Tensor token_loss(const at::Tensor& logits, const at::Tensor& labels) {  // logits (B, S, C), labels (B, S)
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}).to(at::kFloat), labels.reshape({-1}), {},
                                at::Reduction::Mean, kIgnore);
}

void check_labels(const at::Tensor& labels, std::int64_t num_labels) {
  const at::Tensor valid = labels.ne(kIgnore);
  if (!valid.any().item<bool>()) return;
  const at::Tensor v = labels.masked_select(valid);
  const std::int64_t lo = v.min().item<std::int64_t>(), hi = v.max().item<std::int64_t>();
  if (lo < 0 || hi >= num_labels)
    throw bertx::Error("[task] token_classification: label id " + std::to_string(lo < 0 ? lo : hi) + " outside [0, " +
                       std::to_string(num_labels) + ") - does num_labels equal the length of [data] labels?");
}

void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw bertx::Error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

class TokenEvaluator final : public bertx::Evaluator {
 public:
  TokenEvaluator(torch::nn::Linear head, const BioReader& reader, std::int64_t num_labels, bertx::EvalContext ctx,
                 std::string predictions)
      : head_(std::move(head)), reader_(reader), ctx_(std::move(ctx)), predictions_file_(std::move(predictions)) {
    if (reader.labels().size() != num_labels)
      throw bertx::Error("[task] token_classification: num_labels = " + std::to_string(num_labels) +
                         " but [data] labels has " + std::to_string(reader.labels().size()) + " entries");
    predicted_.resize(reader.chunks().size());
  }

  void add(bertx::Model& model, const bertx::Batch& batch) override {
    at::Tensor logits = head_->forward(model.encode(batch).sequence_output).to(at::kFloat);  // (B, S, C)
    const std::int64_t B = logits.size(0), S = logits.size(1);
    if (batch.has("labels")) {
      loss_sum_ += token_loss(logits, batch.at("labels")).item<double>() * static_cast<double>(B);
      loss_count_ += B;
    }
    const at::Tensor pred = logits.argmax(-1).to(at::kCPU).contiguous();                     // (B, S)
    const at::Tensor starts = batch.at("word_starts").to(at::kCPU, at::kLong).contiguous();  // (B, S)
    const at::Tensor index = batch.at("chunk_index").to(at::kCPU, at::kLong).contiguous();   // (B)
    const auto* p = pred.data_ptr<std::int64_t>();
    const auto* s = starts.data_ptr<std::int64_t>();
    const auto* i = index.data_ptr<std::int64_t>();
    for (std::int64_t b = 0; b < B; ++b) {
      auto& out = predicted_.at(static_cast<std::size_t>(i[b]));
      out.clear();
      for (std::int64_t t = 0; t < S; ++t)
        if (s[b * S + t]) out.push_back(p[b * S + t]);
    }
  }

  std::map<std::string, double> finish() override {
    const auto& sentences = reader_.sentences();
    const auto& chunks = reader_.chunks();
    std::vector<std::vector<std::string>> pred(sentences.size());
    for (std::size_t s = 0; s < sentences.size(); ++s) pred[s].assign(sentences[s].words.size(), "O");
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      const Chunk& ch = chunks[c];
      if (predicted_[c].size() != ch.words)
        throw bertx::Error("[task] token_classification: chunk " + std::to_string(c) + " of " + reader_.file() +
                           " was not evaluated (" + std::to_string(predicted_[c].size()) + " of " +
                           std::to_string(ch.words) + " words)");
      for (std::size_t w = 0; w < ch.words; ++w)
        pred[ch.sentence][ch.first_word + w] = reader_.labels().name(predicted_[c][w]);
    }
    // The labelled eval split's metrics are plain names (the host logs eval_f1, ...); another labelled split
    // (a tagged test.tsv, as BioBERT's sets have) gets its name as a prefix: eval_test_f1, ...
    const std::string p = ctx_.split == "eval" ? "" : ctx_.split + "_";
    std::map<std::string, double> m;
    if (reader_.labelled()) {
      std::vector<std::vector<std::string>> gold;
      gold.reserve(sentences.size());
      for (const auto& s : sentences) gold.push_back(s.tags);
      const EntityReport r = evaluate(gold, pred);
      m[p + "precision"] = r.total.precision();
      m[p + "recall"] = r.total.recall();
      m[p + "f1"] = r.total.f1();
      m[p + "accuracy"] = r.accuracy();
      for (const auto& [type, counts] : r.by_type)
        if (!type.empty()) m[p + "f1_" + type] = counts.f1();
      if (loss_count_ > 0) m[p + "loss"] = loss_sum_ / static_cast<double>(loss_count_);
    }
    if (ctx_.predict) write_predictions(pred);
    return m;
  }

 private:
  // CoNLL layout: word, gold tag (labelled splits), predicted tag; a blank line after each sentence.
  void write_predictions(const std::vector<std::vector<std::string>>& pred) const {
    std::string text;
    const auto& sentences = reader_.sentences();
    for (std::size_t s = 0; s < sentences.size(); ++s) {
      for (std::size_t w = 0; w < sentences[s].words.size(); ++w) {
        text += sentences[s].words[w];
        if (!sentences[s].tags.empty()) text += "\t" + sentences[s].tags[w];
        text += "\t" + pred[s][w] + "\n";
      }
      text += "\n";
    }
    const std::string dir = ctx_.output_dir.empty() ? "." : ctx_.output_dir;
    std::filesystem::create_directories(dir);
    write_atomically((std::filesystem::path(dir) / (ctx_.split + "_" + predictions_file_)).string(), text);
  }

  torch::nn::Linear head_;
  const BioReader& reader_;
  bertx::EvalContext ctx_;
  std::string predictions_file_;
  std::vector<std::vector<std::int64_t>> predicted_;  // per chunk: one label id per word
  double loss_sum_ = 0;
  std::int64_t loss_count_ = 0;
};

class TokenClassification final : public bertx::Task {
 public:
  explicit TokenClassification(TaskConfig c) : cfg_(std::move(c)) {
    if (cfg_.num_labels < 2)
      throw bertx::Error("[task] token_classification: num_labels must be >= 2 (O and one B/I pair), got " +
                         std::to_string(cfg_.num_labels));
  }

  void attach(bertx::Model& model) override {
    for (const auto& child : model.module().named_children())
      if (child.key() == "classifier")
        throw bertx::Error(
            "[task] token_classification: the model already has a 'classifier' module (another task's head?)");
    const bertx::EncoderConfig& e = model.config();
    head_ = torch::nn::Linear(e.hidden_size, cfg_.num_labels);
    torch::nn::init::normal_(head_->weight, 0.0, e.initializer_range);  // BERT's initialisation
    torch::nn::init::zeros_(head_->bias);
    model.module().register_module("classifier", head_);
    dropout_ = e.hidden_dropout_prob;
  }

  bertx::StepOutput step(bertx::Model& model, const bertx::Batch& batch) override {
    const at::Tensor& labels = batch.at("labels");                          // (B, S)
    if (!checked_) check_labels(labels, cfg_.num_labels), checked_ = true;  // once: it syncs with the device
    at::Tensor hidden = model.encode(batch).sequence_output;                // (B, S, H)
    hidden = at::dropout(hidden, dropout_, model.module().is_training());
    at::Tensor logits = head_->forward(hidden);  // (B, S, C)
    bertx::StepOutput out;
    out.loss = token_loss(logits, labels);
    out.metrics["loss"] = out.loss.detach();
    const at::Tensor valid = labels.ne(kIgnore);
    out.metrics["token_accuracy"] = logits.detach().argmax(-1).eq(labels).logical_and(valid).sum().to(at::kFloat) /
                                    valid.sum().clamp_min(1).to(at::kFloat);
    return out;
  }

  std::unique_ptr<bertx::Evaluator> evaluator(bertx::Model&, bertx::DatasetReader& reader,
                                              const bertx::EvalContext& ctx) override {
    const auto* bio = dynamic_cast<const BioReader*>(&reader);
    if (bio == nullptr)
      throw bertx::Error(
          "[task] token_classification evaluates [data] type = \"bio_tsv\" only (it needs the reader's sentences)");
    return std::make_unique<TokenEvaluator>(head_, *bio, cfg_.num_labels, ctx, cfg_.predictions);
  }

 private:
  TaskConfig cfg_;
  torch::nn::Linear head_{nullptr};
  double dropout_ = 0.1;
  bool checked_ = false;
};

}  // namespace

std::shared_ptr<bertx::Task> make_task(const TaskConfig& config) {
  return std::make_shared<TokenClassification>(config);
}

}  // namespace ner
