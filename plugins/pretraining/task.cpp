// task.cpp - the `pretraining` task: BERT's pre-training objectives: masked-LM cross-entropy at the masked positions only
// (logits are computed for those P positions, not all S) + next-sentence-prediction cross-entropy.
// Batch: masked_lm_positions (B, P), masked_lm_labels (B, P) with -100 on padding, next_sentence_labels (B).
#include <ATen/ATen.h>

#include "bertx/losses.hpp"
#include "bertx/task.hpp"
#include "components.hpp"

namespace {

struct PretrainingConfig {
  bool nsp = true;  // train next-sentence prediction (false: MLM only, as RoBERTa)
};

class Pretraining final : public bertx::Task {
 public:
  explicit Pretraining(PretrainingConfig c) : cfg_(c) {}

  void attach(bertx::Model& model) override { model.add_head(bertx::Head::Pretraining); }

  bertx::StepOutput step(bertx::Model& model, const bertx::Batch& batch) override {
    return heads(model, batch, model.encode(batch));
  }

  bertx::StepOutput heads(bertx::Model& model, const bertx::Batch& batch, const bertx::EncoderOutput& enc) override {
    const at::Tensor& labels = batch.at("masked_lm_labels");                                         // (B, P)
    at::Tensor mlm_logits = model.mlm_logits(enc.sequence_output, batch.at("masked_lm_positions"));  // (B, P, V)
    bertx::StepOutput out;
    auto [mlm_loss, mlm_accuracy] = bertx::losses::mlm_with_accuracy(mlm_logits, labels);  // one pass over (B*P, V)
    out.metrics["mlm_loss"] = mlm_loss.detach();
    out.metrics["mlm_accuracy"] = mlm_accuracy;
    out.loss = mlm_loss;
    out.outputs["mlm_logits"] = mlm_logits.view({-1, mlm_logits.size(-1)});  // (B*P, V)
    out.outputs["mlm_logits_mask"] = labels.reshape({-1}) != -100;           // (B*P): the real masked positions
    if (cfg_.nsp) {
      at::Tensor nsp_logits = model.nsp_logits(enc.pooled_output);  // (B, 2)
      const at::Tensor& nsp_labels = batch.at("next_sentence_labels");
      at::Tensor nsp_loss = bertx::losses::classification(nsp_logits, nsp_labels);
      out.metrics["nsp_loss"] = nsp_loss.detach();
      out.metrics["nsp_accuracy"] = bertx::losses::accuracy(nsp_logits.detach(), nsp_labels);
      out.loss = out.loss + nsp_loss;
      out.outputs["nsp_logits"] = nsp_logits;
    }
    out.metrics["loss"] = out.loss.detach();
    return out;
  }

  // The MLM head's logits are computed at the masked positions only: the readers' max_predictions (both
  // readers of this plugin declare it; 20 is BERT's, when a reader has no such option).
  std::int64_t predictions_per_sequence(const bertx::Options& data) const override {
    return data.has("max_predictions") ? data.get_int("max_predictions") : 20;
  }

 private:
  PretrainingConfig cfg_;
};

const bertx::Fields<PretrainingConfig>& pretraining_fields() {
  static const bertx::Fields<PretrainingConfig> f{
      bertx::field("nsp", &PretrainingConfig::nsp, "train next-sentence prediction (false: MLM only)"),
  };
  return f;
}

void register_pretraining(bertx::Registry& r) {
  bertx::add_task(r, "pretraining",
                  "BERT pre-training: masked LM (at masked positions only) + next sentence prediction",
                  pretraining_fields().schema(),
                  [](const bertx::Options& o) { return std::make_shared<Pretraining>(pretraining_fields().read(o)); });
}

}  // namespace

void bertx::pretraining::register_task(Registry& registry) { ::register_pretraining(registry); }
