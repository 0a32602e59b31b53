// bert.cpp - the BERT encoder and heads. Shapes: B batch, S sequence, H hidden, h heads, d = H / h,
// P masked positions, V vocab. Attention goes through ops::attention (heads read in place by oneDNN on the CPU;
// elsewhere compat::attention: fused SDPA on LibTorch 2.x, the explicit softmax path on 1.13).
#include "bert.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/nn/init.h>

#include "bertx/compat.hpp"
#include "bertx/ops.hpp"
#include "config.hpp"

namespace bertx::bert {

namespace {

std::shared_ptr<torch::nn::Module> child(torch::nn::Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<torch::nn::Module>());
}

// Truncated normal on [-2 std, 2 std] (TF's truncated_normal initializer, as Google's BERT) by inverse CDF.
void trunc_normal_(at::Tensor t, double std) {
  at::NoGradGuard no_grad;
  const double lo = 0.5 * (1 + std::erf(-2 / std::sqrt(2.0))), hi = 0.5 * (1 + std::erf(2 / std::sqrt(2.0)));
  t.uniform_(2 * lo - 1, 2 * hi - 1).erfinv_().mul_(std * std::sqrt(2.0)).clamp_(-2 * std, 2 * std);
}

void init_linear(torch::nn::Linear l, double std) {
  trunc_normal_(l->weight, std);
  at::NoGradGuard no_grad;
  if (l->bias.defined()) l->bias.zero_();
}

torch::nn::Linear linear(torch::nn::Module& parent, const std::string& name, std::int64_t in, std::int64_t out,
                         double std) {
  auto l = parent.register_module(name, torch::nn::Linear(in, out));
  init_linear(l, std);
  return l;
}

// LayerNorm in its parameters' dtype (fp32, also under use_pure_fp16): the input is cast first, as autocast
// does on CUDA; LibTorch 1.13's CPU kernel rejects a bf16 input with fp32 weights. A no-op when dtypes agree.
at::Tensor norm(torch::nn::LayerNorm& ln, const at::Tensor& x) { return ln->forward(x.to(ln->weight.scalar_type())); }

// x (..., in) -> (..., out) as one GEMM on (N, in) with the bias inside it (ops::linear: oneDNN for float32 on
// the CPU, else addmm): LibTorch 1.13's linear on a 3-D input runs matmul and then a separate pass adding the
// bias. weight (out, in).
// Weight: an at::Tensor (out, in), an ops::PackedWeight or an ops::QuantizedWeight.
template <typename Weight>
at::Tensor linear_2d(const at::Tensor& x, const Weight& weight, const at::Tensor& bias,
                     ops::Activation act = ops::Activation::none) {
  if (x.dim() == 2) return ops::linear(x, weight, bias, act);
  std::vector<std::int64_t> sizes = x.sizes().vec();
  if constexpr (!std::is_same_v<Weight, at::Tensor>)
    sizes.back() = weight.out_features();
  else
    sizes.back() = weight.size(0);
  return ops::linear(x.reshape({-1, x.size(-1)}), weight, bias, act).view(sizes);
}

// config.cpp's validate() admits these hidden_act names only.
ops::Activation activation_of(const std::string& hidden_act) {
  if (hidden_act == "gelu") return ops::Activation::gelu;  // exact: x * 0.5 * (1 + erf(x / sqrt(2)))
  if (hidden_act == "relu") return ops::Activation::relu;
  return ops::Activation::gelu_tanh;  // gelu_new / gelu_tanh / gelu_pytorch_tanh
}

torch::nn::LayerNorm layer_norm(torch::nn::Module& parent, const std::string& name, std::int64_t h, double eps) {
  // LayerNorm starts at weight 1, bias 0 (torch's default reset).
  return parent.register_module(name, torch::nn::LayerNorm(torch::nn::LayerNormOptions({h}).eps(eps)));
}

}  // namespace

