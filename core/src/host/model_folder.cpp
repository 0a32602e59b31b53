// model_folder.cpp - where a model folder keeps its encoder: plain Hugging Face, or sentence-transformers.
#include "host/model_folder.hpp"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "base/json_util.hpp"
#include "host/plugin_host.hpp"

namespace fs = std::filesystem;

namespace bertx {

std::string encoder_folder(const std::string& dir) {
  const fs::path modules = fs::path(dir) / "modules.json";
  if (!fs::is_regular_file(modules)) return dir;
  std::ifstream in(modules);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) throw Error(modules.string() + ": expected a JSON array of sentence-transformers modules");
  for (const auto& m : j)
    if (string_or(m, "type") == "sentence_transformers.models.Transformer") {
      const fs::path sub = fs::path(dir) / string_or(m, "path");
      if (!fs::is_regular_file(sub / "config.json"))
        throw Error(modules.string() + ": its Transformer module's folder " + sub.string() + " has no config.json");
      return sub.lexically_normal().string();
    }
  throw Error(modules.string() +
              ": no sentence_transformers.models.Transformer module (bertx loads the BERT encoder of a "
              "sentence-transformers folder, not its other modules)");
}

std::string config_file_in(const std::string& dir) {
  const fs::path enc = encoder_folder(dir);
  if (!fs::exists(enc / "config.json") && fs::is_regular_file(enc / "bert_config.json"))
    return (enc / "bert_config.json").string();  // Google's TF release / NVIDIA's layout
  return (enc / "config.json").string();
}

std::string model_type_for(const PluginHost& host, const std::string& config_json) {
  std::string type;  // "" when absent or the file is unreadable: the model plugin reports that itself
  if (!config_json.empty()) {
    std::ifstream in(config_json);
    type = string_or(nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false), "model_type");
  }
  const auto models = host.entries(Kind::Model);
  std::string available;
  for (const auto* e : models) {
    if (e->spec.name == type) return type;
    available += (available.empty() ? "" : ", ") + e->spec.name;
  }
  if (models.size() == 1) return models.front()->spec.name;
  const std::string what = config_json.empty() ? std::string("the model") : config_json;
  if (models.empty()) throw Error(what + ": no model plugin is loaded (see `bertx plugins`)");
  throw Error(
      what +
      (type.empty() ? std::string(": no model_type") : ": model_type \"" + type + "\" is no loaded model plugin") +
      "; expected one of " + available);
}

}  // namespace bertx
