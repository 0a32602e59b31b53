// weights.hpp - model weights <-> safetensors with Hugging Face names, and HF model folders
// (config.json + model.safetensors + vocab.txt) that transformers' from_pretrained loads.
#pragma once
#include <string>
#include <vector>

#include "bertx/model.hpp"
#include "host/model_folder.hpp"
#include "io/safetensors.hpp"

namespace bertx {

struct LoadReport {
  std::vector<std::string> loaded;      // parameter names filled from the file
  std::vector<std::string> missing;     // model parameters the file lacks (kept at their initial values)
  std::vector<std::string> unexpected;  // file tensors the model has no parameter for (ignored)
  int dequantized = 0;                  // int8 linears (bertx quantize) read as values x scales
};

// Copies `tensors` into the module's parameters by name. Accepts the legacy TF-port names
// (LayerNorm.gamma/beta) and a bare BertModel's names (no "bert." prefix), and skips the tied decoder copies
// (cls.predictions.decoder.*). A shape mismatch is an error naming the tensor and both shapes; a missing encoder ("bert.*") parameter is an error when
// `require_encoder`; missing head parameters are reported (they keep their fresh initialisation).
LoadReport load_weights(torch::nn::Module& module, const TensorMap& tensors, const std::string& where,
                        bool require_encoder = true);

// Every parameter by name (detached CPU tensors are not made: callers save them as they are).
TensorMap parameters_of(torch::nn::Module& module);

// Finds the weights file of a model folder (after encoder_folder): model.safetensors, else weights.safetensors.
// Throws naming the folder (a pytorch_model.bin alone is refused with how to convert it).
std::string weights_file_in(const std::string& dir);

// Writes an HF folder: config.json (model.config_json()), model.safetensors (metadata format=pt), and
// vocab.txt copied from `vocab` when given. Every file is written atomically.
void save_hf_folder(Model& model, const std::string& dir, const std::string& vocab = "");

}  // namespace bertx
