// interop_names.cpp - Google TF and NVIDIA PyTorch BERT names -> Hugging Face names (interop_names.hpp).
#include "io/interop_names.hpp"

#include <cctype>
#include <set>
#include <vector>

#include "bertx/error.hpp"

namespace bertx::interop {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s)
    if (c == sep)
      out.emplace_back();
    else
      out.back() += c;
  return out;
}

// "bert.encoder.layer.11.output.dense.weight" -> "bert.encoder.layer.#.output.dense.weight".
std::string layer_pattern(const std::string& n) {
  const std::string key = "encoder.layer.";
  const auto p = n.find(key);
  if (p == std::string::npos) return n;
  auto e = p + key.size();
  const auto digits = e;
  while (e < n.size() && std::isdigit(static_cast<unsigned char>(n[e]))) ++e;
  if (e == digits || e - digits > 6) return n;
  return n.substr(0, digits) + "#" + n.substr(e);
}

const std::set<std::string>& bert_names() {
  static const std::set<std::string> names = [] {
    std::set<std::string> s;
    auto wb = [&](const std::string& m) {
      s.insert(m + ".weight");
      s.insert(m + ".bias");
    };
    for (const char* e : {"word", "position", "token_type"})
      s.insert(std::string("bert.embeddings.") + e + "_embeddings.weight");
    wb("bert.embeddings.LayerNorm");
    for (const char* m :
         {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
          "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"})
      wb(std::string("bert.encoder.layer.#.") + m);
    for (const char* m : {"bert.pooler.dense", "cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
                          "cls.seq_relationship", "qa_outputs", "classifier", "cls.predictions.decoder"})
      wb(m);
    s.insert("cls.predictions.bias");
    return s;
  }();
  return names;
}

[[noreturn]] void unknown(const std::string& where, const std::string& name, const std::string& as,
                          const char* expected) {
  throw Error(where + ": variable '" + name + "' is no BERT variable bertx knows" +
              (as.empty() || as == name ? "" : " (read as '" + as + "')") + "; expected " + expected);
}

}  // namespace

bool is_bert_name(const std::string& n) { return bert_names().count(layer_pattern(n)) > 0; }

Mapped from_tf(const std::string& name, const std::string& where) {
  if (name == "_CHECKPOINTABLE_OBJECT_GRAPH" || name.find("/.ATTRIBUTES/") != std::string::npos ||
      name.find("layer_with_weights-") != std::string::npos)
    throw Error(where + ": a TF2 object-based checkpoint (variable '" + name +
                "'; TensorFlow Model Garden / Keras names), not Google's name-based BERT layout (bert/encoder/...); "
                "bertx reads the latter only");
  if (name == "global_step" || ends_with(name, "/adam_m") || ends_with(name, "/adam_v")) return {};
  const std::vector<std::string> parts = split(name, '/');
  std::string hf;
  Mapped m;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    const bool last = i + 1 == parts.size();
    std::string out = p;
    if (p.rfind("layer_", 0) == 0 && p.size() > 6) out = "layer." + p.substr(6);
    if (last) {
      if (p == "kernel")
        out = "weight", m.transpose = true;
      else if (p == "gamma")
        out = "weight";
      else if (p == "beta")
        out = "bias";
      else if (ends_with(p, "_embeddings"))
        out = p + ".weight";
    }
    hf += (hf.empty() ? "" : ".") + out;
  }
  // Heads whose variables are not under a module path.
  if (hf == "cls.predictions.output_bias")
    hf = "cls.predictions.bias";
  else if (hf == "cls.seq_relationship.output_weights")
    hf = "cls.seq_relationship.weight";
  else if (hf == "cls.seq_relationship.output_bias")
    hf = "cls.seq_relationship.bias";
  else if (hf == "output_weights")
    hf = "classifier.weight";  // run_classifier.py
  else if (hf == "output_bias")
    hf = "classifier.bias";
  else if (hf == "cls.squad.output_weights")
    hf = "qa_outputs.weight";  // run_squad.py
  else if (hf == "cls.squad.output_bias")
    hf = "qa_outputs.bias";
  if (!is_bert_name(hf) || hf.rfind("cls.predictions.decoder", 0) == 0)
    unknown(where, name, hf, "Google BERT names (bert/..., cls/predictions/..., cls/seq_relationship/...)");
  m.name = hf;
  return m;
}

Mapped from_nvidia(const std::string& key, const std::string& where) {
  std::string n = key;
  while (n.rfind("module.", 0) == 0) n = n.substr(7);  // DistributedDataParallel / apex DDP wrappers
  for (auto p = n.find("dense_act"); p != std::string::npos; p = n.find("dense_act")) n.replace(p, 9, "dense");
  if (n.rfind("embeddings.", 0) == 0 || n.rfind("encoder.", 0) == 0 || n.rfind("pooler.", 0) == 0) n = "bert." + n;
  if (!is_bert_name(n)) {
    if (n.find("position_ids") != std::string::npos) return {};  // a buffer, not a weight
    unknown(where, key, n, "NVIDIA / Hugging Face BERT keys ([module.]bert.encoder.layer.N..., cls.predictions...)");
  }
  if (n.rfind("cls.predictions.decoder.weight", 0) == 0) return {};  // tied to the word embeddings
  return {n, false};
}

}  // namespace bertx::interop
