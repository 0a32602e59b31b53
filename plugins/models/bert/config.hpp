// config.hpp - BERT architecture presets (the seeds' table) and Hugging Face config.json read/write.
#pragma once
#include <string>
#include <vector>

#include "bertx/model.hpp"

namespace bertx::bert {

// Names accepted by [model] preset (besides "custom").
const std::vector<std::string>& preset_names();
// Throws bertx::Error listing the presets for an unknown name.
EncoderConfig preset(const std::string& name);
// Reads a Hugging Face config.json (unknown keys ignored, as HF does). Throws bertx::Error naming the file
// and key for a missing/ill-typed key, an unsupported hidden_act or position_embedding_type, or
// hidden_size not divisible by num_attention_heads.
EncoderConfig read_hf_config(const std::string& path);
EncoderConfig parse_hf_config(const std::string& json_text, const std::string& where);
// config.json text that transformers' BertConfig.from_pretrained reads; `architecture` names the transformers class
// of the heads the model has (AutoModel* pick it), num_labels > 0 writes id2label / label2id for a classifier.
std::string hf_config_json(const EncoderConfig& c, const std::string& architecture = "BertForPreTraining",
                           std::int64_t num_labels = 0);
// Checks the numbers are usable; throws bertx::Error prefixed with `where`.
void validate(const EncoderConfig& c, const std::string& where);

}  // namespace bertx::bert
