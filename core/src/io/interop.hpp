// interop.hpp - model weights from other trainers, in Hugging Face names: Google's TensorFlow BERT checkpoints
// (bert_config.json + bert_model.ckpt.* + vocab.txt; BioBERT's model.ckpt-N), NVIDIA DeepLearningExamples'
// PyTorch ckpt_N.pt, and Hugging Face folders. Every command that takes a model folder goes through
// find_model_source / load_model_weights, so each of these loads wherever a model folder does.
#pragma once
#include <string>
#include <vector>

#include "io/safetensors.hpp"

namespace bertx {

struct ModelSource {
  std::string format;   // "huggingface" | "tensorflow" | "nvidia-pytorch"
  std::string weights;  // safetensors file, TF checkpoint prefix (without .index), or .pt file
  std::string config;   // config.json / bert_config.json ("" when none was found)
  std::string vocab;    // vocab.txt, else tokenizer.json ("" when neither was found)
};

// Recognises `src` (a folder or file) by its contents, not by a flag: a folder with model.safetensors (HF, also
// sentence-transformers), a folder with one TF checkpoint (*.index; the `checkpoint` file picks among several),
// a folder with ckpt_N.pt (the highest N), or the file itself (.safetensors, .index or .data-*, .pt). `config`
// and `vocab` override the files found beside it (config.json, then bert_config.json; vocab.txt).
ModelSource find_model_source(const std::string& src, const std::string& config = "", const std::string& vocab = "");

// The source's tensors in Hugging Face names (TF kernels transposed, optimizer slots and global_step left out,
// NVIDIA's module./dense_act names renamed). A word-embedding matrix padded past the vocab to a multiple of 8
// (NVIDIA) is trimmed, with a line in `notes`; any other row count that disagrees with vocab.txt is an error.
TensorMap load_model_weights(const ModelSource& source, std::vector<std::string>* notes = nullptr);

// The parts, for tests and tools.
TensorMap load_tf_checkpoint(const std::string& prefix);
TensorMap load_nvidia_checkpoint(const std::string& pt_file);
// Trims rows past `vocab_tokens` of the vocabulary-sized tensors when they are padded to the next multiple of 8;
// returns the note ("" when nothing was trimmed). Throws naming `where` when the rows match no padding of it.
std::string trim_padded_vocab(TensorMap& tensors, std::int64_t vocab_tokens, const std::string& where);
// Tokens in a vocab.txt (its lines).
std::int64_t count_vocab_tokens(const std::string& vocab_file);

}  // namespace bertx
