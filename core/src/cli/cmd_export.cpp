// cmd_export.cpp - `bertx export onnx --model PATH --out DIR`: a model folder (any that `bertx forward` reads: HF,
// a bertx checkpoint, Google's TF BERT, NVIDIA's .pt) as an fp32 ONNX graph with its head, in a Triton model
// repository DIR/NAME/{config.pbtxt, 1/model.onnx}. The weights are the loaded model's own parameters (after the
// plugin checked every shape); export/onnx_bert.cpp lays out the graph.
#include <iostream>
#include <map>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "base/build_info.hpp"
#include "bertx/error.hpp"
#include "bertx/model.hpp"
#include "commands.hpp"
#include "export/triton_repo.hpp"
#include "host/plugin_host.hpp"
#include "io/model_loader.hpp"

namespace bertx::cli {

namespace {

struct ExportArgs {
  std::string model;                // the model folder (as `bertx forward --model`)
  std::string out;                  // the Triton model repository to write into
  std::string name;                 // the model's name there ("": model_name_of(model))
  std::string head = "auto";        // auto (what the folder holds) | qa | classification | pretraining | none
  serve::BatchingOptions batching;  // config.pbtxt's max_batch_size and dynamic_batching, as `bertx serve`'s
};

void run_export_onnx(const ExportArgs& a) {
  PluginHost host;
  host.scan(PluginHost::default_search_path());
  const LoadedModel loaded =
      load_model_folder(host, a.model, ModelFolderOptions{a.head, {}, /*encoder_fallback=*/a.head == "auto"});
  const EncoderConfig& c = loaded.model->config();
  std::map<std::string, at::Tensor> params;  // fp32, contiguous: the export reads them in place
  for (const auto& p : loaded.model->module().named_parameters(true))
    params[p.key()] = p.value().detach().to(at::kFloat).contiguous();
  const exporter::WeightLookup lookup = [&params](const std::string& name) -> std::optional<exporter::WeightView> {
    auto it = params.find(name);
    if (it == params.end()) return std::nullopt;
    return exporter::WeightView{it->second.sizes().vec(), it->second.data_ptr<float>()};
  };
  const exporter::BertDims dims{c.vocab_size,          c.hidden_size,       c.num_hidden_layers,
                                c.num_attention_heads, c.intermediate_size, c.max_position_embeddings,
                                c.type_vocab_size,     c.hidden_act,        c.layer_norm_eps};
  const exporter::OnnxExportOptions options{loaded.head, loaded.num_labels, a.model, bertx_version()};
  const std::string name = a.name.empty() ? model_name_of(a.model) : a.name;
  const std::string comment = "Written by `bertx export onnx` (bertx " + bertx_version() + ", git " + git_revision() +
                              ") from " + a.model + ": BERT, head " + loaded.head;
  const exporter::OnnxExportResult r = exporter::write_triton_repository(
      a.out, name, a.batching, comment,
      [&](const std::string& path) { return exporter::write_onnx_bert(dims, lookup, options, path); });
  std::string outputs;
  for (const auto& o : r.outputs) outputs += (outputs.empty() ? "" : ", ") + o.name;
  std::cout << "exported " << a.model << " (head " << loaded.head << ": " << outputs << "; " << c.num_hidden_layers
            << " layers, " << r.parameters << " parameters, " << r.nodes << " nodes) to " << a.out << "/" << name
            << "/1/model.onnx (" << r.bytes / (1 << 20) << " MiB), opset 17, dynamic batch and sequence axes\n"
            << "Triton: tritonserver --model-repository " << a.out << " (config.pbtxt: onnxruntime, max_batch_size "
            << a.batching.max_batch_size << ", dynamic batching)\n";
}

}  // namespace

void add_export_command(CLI::App& app, int& exit_code) {
  CLI::App* exp = app.add_subcommand("export", "write a model in another runtime's format (docs/interop.md)");
  exp->require_subcommand(1);
  auto a = std::make_shared<ExportArgs>();
  CLI::App* cmd = exp->add_subcommand(
      "onnx", "the model and its head as ONNX (opset 17, fp32) in a Triton model repository OUT/NAME");
  cmd->add_option("--model", a->model,
                  "model folder: HF, a bertx checkpoint root/step folder, Google's TF BERT, NVIDIA's ckpt_N.pt")
      ->required();
  cmd->add_option("--out", a->out, "Triton model repository to write NAME/config.pbtxt and NAME/1/model.onnx into")
      ->required();
  cmd->add_option("--name", a->name, "the model's name in the repository (default: the folder's name)");
  cmd->add_option("--head", a->head, "auto (the head the folder holds) | qa | classification | pretraining | none")
      ->check(CLI::IsMember({"auto", "qa", "classification", "pretraining", "none"}))
      ->capture_default_str();
  cmd->add_option("--max-batch-size", a->batching.max_batch_size, "config.pbtxt max_batch_size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-queue-delay-us", a->batching.max_queue_delay_us,
                  "dynamic_batching max_queue_delay_microseconds")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-queue-size", a->batching.max_queue_size,
                  "dynamic_batching default_queue_policy max_queue_size (0: unbounded)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->callback([a, &exit_code] {
    run_export_onnx(*a);
    exit_code = 0;
  });
}

}  // namespace bertx::cli
