// model_loader.hpp - a model folder built and loaded for inference, shared by `bertx forward` and `bertx serve`:
// an HF folder (config.json + model.safetensors or weights.safetensors, its head in the same file or beside it as
// qa_head.safetensors / cls_head.safetensors), Google's TF BERT / BioBERT or NVIDIA's ckpt_N.pt (io/interop.hpp:
// recognised by their files), an int8 folder (io/quantized.hpp), or a bertx checkpoint root or step folder (the newest step's
// model.safetensors; the model and its task's head from the run's config.toml found above it).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bertx/model.hpp"

namespace bertx {

class PluginHost;

struct ModelFolderOptions {
  std::string head = "pretraining";        // pretraining | qa | classification | none | auto (what the folder holds)
  std::vector<std::string> extra_weights;  // extra weight files (heads); default: qa_head/cls_head.safetensors there
  bool encoder_fallback = false;           // head "pretraining" on weights without cls.*: the encoder alone, noted
};

struct LoadedModel {
  std::shared_ptr<Model> model;       // in eval mode, on the CPU; keep `host` alive while it lives
  std::string head;                   // the head added: pretraining | qa | classification | none
  std::int64_t num_labels = 0;        // classification: rows of classifier.weight
  std::string weights_file;           // the encoder's weights file read
  std::string vocab;                  // vocab.txt beside the weights or named by the run's [data] vocab; "" when none
  std::optional<bool> do_lower_case;  // tokenizer casing from tokenizer_config.json / the run's [data]; unset: unknown
};

// A bertx checkpoint root (its newest step) or step folder (progress.json beside model.safetensors): that
// model.safetensors; "" when `dir` is neither.
std::string checkpoint_weights(const std::string& dir);

// Throws bertx::Error naming the folder: no config.json (and no checkpoint), missing weights, a missing head tensor.
LoadedModel load_model_folder(const PluginHost& host, const std::string& dir, const ModelFolderOptions& options);

}  // namespace bertx
