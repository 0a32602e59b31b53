// weights.cpp - name-matched weight loading with clear errors, and HF folder export.
#include "io/weights.hpp"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "bertx/error.hpp"
#include "bertx/tokenizer.hpp"
#include "base/fs_util.hpp"
#include "host/model_folder.hpp"
#include "io/quantized.hpp"

namespace fs = std::filesystem;

namespace bertx {

static std::string shape_str(at::IntArrayRef s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// TF-ported checkpoints name LayerNorm parameters gamma/beta.
static std::string modern_name(const std::string& n) {
  auto ends = [&](const std::string& suffix) {
    return n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends("LayerNorm.gamma")) return n.substr(0, n.size() - 5) + "weight";
  if (ends("LayerNorm.beta")) return n.substr(0, n.size() - 4) + "bias";
  return n;
}

LoadReport load_weights(torch::nn::Module& module, const TensorMap& file_tensors, const std::string& where,
                        bool require_encoder) {
  LoadReport report;
  // An int8 folder (bertx quantize): its linears as float32 values x scales, which an int8 policy re-quantizes
  // to the same int8 values.
  TensorMap dequantized = file_tensors;
  report.dequantized = dequantize_linears(dequantized, where);
  const TensorMap& tensors = dequantized;
  auto params = module.named_parameters(/*recurse=*/true);
  std::set<std::string> seen;
  at::NoGradGuard no_grad;
  for (const auto& [raw_name, t] : tensors) {
    const std::string name = modern_name(raw_name);
    if (name == "cls.predictions.decoder.weight" || name == "cls.predictions.decoder.bias") continue;  // tied copies
    if (name.find("position_ids") != std::string::npos) continue;                                      // HF buffer
    // A bare BertModel checkpoint (transformers' AutoModel, sentence-transformers) names the encoder without
    // the "bert." prefix its pre-training and task models carry.
    const bool bare =
        name.rfind("embeddings.", 0) == 0 || name.rfind("encoder.", 0) == 0 || name.rfind("pooler.", 0) == 0;
    std::string key = name;
    at::Tensor* p = params.find(key);
    if (!p && bare) p = params.find(key = "bert." + name);
    if (!p) {
      report.unexpected.push_back(raw_name);
      continue;
    }
    if (p->sizes() != t.sizes())
      throw Error(where + ": tensor '" + raw_name + "' has shape " + shape_str(t.sizes()) +
                  " but the model's parameter has " + shape_str(p->sizes()) +
                  " (wrong config.json for these weights?)");
    p->copy_(t);
    seen.insert(key);
    report.loaded.push_back(key);
  }
  for (const auto& item : params) {
    if (seen.count(item.key())) continue;
    if (require_encoder && item.key().rfind("bert.", 0) == 0)
      throw Error(where + ": missing encoder tensor '" + item.key() + "' " + shape_str(item.value().sizes()) +
                  " (truncated file, or weights of another architecture?)");
    report.missing.push_back(item.key());
  }
  return report;
}

TensorMap parameters_of(torch::nn::Module& module) {
  TensorMap out;
  for (const auto& item : module.named_parameters(true)) out[item.key()] = item.value().detach();
  return out;
}

std::string weights_file_in(const std::string& dir) {
  const std::string enc = encoder_folder(dir);
  for (const char* name : {"model.safetensors", "weights.safetensors"})
    if (fs::is_regular_file(fs::path(enc) / name)) return (fs::path(enc) / name).string();
  if (fs::is_regular_file(fs::path(enc) / "pytorch_model.bin"))
    throw Error(
        enc +
        ": holds pytorch_model.bin (a pickle) but no model.safetensors; bertx reads safetensors only: convert it with "
        "transformers (save_pretrained(..., safe_serialization=True))");
  throw Error(enc + ": no model.safetensors or weights.safetensors in this model folder");
}

void save_hf_folder(Model& model, const std::string& dir, const std::string& vocab) {
  fs::create_directories(dir);
  write_file_atomic((fs::path(dir) / "config.json").string(), model.config_json());
  save_safetensors((fs::path(dir) / "model.safetensors").string(), parameters_of(model.module()), {{"format", "pt"}});
  if (!vocab.empty()) {
    std::ifstream in(vocab, std::ios::binary);
    if (!in) throw Error(vocab + ": cannot read vocab file to copy into " + dir);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    if (const auto first = text.find_first_not_of(" \t\r\n"); first != std::string::npos && text[first] == '{') {
      const auto v = Vocab::load(vocab);  // a tokenizer.json: its WordPiece tokens as vocab.txt lines, in id order
      text.clear();
      for (const auto& t : v->tokens()) text += t + "\n";
    }
    write_file_atomic((fs::path(dir) / "vocab.txt").string(), text);
  }
}

}  // namespace bertx
