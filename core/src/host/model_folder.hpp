// model_folder.hpp - where a model folder keeps its BERT encoder (config.json and weights), for every command
// that takes a folder (run's from_pretrained, forward, bench train / infer), and which model plugin builds it
// (core names no model: the config's model_type does). No LibTorch.
#pragma once
#include <string>

namespace bertx {

// The folder holding the BERT encoder's config.json and weights: `dir` itself, or for a sentence-transformers
// folder (modules.json) the path of its sentence_transformers.models.Transformer module (often "", the folder;
// older releases "0_BERT"). Its Pooling / Normalize modules are not part of BertModel and are not loaded.
// Throws naming modules.json when it lists no Transformer module or that module's folder has no config.json.
std::string encoder_folder(const std::string& dir);

// The config.json path of a model folder (after encoder_folder), or its bert_config.json (Google's TF and NVIDIA's
// layouts) when it has no config.json; callers check that it exists.
std::string config_file_in(const std::string& dir);

class PluginHost;
// The model plugin that builds the model of `config_json` (a Hugging Face config.json; "" for a model from a
// preset): the config's "model_type" when a model plugin of that name is loaded (model plugins register under
// Hugging Face's model_type), otherwise the one model plugin loaded (which then judges the config). Throws a
// one-line bertx::Error naming the model_type and the loaded model plugins when neither holds.
std::string model_type_for(const PluginHost& host, const std::string& config_json);

}  // namespace bertx
