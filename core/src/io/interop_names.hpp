// interop_names.hpp - other trainers' parameter names -> Hugging Face BertForPreTraining names: Google's
// TensorFlow BERT (bert/encoder/layer_0/attention/self/query/kernel) and NVIDIA DeepLearningExamples' PyTorch
// BERT (module.bert.encoder.layer.0.intermediate.dense_act.weight). Every mapped name is checked against the
// names a BERT has, so an unknown variable is refused by name instead of being silently dropped. No LibTorch.
#pragma once
#include <string>

namespace bertx::interop {

struct Mapped {
  std::string name;        // Hugging Face name; "" = skipped (optimizer slot, step counter, tied copy)
  bool transpose = false;  // a TF dense kernel (in, out) -> torch Linear weight (out, in)
};

// Throws a one-line bertx::Error naming `where` and the variable when it is no BERT variable bertx knows, or
// when the checkpoint is TF2 object-based (".ATTRIBUTES/", "_CHECKPOINTABLE_OBJECT_GRAPH", "layer_with_weights-").
Mapped from_tf(const std::string& name, const std::string& where);
Mapped from_nvidia(const std::string& key, const std::string& where);

// True for a Hugging Face BERT name (pre-training heads, span QA, classifier included).
bool is_bert_name(const std::string& hf_name);

}  // namespace bertx::interop