// Recomputes one encoder layer in the backward pass instead of keeping its activations (the reentrant
// torch.utils.checkpoint): forward runs without autograd and remembers the RNG and autocast state; backward
// replays the layer with the same dropout masks and precision, then back-propagates through the replay.
struct CheckpointedLayer : torch::autograd::Function<CheckpointedLayer> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, at::Tensor x, at::Tensor mask, std::int64_t self,
                            std::int64_t index) {
    ctx->saved_data["self"] = self;
    ctx->saved_data["index"] = index;
    at::Generator gen = at::globalContext().defaultGenerator(x.device().type());
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      ctx->saved_data["rng"] = gen.get_state();
    }
    const auto autocast = compat::autocast_dtype(x.device().type());
    ctx->saved_data["autocast"] = autocast ? static_cast<std::int64_t>(*autocast) : std::int64_t{-1};
    ctx->save_for_backward({x, mask});
    at::NoGradGuard no_grad;
    return reinterpret_cast<Bert*>(self)->run_layer(static_cast<std::size_t>(index), x, mask);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto saved = ctx->get_saved_variables();
    at::Tensor x = saved[0].detach().requires_grad_(true), mask = saved[1];
    auto* self = reinterpret_cast<Bert*>(ctx->saved_data["self"].toInt());
    at::Generator gen = at::globalContext().defaultGenerator(x.device().type());
    at::Tensor current;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      current = gen.get_state();
      gen.set_state(ctx->saved_data["rng"].toTensor());
    }
    at::Tensor y;
    {
      at::AutoGradMode grad_on(true);
      std::optional<compat::AutocastScope> autocast;
      const std::int64_t dtype = ctx->saved_data["autocast"].toInt();
      if (dtype >= 0) autocast.emplace(x.device().type(), static_cast<at::ScalarType>(dtype));
      y = self->run_layer(static_cast<std::size_t>(ctx->saved_data["index"].toInt()), x, mask);
    }
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(current);
    }
    torch::autograd::backward({y}, {grad[0]});
    return {x.grad(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

Bert::Bert(const EncoderConfig& c, bool padding_idx, bool activation_checkpointing, bool unpadded)
    : cfg_(c),
      act_(activation_of(c.hidden_act)),
      padding_idx_(padding_idx),
      activation_checkpointing_(activation_checkpointing),
      unpadded_(unpadded) {
  validate(c, "[model]");
  const double std = c.initializer_range;
  root_ = std::make_shared<torch::nn::Module>("BertForPreTraining");
  bert_ = child(*root_, "bert");

  auto emb = child(*bert_, "embeddings");
  auto word_opts = torch::nn::EmbeddingOptions(c.vocab_size, c.hidden_size);
  if (padding_idx) word_opts.padding_idx(0);
  word_ = emb->register_module("word_embeddings", torch::nn::Embedding(word_opts));
  position_ =
      emb->register_module("position_embeddings", torch::nn::Embedding(c.max_position_embeddings, c.hidden_size));
  token_type_ = emb->register_module("token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, c.hidden_size));
  for (auto* e : {&word_, &position_, &token_type_}) trunc_normal_((*e)->weight, std);
  if (padding_idx) {
    at::NoGradGuard no_grad;
    word_->weight[0].zero_();  // HF zeroes the padding row after init
  }
  embedding_norm_ = layer_norm(*emb, "LayerNorm", c.hidden_size, c.layer_norm_eps);

  auto encoder = child(*bert_, "encoder");
  auto layer_list = child(*encoder, "layer");
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    auto layer = child(*layer_list, std::to_string(i));
    auto attention = child(*layer, "attention");
    auto self = child(*attention, "self");
    auto attention_output = child(*attention, "output");
    auto intermediate = child(*layer, "intermediate");
    auto output = child(*layer, "output");
    Layer l;
    l.query = linear(*self, "query", c.hidden_size, c.hidden_size, std);
    l.key = linear(*self, "key", c.hidden_size, c.hidden_size, std);
    l.value = linear(*self, "value", c.hidden_size, c.hidden_size, std);
    l.attention_out = linear(*attention_output, "dense", c.hidden_size, c.hidden_size, std);
    l.attention_norm = layer_norm(*attention_output, "LayerNorm", c.hidden_size, c.layer_norm_eps);
    l.intermediate = linear(*intermediate, "dense", c.hidden_size, c.intermediate_size, std);
    l.output = linear(*output, "dense", c.intermediate_size, c.hidden_size, std);
    l.output_norm = layer_norm(*output, "LayerNorm", c.hidden_size, c.layer_norm_eps);
    layers_.push_back(l);
  }
}

void Bert::ensure_pooler() {
  if (pooler_) return;
  auto pooler = child(*bert_, "pooler");
  pooler_ = linear(*pooler, "dense", cfg_.hidden_size, cfg_.hidden_size, cfg_.initializer_range);
}

void Bert::add_head(Head head, std::int64_t num_labels) {
  const double std = cfg_.initializer_range;
  const std::int64_t H = cfg_.hidden_size;
  switch (head) {
    case Head::Pretraining: {
      if (transform_) return;
      ensure_pooler();
      cls_ = child(*root_, "cls");
      auto predictions = child(*cls_, "predictions");
      auto transform = child(*predictions, "transform");
      transform_ = linear(*transform, "dense", H, H, std);
      transform_norm_ = layer_norm(*transform, "LayerNorm", H, cfg_.layer_norm_eps);
      mlm_bias_ = predictions->register_parameter("bias", at::zeros({cfg_.vocab_size}));
      seq_relationship_ = linear(*cls_, "seq_relationship", H, 2, std);
      return;
    }
    case Head::SpanQA:
      if (!qa_outputs_) qa_outputs_ = linear(*root_, "qa_outputs", H, 2, std);
      return;
    case Head::Classification:
      if (classifier_) {
        if (classifier_->options.out_features() != num_labels)
          throw Error("[model] classifier head already has " + std::to_string(classifier_->options.out_features()) +
                      " labels, asked for " + std::to_string(num_labels));
        return;
      }
      if (num_labels < 1)
        throw Error("[model] classifier head needs num_labels >= 1, got " + std::to_string(num_labels));
      ensure_pooler();
      classifier_ = linear(*root_, "classifier", H, num_labels, std);
      return;
    case Head::Pooler:
      ensure_pooler();
      return;
  }
}

Bert::HalfCopies::Stamp Bert::HalfCopies::Stamp::of(const std::vector<at::Tensor>& ts) {
  Stamp s;
  for (const at::Tensor& t : ts) s.parts.emplace_back(t.data_ptr(), t._version());
  return s;
}

namespace {
at::Tensor joined(const std::vector<at::Tensor>& parts) { return parts.size() == 1 ? parts[0] : at::cat(parts, 0); }
}  // namespace

at::Tensor Bert::HalfCopies::get(const std::vector<at::Tensor>& parts) {
  const at::Tensor& t = parts.at(0);
  if (!t.defined() || at::GradMode::is_enabled() || t.scalar_type() != at::kFloat) return joined(parts);
  const std::optional<at::ScalarType> half = compat::autocast_dtype(t.device().type());
  if (!half) return joined(parts);
  Copy& c = copies_[t.unsafeGetTensorImpl()];
  const Stamp stamp = Stamp::of(parts);
  if (!c.half.defined() || !(c.stamp == stamp) || c.half.scalar_type() != *half || c.half.device() != t.device())
    c = Copy{stamp, joined(parts).to(*half)};
  return c.half;
}

const ops::PackedWeight* Bert::HalfCopies::packed(const std::vector<at::Tensor>& parts) {
  const at::Tensor& t = parts.at(0);
  if (!ops::PackedWeight::available() || at::GradMode::is_enabled() || !t.device().is_cpu() ||
      t.scalar_type() != at::kFloat || t.dim() != 2 || compat::autocast_dtype(at::kCPU) != at::kBFloat16)
    return nullptr;
  Packed& p = packed_[t.unsafeGetTensorImpl()];
  const Stamp stamp = Stamp::of(parts);
  if (!p.weight || !(p.stamp == stamp)) p = Packed{stamp, ops::PackedWeight(joined(parts), at::kBFloat16)};
  return &*p.weight;
}

const ops::QuantizedWeight* Bert::HalfCopies::quantized(const std::vector<at::Tensor>& parts) {
  const at::Tensor& t = parts.at(0);
  if (!int8 || at::GradMode::is_enabled() || !t.device().is_cpu() || t.scalar_type() != at::kFloat || t.dim() != 2)
    return nullptr;
  Quantized& q = quantized_[t.unsafeGetTensorImpl()];
  const Stamp stamp = Stamp::of(parts);
  if (!q.weight || !(q.stamp == stamp)) q = Quantized{stamp, ops::QuantizedWeight(joined(parts))};
  return &*q.weight;
}

void Bert::prepare(const ExecutionPolicy& policy) {
  half_.clear();
  half_.int8 = policy.quantization == Quantization::Int8Dynamic;
  if (half_.int8 && !ops::PackedWeight::available())
    throw Error("precision int8: this bertx was built without oneDNN (libdnnl-dev), which runs the int8 GEMMs");
}

at::Tensor Bert::dense(torch::nn::Linear& l, const at::Tensor& x, ops::Activation act, bool encoder) {
  if (encoder)
    if (const ops::QuantizedWeight* q = half_.quantized({l->weight})) return linear_2d(x, *q, l->bias, act);
  if (const ops::PackedWeight* w = half_.packed({l->weight})) return linear_2d(x, *w, half_.get({l->bias}), act);
  return linear_2d(x, half_.get({l->weight}), half_.get({l->bias}), act);
}

std::vector<at::Tensor> Bert::qkv(Layer& l, const at::Tensor& x) {
  const std::vector<at::Tensor> w{l.query->weight, l.key->weight, l.value->weight},
      b{l.query->bias, l.key->bias, l.value->bias};
  const at::Tensor y = [&] {
    if (const ops::QuantizedWeight* q = half_.quantized(w)) return linear_2d(x, *q, joined(b));
    if (const ops::PackedWeight* pw = half_.packed(w)) return linear_2d(x, *pw, half_.get(b));
    return linear_2d(x, half_.get(w), half_.get(b));
  }();  // (..., 3H)
  // split, not three narrows: its backward joins the three gradients in one copy (a narrow's backward
  // zero-fills a full (..., 3H) gradient each).
  return y.split(cfg_.hidden_size, -1);
}

at::Tensor Bert::dropout(const at::Tensor& x, double p) const {
  return (p > 0 && root_->is_training()) ? ops::dropout(x, p) : x;
}

at::Tensor Bert::add_norm(torch::nn::LayerNorm& norm, const at::Tensor& x, const at::Tensor& residual,
                          at::Tensor* bf16_copy) const {
  const double p = root_->is_training() ? cfg_.hidden_dropout_prob : 0.0;
  return ops::add_layer_norm(x, residual, norm->weight, norm->bias, norm->options.eps(), p, bf16_copy);
}

at::Tensor Bert::layer_forward(Layer& l, const at::Tensor& x, const at::Tensor& additive_mask, const Packing* packed,
                               at::Tensor* x16, at::Tensor* scores) {
  const std::int64_t h = cfg_.num_attention_heads;
  const double p_attn = root_->is_training() ? cfg_.attention_probs_dropout_prob : 0.0;
  // CPU inference under bf16 autocast: the GEMMs read bf16, so each LayerNorm also writes its output in bf16
  // (one pass) instead of every GEMM casting its float32 input.
  const bool bf16_inputs = half_.packed({l.intermediate->weight}) != nullptr;
  const at::Tensor& in = x16 && x16->defined() && bf16_inputs ? *x16 : x;
  const std::vector<at::Tensor> heads_in = qkv(l, in);  // q, k, v: 3 x (B, S, H) / (T, H), column views
  if (scores) {                                         // (B, h, S, d) x (B, h, d, S) / sqrt(d) -> (B, h, S, S)
    const std::int64_t B = x.size(0), S = x.size(1), d = cfg_.hidden_size / h;
    auto split = [&](const at::Tensor& t) { return t.reshape({B, S, h, d}).transpose(1, 2); };
    *scores = at::matmul(split(heads_in[0]), split(heads_in[1]).transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
  }
  const at::Tensor context =
      packed ? packed->attention(heads_in[0], heads_in[1], heads_in[2], h, p_attn)               // (T, H)
             : ops::attention(heads_in[0], heads_in[1], heads_in[2], h, additive_mask, p_attn);  // (B, S, H)
  at::Tensor a16, y16;
  const at::Tensor a = add_norm(l.attention_norm, dense(l.attention_out, context), x, bf16_inputs ? &a16 : nullptr);
  const at::Tensor i = dense(l.intermediate, bf16_inputs ? a16 : a, act_);  // (B, S, I) / (T, I)
  at::Tensor y =
      add_norm(l.output_norm, dense(l.output, i), a, bf16_inputs && x16 ? &y16 : nullptr);  // (B, S, H) / (T, H)
  if (x16) *x16 = y16;
  return y;
}

at::Tensor Bert::embed(const at::Tensor& ids, const at::Tensor& types, const Packing* packed) {
  // With the pretraining head the word embedding is also the MLM decoder, whose dense gradient arrives in the
  // same backward pass: a sparse gradient from the lookup is then added into it row by row instead of a dense
  // (V, H) zero fill plus a full add (prepare_gradients densifies one that arrives alone).
  const bool sparse = static_cast<bool>(transform_);
  auto word = [&](const at::Tensor& i) {
    return at::embedding(word_->weight, i, padding_idx_ ? 0 : -1, false, sparse);
  };
  at::Tensor x;
  if (packed) {
    x = word(packed->pack(ids)) + position_->forward(packed->positions()) +
        token_type_->forward(packed->pack(types));  // (T, H)
  } else {
    const at::Tensor positions = at::arange(ids.size(1), ids.options()).unsqueeze(0);  // (1, S)
    x = word(ids) + position_->forward(positions) + token_type_->forward(types);       // (B, S, H)
  }
  return dropout(norm(embedding_norm_, x), cfg_.hidden_dropout_prob);
}

EncoderOutput Bert::encode(const Batch& batch, bool all_hidden_states, bool attention_scores) {
  const at::Tensor& ids = batch.at("input_ids");  // (B, S)
  const std::int64_t B = ids.size(0), S = ids.size(1);
  if (S > cfg_.max_position_embeddings)
    throw Error("[model] sequence length " + std::to_string(S) + " exceeds max_position_embeddings " +
                std::to_string(cfg_.max_position_embeddings));
  at::Tensor types = batch.has("token_type_ids") ? batch.at("token_type_ids") : at::zeros_like(ids);
  at::Tensor mask = batch.has("attention_mask") ? batch.at("attention_mask") : at::ones_like(ids);

  if (at::GradMode::is_enabled()) half_.clear();  // training: no inference copies held
  const bool checkpointed =
      activation_checkpointing_ && root_->is_training() && at::GradMode::is_enabled() && !attention_scores;
  // A span-QA loss as HF's reads the padded positions' logits too (a softmax over all S): no packing under autograd
  // unless the batch says its padding is never read (the squad task's loss over real tokens).
  const bool packable = unpadded_ && batch.has("attention_mask") && !all_hidden_states && !attention_scores &&
                        !checkpointed && !(qa_outputs_ && at::GradMode::is_enabled() && !batch.padding_unread);
  // Below 20% padding the per-sequence attention calls cost about what packing saves: the bundled tiny
  // pre-training data (11% padding, batch 32) ran 2-6% slower packed; SQuAD windows (57%) run 2.1-2.4x faster.
  const std::optional<Packing> packed = packable ? Packing::plan(mask, /*min_padding=*/0.2) : std::nullopt;
  EncoderOutput out;
  if (packed) {
    at::Tensor x = embed(ids, types, &*packed);  // (T, H)
    at::Tensor x16;  // x in bf16 for the next layer's GEMMs (CPU bf16 inference), else undefined
    for (auto& layer : layers_) x = layer_forward(layer, x, at::Tensor(), &*packed, &x16);
    out.sequence_output = packed->unpack(x);  // (B, S, H), zeros at padded positions
  } else {
    at::Tensor x = embed(ids, types, nullptr);  // (B, S, H)
    at::Tensor additive = additive_attention_mask(mask);
    if (all_hidden_states) out.hidden_states.push_back(x);
    at::Tensor x16;
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      at::Tensor scores;
      x = checkpointed ? CheckpointedLayer::apply(x, additive, reinterpret_cast<std::int64_t>(this),
                                                  static_cast<std::int64_t>(i))
                       : layer_forward(layers_[i], x, additive, nullptr, &x16, attention_scores ? &scores : nullptr);
      if (attention_scores) out.attention_scores.push_back(scores);
      if (all_hidden_states) out.hidden_states.push_back(x);
    }
    out.sequence_output = x;
  }
  if (pooler_) out.pooled_output = at::tanh(dense(pooler_, out.sequence_output.select(1, 0)));  // (B, H) from [CLS]
  return out;
}

namespace {

// The tied word-embedding weight as the MLM decoder reads it during training: forward the identity; backward adds
// the decoder's dense (V, H) gradient into the parameter's .grad itself (as Megatron's fused weight-gradient
// accumulation writes main_grad) and hands autograd nothing for it. Why: the embedding lookup's sparse gradient
// arrives after the decoder's, and LibTorch 2.x's engine sums a dense buffer and a later sparse gradient out of
// place (input_buffer.cpp: a new (V, H) tensor and a full copy, 191 ms of a 4.3 s base seq-128 fp32 step on one
// core; 1.13 added in place). Alone, the sparse gradient is added in place by AccumulateGrad into the dense .grad
// (which still runs, so data-parallel ready hooks see the whole gradient). The decoder's backward (ops::linear,
// at::linear) returns a fresh weight gradient that nothing else holds, so the first micro-batch takes it as .grad
// without a copy, as AccumulateGrad would.
struct TiedDecoderWeightFn : torch::autograd::Function<TiedDecoderWeightFn> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& weight) {
    ctx->saved_data["weight"] = weight;  // the leaf itself (not save_for_backward: its .grad is what we write)
    return weight.view_as(weight);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    at::Tensor weight = ctx->saved_data["weight"].toTensor();
    const at::Tensor& g = grads[0];  // (V, H), dense
    if (!g.defined()) return {at::Tensor()};
    at::Tensor& grad = weight.mutable_grad();
    if (!grad.defined())
      grad = g.is_contiguous() ? g.detach() : g.contiguous();
    else if (grad.is_sparse())
      grad = g + grad;  // only if a sparse one came first (not in bertx's order); dense + sparse -> dense
    else
      grad.add_(g);
    return {at::Tensor()};
  }
};

}  // namespace

