// plugin.cpp - registers the `bert` model: presets from the seeds' table or a Hugging Face config.json.
#include "bert.hpp"
#include "config.hpp"

namespace {

std::vector<std::string> preset_choices() {
  auto names = bertx::bert::preset_names();
  names.push_back("custom");
  return names;
}

std::shared_ptr<bertx::Model> make_bert(const bertx::Options& o) {
  const std::string& preset = o.get_string("preset");
  const std::string& config = o.get_string("config");
  bertx::EncoderConfig c;
  if (preset == "custom") {
    if (config.empty()) throw bertx::Error("[model] preset = \"custom\" needs config = \"path/to/config.json\"");
    c = bertx::bert::read_hf_config(config);
  } else {
    if (!config.empty())
      throw bertx::Error("[model] config = \"" + config + "\" is only read with preset = \"custom\" (preset is \"" + preset + "\")");
    c = bertx::bert::preset(preset);
  }
  return std::make_shared<bertx::bert::Bert>(c, o.get_bool("padding_idx"), o.get_bool("activation_checkpointing"),
                                              o.get_bool("unpadded"));
}

void register_bert(bertx::Registry& r) {
  bertx::add_model(r, "bert", "BERT encoder (HF names) with MLM/NSP, span-QA and classification heads",
                   {
                       bertx::opt_string("preset", "bert-base-uncased", "architecture", preset_choices()),
                       bertx::opt_string("config", "", "Hugging Face config.json, read when preset = \"custom\""),
                       bertx::opt_bool("padding_idx", true, "[PAD] word embedding gets no gradient (HF); false = NVIDIA"),
                       bertx::opt_bool("activation_checkpointing", false, "recompute layers in backward: less memory, ~30% more compute"),
                       bertx::opt_bool("unpadded", true, "CPU: skip the padding of batches >= 20% padded (zeros at padded positions)"),
                   },
                   &make_bert);
}

}  // namespace

BERTX_PLUGIN("bert", "0.1.0", "BERT encoder and heads", register_bert)
