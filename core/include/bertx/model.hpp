// bertx/model.hpp - the Model plugin interface: an encoder (BERT and friends) plus the heads tasks use.
//
// A Model owns one torch::nn::Module tree whose parameter names are Hugging Face's
// (`bert.embeddings.word_embeddings.weight`, `cls.predictions.bias`, `qa_outputs.weight`, ...), so a
// checkpoint is a plain safetensors file of module().named_parameters(). Heads are created on demand by
// tasks (add_head) before the optimizer sees the parameters, and their names are fixed by the head kind.
// A task needing another head registers its own module into module() in Task::attach (task.hpp).
// The host owns the model (the shared_ptr its factory returned); every call comes from the training thread.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "bertx/batch.hpp"
#include "bertx/error.hpp"
#include "bertx/execution.hpp"
#include "bertx/plugin.hpp"

namespace bertx {

// The architecture numbers every task needs (Hugging Face config.json names).
struct EncoderConfig {
  std::int64_t vocab_size = 30522;
  std::int64_t hidden_size = 768;
  std::int64_t num_hidden_layers = 12;
  std::int64_t num_attention_heads = 12;
  std::int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";  // "gelu" = exact erf GELU; "gelu_new"/"gelu_tanh" = tanh approx.
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  std::int64_t max_position_embeddings = 512;
  std::int64_t type_vocab_size = 2;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
};

struct EncoderOutput {
  at::Tensor sequence_output;             // (B, S, H) last layer
  at::Tensor pooled_output;               // (B, H) tanh(dense([CLS])); undefined if the model has no pooler
  std::vector<at::Tensor> hidden_states;  // L+1 tensors (embeddings, then each layer) when requested
  // L tensors (B, heads, S, S) when requested: each layer's attention scores q k^T / sqrt(d), before the mask and
  // the softmax (what TinyBERT's attention loss matches; distillation asks for them).
  std::vector<at::Tensor> attention_scores;
};

enum class Head {
  Pretraining,     // cls.predictions.* (MLM, decoder tied to word embeddings) + cls.seq_relationship.* (NSP)
  SpanQA,          // qa_outputs.* (start/end logits)
  Classification,  // classifier.* (num_labels outputs; 1 = regression)
  Pooler,          // bert.pooler.* alone: transformers' BertModel (pooled output, no task head)
};

class Model {
 public:
  virtual ~Model() = default;
  // The whole module tree (encoder + heads added so far), HF parameter names.
  virtual torch::nn::Module& module() = 0;
  virtual const EncoderConfig& config() const = 0;
  // Creates a head (idempotent for the same kind). num_labels is used by Classification only.
  virtual void add_head(Head head, std::int64_t num_labels = 2) = 0;
  // Encoder forward on input_ids / token_type_ids / attention_mask of the batch; all_hidden_states and
  // attention_scores fill those fields of the output (a model without attention scores throws bertx::Error).
  virtual EncoderOutput encode(const Batch& batch, bool all_hidden_states = false, bool attention_scores = false) = 0;
  // MLM logits at the given positions only: sequence_output (B, S, H), positions (B, P) -> (B, P, V).
  // With an undefined `positions`, logits at every position (B, S, V).
  virtual at::Tensor mlm_logits(const at::Tensor& sequence_output, const at::Tensor& positions) = 0;
  virtual at::Tensor nsp_logits(const at::Tensor& pooled_output) = 0;         // (B, 2)
  virtual at::Tensor span_logits(const at::Tensor& sequence_output) = 0;      // (B, S, 2): start, end
  virtual at::Tensor classifier_logits(const at::Tensor& pooled_output) = 0;  // (B, num_labels)
  // The HF config.json text of this model (architecture numbers + model_type "bert").
  virtual std::string config_json() const = 0;
  // Called by the trainer once per optimizer step, after the backward passes of all its micro-batches and
  // before the gradients are all-reduced and read by the optimizer (both take dense gradients): a model
  // whose forward leaves sparse gradients (an embedding lookup with sparse = true) makes them dense here.
  virtual void prepare_gradients() {}
  // Called once the run's or command's execution policy is known (after weights are loaded, before the first
  // forward): how the model computes from then on. A model that cannot run the policy throws a one-line
  // bertx::Error; this default runs everything but quantization.
  virtual void prepare(const ExecutionPolicy& policy) {
    if (policy.quantization != Quantization::None)
      throw Error("precision " + enum_name(policy.precision) + ": this model plugin has no quantized linears");
  }
};

template <class F>
void add_model(Registry& registry, std::string name, std::string description, Schema schema, F make) {
  registry.add(BuilderSpec{Kind::Model, std::move(name), std::move(description), std::move(schema),
                           [make](const Options& o) -> std::shared_ptr<void> {
                             std::shared_ptr<Model> p = make(o);
                             return p;
                           }});
}

}  // namespace bertx
