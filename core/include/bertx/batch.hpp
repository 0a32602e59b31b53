// bertx/batch.hpp - a batch is a set of named tensors; names follow NVIDIA's HDF5 / Hugging Face inputs:
//   input_ids (B, S) int64, token_type_ids (B, S) int64, attention_mask (B, S) int64 (1 = token, 0 = pad),
//   masked_lm_positions (B, P) int64, masked_lm_ids (B, P) int64 (0 where padded),
//   next_sentence_labels (B) int64, start_positions / end_positions (B) int64, labels (B) int64 or float.
#pragma once
#include <map>
#include <string>

#include <ATen/core/Tensor.h>

#include "bertx/error.hpp"

namespace bertx {

struct Batch {
  std::map<std::string, at::Tensor> tensors;
  // True when whoever reads the encoder's output for this batch never reads padded positions (attention_mask 0),
  // so the model may skip them under autograd too (bert's unpadded encoder). False: a consumer may read them, as
  // run_squad's span loss does (a softmax over all S positions).
  bool padding_unread = false;

  bool has(const std::string& name) const { return tensors.count(name) != 0; }
  // Throws bertx::Error listing the names present when `name` is missing.
  const at::Tensor& at(const std::string& name) const {
    auto it = tensors.find(name);
    if (it != tensors.end()) return it->second;
    std::string names;
    for (const auto& [k, v] : tensors) names += (names.empty() ? "" : ", ") + k;
    throw Error("batch has no tensor '" + name + "' (it has: " + names + ")");
  }
  // Batch size (first dim of input_ids).
  std::int64_t size() const { return at("input_ids").size(0); }
};

}  // namespace bertx