at::Tensor Bert::mlm_logits(const at::Tensor& seq, const at::Tensor& positions) {
  if (!transform_) throw Error("[model] mlm_logits needs the pretraining head (task did not add it)");
  at::Tensor h = seq;  // (B, S, H)
  if (positions.defined()) {
    const std::int64_t B = seq.size(0), P = positions.size(1), H = seq.size(2);
    h = seq.gather(1, positions.unsqueeze(-1).expand({B, P, H}));  // (B, P, H): decoder runs on P, not S
  }
  // LayerNorm in fp32: under autocast the dense output is bf16/fp16 while the norm weights stay fp32.
  h = norm(transform_norm_, dense(transform_, h, act_, /*encoder=*/false));
  // (B, P, V), decoder tied to the word embeddings
  if (const ops::PackedWeight* w = half_.packed({word_->weight})) return linear_2d(h, *w, half_.get({mlm_bias_}));
  const at::Tensor& w = word_->weight;  // (V, H)
  const bool tied_grad = at::GradMode::is_enabled() && w.requires_grad();
  return linear_2d(h, tied_grad ? TiedDecoderWeightFn::apply(w) : half_.get({w}), half_.get({mlm_bias_}));
}

at::Tensor Bert::nsp_logits(const at::Tensor& pooled) {
  if (!seq_relationship_) throw Error("[model] nsp_logits needs the pretraining head (task did not add it)");
  return dense(seq_relationship_, pooled);  // (B, 2)
}

