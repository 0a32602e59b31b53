// config.cpp - presets from the seeds (Google/NVIDIA BERT base/large, BioBERT) and HF config.json I/O.
#include "config.hpp"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "bertx/json.hpp"

namespace bertx::bert {

namespace {

EncoderConfig make(std::int64_t vocab, std::int64_t hidden, std::int64_t layers, std::int64_t heads,
                   std::int64_t inter) {
  EncoderConfig c;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.intermediate_size = inter;
  return c;
}

struct Preset {
  const char* name;
  EncoderConfig config;
};

const std::vector<Preset>& presets() {
  // Uncased vocab 30522 (Google's uncased_L-*), cased 28996; BioBERT v1.1 reuses BERT's cased vocab.
  static const std::vector<Preset> p{
      {"bert-base-uncased", make(30522, 768, 12, 12, 3072)},
      {"bert-base-cased", make(28996, 768, 12, 12, 3072)},
      {"bert-large-uncased", make(30522, 1024, 24, 16, 4096)},
      {"bert-large-cased", make(28996, 1024, 24, 16, 4096)},
      {"biobert-base-cased", make(28996, 768, 12, 12, 3072)},
      {"biobert-large-cased", make(28996, 1024, 24, 16, 4096)},
      {"tiny", make(30522, 128, 2, 2, 512)},  // CPU smoke runs and tests
  };
  return p;
}

}  // namespace

const std::vector<std::string>& preset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& p : presets()) n.push_back(p.name);
    return n;
  }();
  return names;
}

EncoderConfig preset(const std::string& name) {
  for (const auto& p : presets())
    if (name == p.name) return p.config;
  std::string all;
  for (const auto& n : preset_names()) all += (all.empty() ? "" : ", ") + n;
  throw Error("unknown BERT preset '" + name + "'; available: " + all + ", custom");
}

void validate(const EncoderConfig& c, const std::string& where) {
  auto positive = [&](std::int64_t v, const char* key) {
    if (v <= 0) throw Error(where + ": " + key + " must be > 0, got " + std::to_string(v));
  };
  positive(c.vocab_size, "vocab_size");
  positive(c.hidden_size, "hidden_size");
  positive(c.num_hidden_layers, "num_hidden_layers");
  positive(c.num_attention_heads, "num_attention_heads");
  positive(c.intermediate_size, "intermediate_size");
  positive(c.max_position_embeddings, "max_position_embeddings");
  positive(c.type_vocab_size, "type_vocab_size");
  if (c.hidden_size % c.num_attention_heads != 0)
    throw Error(where + ": hidden_size " + std::to_string(c.hidden_size) +
                " is not a multiple of num_attention_heads " + std::to_string(c.num_attention_heads));
  static const std::vector<std::string> acts{"gelu", "gelu_new", "gelu_tanh", "gelu_pytorch_tanh", "relu"};
  if (std::find(acts.begin(), acts.end(), c.hidden_act) == acts.end())
    throw Error(where + ": hidden_act '" + c.hidden_act +
                "' is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu)");
  if (c.hidden_dropout_prob < 0 || c.hidden_dropout_prob >= 1 || c.attention_probs_dropout_prob < 0 ||
      c.attention_probs_dropout_prob >= 1)
    throw Error(where + ": dropout probabilities must be in [0, 1)");
}

EncoderConfig parse_hf_config(const std::string& text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);  // parse_error, or out_of_range for a number beyond double (1e999)
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_object()) throw Error(where + ": expected a JSON object (Hugging Face config.json)");
  if (j.contains("model_type") && j["model_type"] != "bert")
    throw Error(where + ": model_type is " + j["model_type"].dump() + ", expected \"bert\"");
  if (j.contains("position_embedding_type") && j["position_embedding_type"] != "absolute")
    throw Error(where + ": position_embedding_type " + j["position_embedding_type"].dump() +
                " is not supported (only \"absolute\", BERT's)");
  EncoderConfig c;
  auto get_int = [&](const char* key, std::int64_t& out, bool required) {
    if (!j.contains(key)) {
      if (required) throw Error(where + ": missing key '" + key + "' (integer)");
      return;
    }
    out = int64_at(j[key], where, key);  // not get<int64>: it wraps 2^64 - 1 to -1
  };
  auto get_float = [&](const char* key, double& out) {
    if (!j.contains(key) || j[key].is_null()) return;
    if (!j[key].is_number()) throw Error(where + ": key '" + key + "' must be a number, got " + j[key].dump());
    out = j[key].get<double>();
  };
  get_int("vocab_size", c.vocab_size, true);
  get_int("hidden_size", c.hidden_size, true);
  get_int("num_hidden_layers", c.num_hidden_layers, true);
  get_int("num_attention_heads", c.num_attention_heads, true);
  get_int("intermediate_size", c.intermediate_size, true);
  get_int("max_position_embeddings", c.max_position_embeddings, false);
  get_int("type_vocab_size", c.type_vocab_size, false);
  get_float("hidden_dropout_prob", c.hidden_dropout_prob);
  get_float("attention_probs_dropout_prob", c.attention_probs_dropout_prob);
  get_float("initializer_range", c.initializer_range);
  get_float("layer_norm_eps", c.layer_norm_eps);
  if (j.contains("hidden_act")) {
    if (!j["hidden_act"].is_string())
      throw Error(where + ": key 'hidden_act' must be a string, got " + j["hidden_act"].dump());
    c.hidden_act = j["hidden_act"].get<std::string>();
  }
  validate(c, where);
  return c;
}

EncoderConfig read_hf_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open model config (expected a Hugging Face config.json)");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_hf_config(ss.str(), path);
}

std::string hf_config_json(const EncoderConfig& c, const std::string& architecture, std::int64_t num_labels) {
  nlohmann::ordered_json j;
  j["architectures"] = {architecture};
  j["attention_probs_dropout_prob"] = c.attention_probs_dropout_prob;
  j["hidden_act"] = c.hidden_act;
  j["hidden_dropout_prob"] = c.hidden_dropout_prob;
  j["hidden_size"] = c.hidden_size;
  j["initializer_range"] = c.initializer_range;
  j["intermediate_size"] = c.intermediate_size;
  j["layer_norm_eps"] = c.layer_norm_eps;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["model_type"] = "bert";
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["pad_token_id"] = 0;
  j["position_embedding_type"] = "absolute";
  j["type_vocab_size"] = c.type_vocab_size;
  j["vocab_size"] = c.vocab_size;
  if (num_labels > 0) {  // transformers reads the label count from id2label
    nlohmann::ordered_json id2label, label2id;
    for (std::int64_t i = 0; i < num_labels; ++i) {
      id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
      label2id["LABEL_" + std::to_string(i)] = i;
    }
    j["id2label"] = id2label;
    j["label2id"] = label2id;
  }
  return j.dump(2) + "\n";
}

}  // namespace bertx::bert
