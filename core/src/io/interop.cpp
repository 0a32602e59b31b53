// interop.cpp - Google TF / NVIDIA PyTorch / Hugging Face weights as one TensorMap in HF names (interop.hpp):
// tensors made from the checked bytes of tf_bundle / pt_archive, names from interop_names, vocab padding trimmed.
#include "io/interop.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <ATen/ATen.h>

#include "bertx/error.hpp"
#include "host/model_folder.hpp"
#include "io/interop_names.hpp"
#include "io/pt_archive.hpp"
#include "io/tf_bundle.hpp"
#include "io/weights.hpp"

namespace fs = std::filesystem;

namespace bertx {

namespace {

at::ScalarType scalar_of(RawDType t) {
  switch (t) {
    case RawDType::Float:
      return at::kFloat;
    case RawDType::Double:
      return at::kDouble;
    case RawDType::Half:
      return at::kHalf;
    case RawDType::BFloat16:
      return at::kBFloat16;
    case RawDType::Int64:
      return at::kLong;
    case RawDType::Int32:
      return at::kInt;
    case RawDType::Int16:
      return at::kShort;
    case RawDType::Int8:
      return at::kChar;
    case RawDType::UInt8:
      return at::kByte;
    case RawDType::Bool:
      return at::kBool;
    case RawDType::Other:
      break;
  }
  throw Error("interop: no ATen type for this element type");  // not reached: the readers refuse Other
}

at::Tensor from_bytes(const std::string& bytes, at::IntArrayRef shape, at::ScalarType type) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
  if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

void put(TensorMap& out, const std::string& name, at::Tensor t, const std::string& where, const std::string& from) {
  if (!out.emplace(name, std::move(t)).second)
    throw Error(where + ": two variables map to '" + name + "' (the second is '" + from + "')");
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// ckpt_N.pt with the highest N in a folder ("" when none).
std::string newest_pt(const std::string& dir) {
  std::string best;
  long long best_n = -1;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    const std::string n = f.path().filename().string();
    if (f.path().extension() != ".pt") continue;
    long long step = 0;
    if (n.rfind("ckpt_", 0) == 0) {
      try {
        step = std::stoll(n.substr(5));
      } catch (const std::exception&) {
      }
    }
    if (step > best_n) best_n = step, best = f.path().string();
  }
  return best;
}

}  // namespace

TensorMap load_tf_checkpoint(const std::string& prefix) {
  tf::Bundle bundle(prefix);
  const std::string& where = bundle.index_path();
  TensorMap out;
  for (const auto& e : bundle.entries()) {
    const interop::Mapped m = interop::from_tf(e.name, where);
    if (m.name.empty()) continue;
    at::Tensor t = from_bytes(bundle.read(e), e.shape, scalar_of(e.dtype));
    if (m.transpose) {
      if (t.dim() != 2)
        throw Error(where + ": kernel '" + e.name + "' has " + std::to_string(t.dim()) + " dimensions, expected 2");
      t = t.t().contiguous();
    }
    put(out, m.name, std::move(t), where, e.name);
  }
  if (out.empty()) throw Error(where + ": no BERT variables in this checkpoint");
  return out;
}

TensorMap load_nvidia_checkpoint(const std::string& pt_file) {
  pt::Archive archive(pt_file);
  TensorMap out;
  for (const auto& r : archive.tensors()) {
    const interop::Mapped m = interop::from_nvidia(r.name, pt_file);
    if (m.name.empty()) continue;
    const std::string bytes = archive.storage_bytes(r);
    at::Tensor storage = from_bytes(bytes, {r.storage_numel}, scalar_of(r.dtype));
    put(out, m.name, storage.as_strided(r.sizes, r.strides, r.offset).contiguous(), pt_file, r.name);
  }
  return out;
}

std::int64_t count_vocab_tokens(const std::string& vocab_file) {
  std::ifstream in(vocab_file, std::ios::binary);
  if (!in) throw Error(vocab_file + ": cannot read the vocab file");
  std::int64_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

std::string trim_padded_vocab(TensorMap& tensors, std::int64_t vocab_tokens, const std::string& where) {
  const auto it = tensors.find("bert.embeddings.word_embeddings.weight");
  if (it == tensors.end() || it->second.dim() != 2) return "";
  const std::int64_t rows = it->second.size(0), padded = (vocab_tokens + 7) / 8 * 8;
  if (rows == vocab_tokens) return "";
  if (rows != padded || vocab_tokens <= 0)
    throw Error(where + ": word embeddings have " + std::to_string(rows) + " rows but the vocab has " +
                std::to_string(vocab_tokens) + " tokens (expected " + std::to_string(vocab_tokens) +
                ", or padded to a multiple of 8: " + std::to_string(padded) + "); wrong vocab.txt?");
  for (const char* name : {"bert.embeddings.word_embeddings.weight", "cls.predictions.bias",
                           "cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}) {
    auto t = tensors.find(name);
    if (t == tensors.end()) continue;
    if (t->second.size(0) != rows)
      throw Error(where + ": '" + name + "' has " + std::to_string(t->second.size(0)) + " rows, the word embeddings " +
                  std::to_string(rows));
    t->second = t->second.narrow(0, 0, vocab_tokens).contiguous();
  }
  return where + ": word embeddings padded to " + std::to_string(rows) + " rows (a multiple of 8) trimmed to the " +
         std::to_string(vocab_tokens) + " tokens of the vocab";
}

ModelSource find_model_source(const std::string& src, const std::string& config, const std::string& vocab) {
  ModelSource s;
  const fs::path p(src);
  std::error_code ec;
  fs::path dir;
  if (fs::is_directory(p, ec)) {
    const std::string enc = encoder_folder(src);
    dir = enc;
    if (is_file(fs::path(enc) / "model.safetensors") || is_file(fs::path(enc) / "weights.safetensors")) {
      s.format = "huggingface";
      s.weights = weights_file_in(src);
    } else if (std::string prefix = tf::find_checkpoint_prefix(enc); !prefix.empty()) {
      s.format = "tensorflow";
      s.weights = prefix;
    } else if (std::string pt = newest_pt(enc); !pt.empty()) {
      s.format = "nvidia-pytorch";
      s.weights = pt;
    } else {
      weights_file_in(src);  // throws its "no model.safetensors" error, with the pickle hint when it applies
      throw Error(src + ": no model weights (safetensors, TensorFlow .index, or .pt) in this folder");
    }
  } else if (is_file(p)) {
    dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
    const std::string name = p.filename().string();
    const auto data = name.find(".data-");
    if (p.extension() == ".safetensors") {
      s.format = "huggingface";
      s.weights = src;
    } else if (p.extension() == ".index" ||
               (data != std::string::npos && name.find("-of-", data) != std::string::npos)) {
      s.format = "tensorflow";
      s.weights = p.extension() == ".index" ? (dir / p.stem()).string() : (dir / name.substr(0, data)).string();
    } else if (p.extension() == ".pt" || p.extension() == ".pth") {
      s.format = "nvidia-pytorch";
      s.weights = src;
    } else {
      throw Error(src + ": not a model file bertx reads (.safetensors, a TensorFlow .index, or a torch.save .pt)");
    }
  } else if (is_file(src + ".index")) {  // a TF checkpoint prefix, as TensorFlow names checkpoints
    s.format = "tensorflow";
    s.weights = src;
    dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  } else {
    throw Error(src + ": no such model folder or file");
  }
  s.config = config;
  for (const char* name : {"config.json", "bert_config.json"})
    if (s.config.empty() && is_file(dir / name)) s.config = (dir / name).string();
  s.vocab = vocab;
  // vocab.txt, or the tokenizer.json transformers 5 saves in its place (bertx/tokenizer.hpp reads either)
  for (const char* name : {"vocab.txt", "tokenizer.json"})
    if (s.vocab.empty() && is_file(dir / name)) s.vocab = (dir / name).string();
  if (!config.empty() && !is_file(config)) throw Error("--config " + config + ": no such file");
  if (!vocab.empty() && !is_file(vocab)) throw Error("--vocab " + vocab + ": no such file");
  return s;
}

TensorMap load_model_weights(const ModelSource& s, std::vector<std::string>* notes) {
  if (s.format == "huggingface") return load_safetensors(s.weights);
  TensorMap t = s.format == "tensorflow" ? load_tf_checkpoint(s.weights) : load_nvidia_checkpoint(s.weights);
  if (!s.vocab.empty()) {
    const std::string note = trim_padded_vocab(t, count_vocab_tokens(s.vocab), s.weights);
    if (!note.empty() && notes) notes->push_back(note);
  }
  return t;
}

}  // namespace bertx