at::Tensor Bert::span_logits(const at::Tensor& seq) {
  if (!qa_outputs_) throw Error("[model] span_logits needs the span-QA head (task did not add it)");
  return dense(qa_outputs_, seq);  // (B, S, 2)
}

at::Tensor Bert::classifier_logits(const at::Tensor& pooled) {
  if (!classifier_) throw Error("[model] classifier_logits needs the classification head (task did not add it)");
  return dense(classifier_, dropout(pooled, cfg_.hidden_dropout_prob));  // (B, num_labels)
}

// The transformers class of the heads added: a task head before the pre-training head, the encoder alone last.
std::string Bert::config_json() const {
  if (qa_outputs_) return hf_config_json(cfg_, "BertForQuestionAnswering");
  if (classifier_) return hf_config_json(cfg_, "BertForSequenceClassification", classifier_->options.out_features());
  return hf_config_json(cfg_, transform_ ? "BertForPreTraining" : "BertModel");
}

void Bert::prepare_gradients() {
  // embed()'s sparse word-embedding gradient is added in place into the dense one the MLM decoder wrote into .grad
  // (TiedDecoderWeightFn); one that arrives alone stays sparse, and the optimizers and the gradient all-reduce take
  // dense gradients.
  for (auto& p : root_->parameters(/*recurse=*/true))
    if (p.grad().defined() && p.grad().is_sparse()) p.mutable_grad() = p.grad().to_dense();
}

}  // namespace bertx::bert
