// cmd_convert.cpp - `bertx convert SRC OUT`: another trainer's checkpoint (Google's TF BERT / BioBERT, NVIDIA's
// ckpt_N.pt), a Hugging Face folder or a bertx checkpoint (root or step folder, built as its run's config.toml says),
// recognised by its contents, written as a Hugging Face folder (config.json,
// model.safetensors, vocab.txt) that bertx and transformers' from_pretrained load. The weights go through the
// model plugin (load_weights then save_hf_folder), so every tensor's shape is checked against the config.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "bertx/error.hpp"
#include "bertx/model.hpp"
#include "commands.hpp"
#include "host/model_folder.hpp"
#include "host/plugin_host.hpp"
#include "io/interop.hpp"
#include "io/model_loader.hpp"
#include "io/weights.hpp"

namespace bertx::cli {

namespace {

namespace fs = std::filesystem;

struct ConvertArgs {
  std::string src, out, config, vocab;
};

// A bertx checkpoint root or step folder: the model and its head as the run's config.toml builds them, the vocab
// its [data] names (the loader forward and serve use).
bool convert_checkpoint(const ConvertArgs& a) {
  if (!a.config.empty() || !fs::is_directory(a.src) || fs::is_regular_file(config_file_in(a.src)) ||
      checkpoint_weights(a.src).empty())
    return false;
  PluginHost host;
  host.scan(PluginHost::default_search_path());
  const LoadedModel m = load_model_folder(host, a.src, {.head = "auto"});
  const std::string vocab = a.vocab.empty() ? m.vocab : a.vocab;
  if (vocab.empty()) spdlog::warn("{}: its run names no vocab.txt and no --vocab: {} gets no vocab.txt", a.src, a.out);
  save_hf_folder(*m.model, a.out, vocab);
  std::cout << "converted bertx checkpoint " << m.weights_file << " (head " << m.head << ") to the Hugging Face folder "
            << a.out << "\n";
  return true;
}

void run_convert(const ConvertArgs& a) {
  if (convert_checkpoint(a)) return;
  const ModelSource source = find_model_source(a.src, a.config, a.vocab);
  if (source.config.empty())
    throw Error(a.src + ": no config.json or bert_config.json beside it; pass --config (the model's BERT config)");
  std::vector<std::string> notes;
  const TensorMap weights = load_model_weights(source, &notes);
  for (const auto& n : notes) spdlog::info("note: {}", n);

  PluginHost host;
  host.scan(PluginHost::default_search_path());
  const std::string type = model_type_for(host, source.config);
  auto model = host.create<Model>(
      Kind::Model, type,
      host.options_for(Kind::Model, type, {{"preset", std::string("custom")}, {"config", source.config}}));
  auto has = [&](const std::string& prefix) {
    return std::any_of(weights.begin(), weights.end(), [&](const auto& kv) { return kv.first.rfind(prefix, 0) == 0; });
  };
  if (has("cls.")) model->add_head(Head::Pretraining);
  if (has("bert.pooler.")) model->add_head(Head::Pooler);
  if (has("qa_outputs.")) model->add_head(Head::SpanQA);
  if (auto it = weights.find("classifier.weight"); it != weights.end() && it->second.dim() == 2)
    model->add_head(Head::Classification, it->second.size(0));
  const LoadReport r = load_weights(model->module(), weights, source.weights);
  if (!r.missing.empty())
    throw Error(source.weights + ": no weights for '" + r.missing.front() + "' (and " +
                std::to_string(r.missing.size() - 1) + " more)");
  if (!r.unexpected.empty())
    spdlog::info("note: {} tensors of {} are no parameter of the model and were left out (e.g. '{}')",
                 r.unexpected.size(), source.weights, r.unexpected.front());
  if (source.vocab.empty())
    spdlog::warn("{}: no vocab.txt beside it and no --vocab: {} gets no vocab.txt", a.src, a.out);
  save_hf_folder(*model, a.out, source.vocab);
  std::cout << "converted " << source.format << " checkpoint " << source.weights << " (" << r.loaded.size()
            << " tensors) to the Hugging Face folder " << a.out << "\n";
}

}  // namespace

void add_convert_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ConvertArgs>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "write a checkpoint (Google TF BERT / BioBERT folder or .index, NVIDIA ckpt_N.pt, Hugging Face folder) as a "
      "Hugging Face folder (config.json, model.safetensors, vocab.txt)");
  cmd->add_option("SRC", a->src, "checkpoint folder or file; its format is recognised from its contents")->required();
  cmd->add_option("OUT", a->out, "output folder (created; its files are written atomically)")->required();
  cmd->add_option("--config", a->config, "BERT config (default: config.json or bert_config.json beside SRC)");
  cmd->add_option("--vocab", a->vocab, "vocab.txt (default: the one beside SRC)");
  cmd->callback([a, &exit_code] {
    run_convert(*a);
    exit_code = 0;
  });
}

}  // namespace bertx::cli
