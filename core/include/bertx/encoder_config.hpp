// bertx/encoder_config.hpp - the architecture numbers of an encoder, without LibTorch: config.json readers
// (and their fuzz target) need them without compiling the module headers. bertx/model.hpp includes it.
#pragma once
#include <cstdint>
#include <string>

namespace bertx {

// The architecture numbers every task needs (Hugging Face config.json names).
struct EncoderConfig {
  std::int64_t vocab_size = 30522;
  std::int64_t hidden_size = 768;
  std::int64_t num_hidden_layers = 12;
  std::int64_t num_attention_heads = 12;
  std::int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";               // "gelu" = exact erf GELU; "gelu_new"/"gelu_tanh" = tanh approx.
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  std::int64_t max_position_embeddings = 512;
  std::int64_t type_vocab_size = 2;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
};

}  // namespace bertx
