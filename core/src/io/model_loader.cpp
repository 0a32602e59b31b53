// model_loader.cpp - a model folder (HF layout or a bertx checkpoint) built and loaded for inference.
#include "io/model_loader.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "bertx/error.hpp"
#include "bertx/task.hpp"
#include "host/config.hpp"
#include "host/plugin_host.hpp"
#include "host/progress.hpp"
#include "io/interop.hpp"
#include "io/weights.hpp"

namespace fs = std::filesystem;

namespace bertx {

namespace {

// Extra head files that sit beside the encoder weights in the golden folder layout.
std::vector<std::string> head_files(const std::string& dir, const std::string& head,
                                    const std::vector<std::string>& extra) {
  std::vector<std::string> files = extra;
  if (!files.empty()) return files;
  for (const char* name : {"qa_head.safetensors", "cls_head.safetensors"}) {
    const bool wanted =
        head == "auto" || (head == "qa" && name[0] == 'q') || (head == "classification" && name[0] == 'c');
    if (wanted && fs::is_regular_file(fs::path(dir) / name)) files.push_back((fs::path(dir) / name).string());
  }
  return files;
}

// `auto`: the head whose tensors the weights hold (span QA before classification before pre-training).
std::string pick_head(const std::string& head, const TensorMap& weights) {
  if (head != "auto") return head;
  if (weights.count("qa_outputs.weight")) return "qa";
  if (weights.count("classifier.weight")) return "classification";
  return weights.count("cls.seq_relationship.weight") ? "pretraining" : "none";
}

void add_head(Model& model, const std::string& head, const TensorMap& weights, const std::string& dir,
              std::int64_t& num_labels) {
  if (head == "pretraining") {
    model.add_head(Head::Pretraining);
  } else if (head == "qa") {
    model.add_head(Head::SpanQA);
  } else if (head == "none") {
    model.add_head(Head::Pooler);  // the encoder and pooler alone, as transformers' BertModel
  } else {
    auto it = weights.find("classifier.weight");
    if (it == weights.end())
      throw Error(dir + ": a classification head needs classifier.weight (cls_head.safetensors or --weights)");
    num_labels = it->second.size(0);
    model.add_head(Head::Classification, num_labels);
  }
}

// The run's config.toml: in `dir` or up to four folders above (<output_dir>/<model>/<phase>/<step>).
std::string find_run_config(const std::string& dir) {
  fs::path p = fs::absolute(dir);
  for (int up = 0; up <= 4 && !p.empty(); ++up, p = p.parent_path()) {
    if (fs::is_regular_file(p / "config.toml")) return (p / "config.toml").string();
    if (p == p.root_path()) break;
  }
  return "";
}

LoadedModel load_checkpoint_folder(const PluginHost& host, const std::string& dir, const std::string& weights_file,
                                   const ModelFolderOptions& options) {
  const std::string config_toml = find_run_config(dir);
  if (config_toml.empty())
    throw Error(dir +
                ": a checkpoint without the run's config.toml in it or up to 4 folders above (it says which "
                "model and head to build)");
  const ResolvedConfig cfg = resolve(Experiment::load(config_toml), host);
  const ComponentConfig &model_cfg = component(cfg, "model"), &task_cfg = component(cfg, "task");
  LoadedModel out;
  out.weights_file = weights_file;
  out.model = host.create<Model>(Kind::Model, model_cfg.type, model_cfg.options);
  TensorMap weights = load_safetensors(weights_file);
  const std::string head = pick_head(options.head, weights);
  if (options.head == "auto") {
    host.create<Task>(Kind::Task, task_cfg.type, task_cfg.options)->attach(*out.model);  // the run's own head
    out.head = head;
    if (head == "classification") out.num_labels = weights.at("classifier.weight").size(0);
  } else {
    add_head(*out.model, head, weights, dir, out.num_labels);
    out.head = head;
  }
  if (cfg.components.count("data")) {
    const Options& data = cfg.components.at("data").options;
    if (data.has("vocab") && fs::is_regular_file(data.get_string("vocab"))) out.vocab = data.get_string("vocab");
    if (data.has("do_lower_case")) out.do_lower_case = data.get_bool("do_lower_case");
  }
  LoadReport rep = load_weights(out.model->module(), weights, weights_file);
  if (!rep.missing.empty())
    throw Error(weights_file + ": no weights for '" + rep.missing.front() + "' (and " +
                std::to_string(rep.missing.size() - 1) + " more)");
  return out;
}

// tokenizer_config.json's do_lower_case, when the folder has one that says.
void read_casing(const std::string& dir, LoadedModel& out) {
  std::ifstream in(fs::path(dir) / "tokenizer_config.json");
  if (!in) return;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("do_lower_case") && j["do_lower_case"].is_boolean())
    out.do_lower_case = j["do_lower_case"].get<bool>();
}

}  // namespace

