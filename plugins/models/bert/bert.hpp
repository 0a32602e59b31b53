// bert.hpp - BERT (Devlin et al. 2018) as Hugging Face's BertForPreTraining / ForQuestionAnswering /
// ForSequenceClassification lay it out: same parameter names, same maths (post-LN layers, exact GELU,
// additive attention mask of dtype-min), so HF checkpoints load and the golden outputs match.
#pragma once
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include <torch/nn/modules/embedding.h>
#include <optional>

#include <torch/nn/modules/linear.h>

#include "bertx/ops.hpp"
#include <torch/nn/modules/normalization.h>

#include "bertx/model.hpp"
#include "packed.hpp"

namespace bertx::bert {

class Bert final : public Model {
 public:
  // padding_idx: HF's word embedding ignores row 0 ([PAD]) in the backward pass (NVIDIA's does not).
  // activation_checkpointing: keep only each layer's input and recompute the layer in the backward pass
  // (less memory at seq 512, ~30% more compute).
  // unpadded: on the CPU, a batch with >= 20% padding runs the layers on its real tokens only (packed.hpp).
  // Not for a span-QA head under autograd (its loss reads every position's logit, as HF's does), nor with
  // activation checkpointing or all hidden states requested; sequence_output is then zero at padded
  // positions (pooled output, MLM at masked positions, span logits at real tokens are unchanged).
  // Attention scores (distillation) are computed beside the fused attention, one extra batched GEMM a layer.
  Bert(const EncoderConfig& config, bool padding_idx, bool activation_checkpointing = false, bool unpadded = true);
  // One encoder layer (used by the checkpointed path to replay it).
  at::Tensor run_layer(std::size_t index, const at::Tensor& x, const at::Tensor& additive_mask) {
    return layer_forward(layers_.at(index), x, additive_mask);
  }

  torch::nn::Module& module() override { return *root_; }
  const EncoderConfig& config() const override { return cfg_; }
  void add_head(Head head, std::int64_t num_labels) override;
  EncoderOutput encode(const Batch& batch, bool all_hidden_states, bool attention_scores) override;
  at::Tensor mlm_logits(const at::Tensor& sequence_output, const at::Tensor& positions) override;
  at::Tensor nsp_logits(const at::Tensor& pooled_output) override;
  at::Tensor span_logits(const at::Tensor& sequence_output) override;
  at::Tensor classifier_logits(const at::Tensor& pooled_output) override;
  std::string config_json() const override;
  void prepare_gradients() override;
  // fp32 / autocast policies: nothing to prepare (HalfCopies follows autocast); int8: the encoder layers' linears
  // run ops::linear on int8 copies of their weights (QKV joined, as in fp32) whenever autograd is off. Heads,
  // pooler and embeddings stay float32 (a few percent of the FLOPs, and the logits users compare).
  void prepare(const ExecutionPolicy& policy) override;

 private:
  struct Layer {
    torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, attention_out{nullptr}, intermediate{nullptr},
        output{nullptr};
    torch::nn::LayerNorm attention_norm{nullptr}, output_norm{nullptr};
  };
  // Inference under autocast: half-precision copies of the weights kept from one forward to the next while a
  // weight is unchanged (same storage, device and version counter), instead of autocast casting all of them
  // in every forward (measured: casts 24.6 -> 10.5 ms of a ~505 ms bf16 SQuAD forward on the CPU; the rest cast
  // LayerNorm inputs and outputs). On the CPU with oneDNN and bf16 autocast, a linear's weight is kept packed
  // for oneDNN's GEMM instead (ops::PackedWeight, one bf16 copy either way). Only without autograd; emptied by
  // the first forward with autograd on, so training holds no copies.
  class HalfCopies {
   public:
    // The parts joined along dim 0 (one part: itself) as autocast would cast them: a kept copy when autocast
    // is on for their device, autograd is off and they are float32; otherwise at::cat (one part: the tensor).
    at::Tensor get(const std::vector<at::Tensor>& parts);
    // The kept packed bf16 copy of a linear weight (out, in), joined from parts along dim 0, when autograd is
    // off, bf16 autocast is on for the CPU, the parts are float32 CPU tensors and bertx has oneDNN; otherwise
    // nullptr (then use get()).
    const ops::PackedWeight* packed(const std::vector<at::Tensor>& parts);
    // The kept int8 copy of a linear weight joined from parts (ops::QuantizedWeight) when int8 is on (prepare),
    // autograd is off and the parts are float32 CPU tensors; otherwise nullptr.
    const ops::QuantizedWeight* quantized(const std::vector<at::Tensor>& parts);
    bool int8 = false;  // the policy quantizes the encoder's linears
    void clear() {
      copies_.clear();
      packed_.clear();
      quantized_.clear();
    }

