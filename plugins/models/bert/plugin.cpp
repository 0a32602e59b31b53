// plugin.cpp - registers the `bert` model: presets from the seeds' table or a Hugging Face config.json.
#include "bert.hpp"
#include "config.hpp"

namespace {

std::vector<std::string> preset_choices() {
  auto names = bertx::bert::preset_names();
  names.push_back("custom");
  return names;
}

// The [model] options of `bert`.
struct BertOptions {
  std::string preset = "bert-base-uncased";  // a preset_names() entry, or "custom" (read config)
  std::string config;                        // Hugging Face config.json, read when preset = "custom"
  bool padding_idx = true;                   // [PAD] word embedding gets no gradient (HF); false = NVIDIA
  bool activation_checkpointing = false;     // recompute layers in backward
  bool unpadded = true;                      // CPU: skip the padding of mostly padded batches
  std::int64_t num_hidden_layers = 0;        // > 0: this many layers instead of the preset's / config's (a student)
};

const bertx::Fields<BertOptions>& bert_fields() {
  using B = BertOptions;
  static const bertx::Fields<BertOptions> f{
      bertx::field("preset", &B::preset, "architecture", preset_choices()),
      bertx::field("config", &B::config, "Hugging Face config.json, read when preset = \"custom\""),
      bertx::field("padding_idx", &B::padding_idx, "[PAD] word embedding gets no gradient (HF); false = NVIDIA"),
      bertx::field("activation_checkpointing", &B::activation_checkpointing,
                   "recompute layers in backward: less memory, ~30% more compute"),
      bertx::field("unpadded", &B::unpadded,
                   "CPU: skip the padding of batches >= 20% padded (zeros at padded positions)"),
      bertx::field("num_hidden_layers", &B::num_hidden_layers,
                   "> 0: this many encoder layers instead of the preset's or config's (e.g. a distilled student)"),
  };
  return f;
}

std::shared_ptr<bertx::Model> make_bert(const bertx::Options& o) {
  const BertOptions b = bert_fields().read(o);
  const std::string& preset = b.preset;
  const std::string& config = b.config;
  bertx::EncoderConfig c;
  if (preset == "custom") {
    if (config.empty()) throw bertx::Error("[model] preset = \"custom\" needs config = \"path/to/config.json\"");
    c = bertx::bert::read_hf_config(config);
  } else {
    if (!config.empty())
      throw bertx::Error("[model] config = \"" + config + "\" is only read with preset = \"custom\" (preset is \"" +
                         preset + "\")");
    c = bertx::bert::preset(preset);
  }
  if (b.num_hidden_layers < 0)
    throw bertx::Error("[model] num_hidden_layers: must be >= 0 (0 = the preset's or config's), got " +
                       std::to_string(b.num_hidden_layers));
  if (b.num_hidden_layers > 0) c.num_hidden_layers = b.num_hidden_layers;
  return std::make_shared<bertx::bert::Bert>(c, b.padding_idx, b.activation_checkpointing, b.unpadded);
}

void register_bert(bertx::Registry& r) {
  bertx::add_model(r, "bert", "BERT encoder (HF names) with MLM/NSP, span-QA and classification heads",
                   bert_fields().schema(), &make_bert);
}

}  // namespace

BERTX_PLUGIN("bert", "0.1.0", "BERT encoder and heads", register_bert)
