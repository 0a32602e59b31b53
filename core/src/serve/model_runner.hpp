// model_runner.hpp - one served model: the model folder loaded once (io/model_loader.hpp) and the forward pass the
// batcher runs on each batch: the encoder under InferenceMode (the bert plugin skips padding on its own when a
// batch has enough of it), then the head's logits - classification `logits` [B, num_labels], span QA
// `start_logits` / `end_logits` [B, S].
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "serve/batcher.hpp"
#include "serve/infer_request.hpp"

namespace bertx {
class PluginHost;
}

namespace bertx::serve {

struct ServedModelOptions {
  std::string name;                // the name clients use in /v2/models/NAME
  std::string path;                // HF folder or bertx checkpoint root/step folder
  std::string task = "auto";       // squad | classification | auto (the head the folder holds)
  std::string precision = "fp32";  // a --precision flag (precision_from_flag): fp32 | amp-bf16 (bf16) | int8
};

struct ServedModel {
  std::string name, path, task;  // task: squad | classification
  ModelLimits limits;            // what requests are checked against (outputs: the head's)
  std::string vocab;             // vocab.txt for the text endpoints ("" when the folder has none)
  int do_lower_case = -1;        // 1 / 0 when the folder says, -1: judge by the vocab
  std::int64_t num_labels = 0;   // classification: classes
  Runner runner;                 // the forward pass (holds the model)
};

// Loads the model (the host must outlive the ServedModel); throws bertx::Error naming the folder.
ServedModel load_served_model(PluginHost& host, const ServedModelOptions& options, std::int64_t max_batch_size);

}  // namespace bertx::serve