   private:
    // Which state of the parts a copy was made from: each part's storage and version counter.
    struct Stamp {
      std::vector<std::pair<const void*, std::uint32_t>> parts;
      static Stamp of(const std::vector<at::Tensor>& ts);
      bool operator==(const Stamp& o) const { return parts == o.parts; }
    };
    struct Copy {
      Stamp stamp;
      at::Tensor half;
    };
    struct Packed {
      Stamp stamp;
      std::optional<ops::PackedWeight> weight;
    };
    struct Quantized {
      Stamp stamp;
      std::optional<ops::QuantizedWeight> weight;
    };
    // Keyed by the first part (a weight is the first part of one key only).
    std::unordered_map<const c10::TensorImpl*, Copy> copies_;
    std::unordered_map<const c10::TensorImpl*, Packed> packed_;
    std::unordered_map<const c10::TensorImpl*, Quantized> quantized_;
  };

  // act(x l.weight^T + l.bias): x (..., in) -> (..., out), one 2-D GEMM (activation fused in CPU inference).
  // encoder: an encoder layer's linear (int8 under an int8 policy); false for heads.
  at::Tensor dense(torch::nn::Linear& l, const at::Tensor& x, ops::Activation act = ops::Activation::none,
                   bool encoder = true);
  // The query, key and value projections as one GEMM (their weights joined, (3H, H)): x (..., H) -> three
  // (..., H) column views of one (..., 3H) result, which ops::attention reads in place.
  std::vector<at::Tensor> qkv(Layer& l, const at::Tensor& x);
  at::Tensor dropout(const at::Tensor& x, double p) const;
  // LayerNorm(residual + dropout(x)) (dropout only in training): ops::add_layer_norm with norm's parameters.
  at::Tensor add_norm(torch::nn::LayerNorm& norm, const at::Tensor& x, const at::Tensor& residual,
                      at::Tensor* bf16_copy) const;
  // x (B, S, H) with additive_mask (B, 1, 1, S), or (T, H) with `packed` (then the mask is unused). x16: when
  // not null, in: x rounded to bf16 or undefined, read by the first GEMM instead of casting x; out: the layer's
  // output rounded to bf16 when the GEMMs read bf16 (CPU inference under bf16 autocast), else undefined.
  // scores: when not null, set to the layer's attention scores q k^T / sqrt(d) (B, heads, S, S), unmasked.
  at::Tensor layer_forward(Layer& l, const at::Tensor& x, const at::Tensor& additive_mask,
                           const Packing* packed = nullptr, at::Tensor* x16 = nullptr, at::Tensor* scores = nullptr);
  // The word, position and token-type embeddings, LayerNorm and dropout: (B, S, H), or (T, H) when packed.
  at::Tensor embed(const at::Tensor& ids, const at::Tensor& types, const Packing* packed);
  void ensure_pooler();

  EncoderConfig cfg_;
  ops::Activation act_;  // cfg_.hidden_act
  bool padding_idx_;
  bool activation_checkpointing_;
  bool unpadded_;
  std::shared_ptr<torch::nn::Module> root_, bert_, cls_;
  torch::nn::Embedding word_{nullptr}, position_{nullptr}, token_type_{nullptr};
  torch::nn::LayerNorm embedding_norm_{nullptr};
  std::vector<Layer> layers_;
  torch::nn::Linear pooler_{nullptr};
  // Heads (null until add_head).
  torch::nn::Linear transform_{nullptr}, seq_relationship_{nullptr}, qa_outputs_{nullptr}, classifier_{nullptr};
  torch::nn::LayerNorm transform_norm_{nullptr};
  at::Tensor mlm_bias_;  // cls.predictions.bias (V); the decoder weight is the word embedding (tied)
  HalfCopies half_;
};

}  // namespace bertx::bert