std::string checkpoint_weights(const std::string& dir) {
  if (fs::is_regular_file(fs::path(dir) / "progress.json") && fs::is_regular_file(fs::path(dir) / "model.safetensors"))
    return (fs::path(dir) / "model.safetensors").string();
  if (auto step = latest_checkpoint(dir)) return checkpoint_dir(dir, *step) + "/model.safetensors";
  return "";
}

LoadedModel load_model_folder(const PluginHost& host, const std::string& dir, const ModelFolderOptions& options) {
  LoadedModel out;
  const std::string ckpt =
      fs::is_directory(dir) && !fs::is_regular_file(config_file_in(dir)) ? checkpoint_weights(dir) : "";
  if (!ckpt.empty()) {
    out = load_checkpoint_folder(host, dir, ckpt, options);
  } else {
    const ModelSource source = find_model_source(dir);  // HF, Google TF, NVIDIA .pt: by the files there
    const std::string config = source.config.empty() ? config_file_in(dir) : source.config;
    if (!fs::is_regular_file(config))
      throw Error(dir +
                  ": no config.json (or bert_config.json) in this model folder (nor a bertx checkpoint root or "
                  "step folder)");
    const std::string type = model_type_for(host, config);
    out.model = host.create<Model>(
        Kind::Model, type,
        host.options_for(Kind::Model, type, {{"preset", std::string("custom")}, {"config", config}}));
    out.weights_file = source.weights;
    std::vector<std::string> notes;
    TensorMap weights = load_model_weights(source, &notes);
    for (const auto& n : notes) spdlog::info("note: {}", n);
    const std::string folder = fs::is_directory(dir) ? dir : fs::path(dir).parent_path().string();
    for (const auto& f : head_files(folder, options.head, options.extra_weights))
      for (auto& [k, v] : load_safetensors(f)) weights[k] = v;
    out.head = pick_head(options.head, weights);
    const bool has_cls =
        std::any_of(weights.begin(), weights.end(), [](const auto& kv) { return kv.first.rfind("cls.", 0) == 0; });
    if (out.head == "pretraining" && options.encoder_fallback && !has_cls && options.extra_weights.empty()) {
      spdlog::info(
          "note: {} holds an encoder without a pre-training head (no cls.* tensors): running it as the "
          "encoder alone (--head none)",
          dir);
      out.head = "none";
    }
    add_head(*out.model, out.head, weights, dir, out.num_labels);
    LoadReport rep = load_weights(out.model->module(), weights, dir);
    if (!rep.missing.empty())
      throw Error(dir + ": no weights for '" + rep.missing.front() + "' (and " +
                  std::to_string(rep.missing.size() - 1) + " more); pass the head file with --weights");
    if (!source.vocab.empty()) out.vocab = source.vocab;
    if (fs::is_directory(dir)) read_casing(encoder_folder(dir), out);
  }
  out.model->module().eval();
  return out;
}

}  // namespace bertx
