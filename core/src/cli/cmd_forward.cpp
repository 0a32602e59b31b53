// cmd_forward.cpp - `bertx forward`: run a model folder in eval mode (fp32) on named input tensors and write
// every intermediate a parity check needs (hidden states, pooled output, logits, losses, gradients).
// Input/output names follow ../shared/golden/MANIFEST.md, so the golden files can be checked from outside.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "bertx/compat.hpp"
#include "bertx/error.hpp"
#include "bertx/execution.hpp"
#include "bertx/ops.hpp"
#include "bertx/losses.hpp"
#include "bertx/model.hpp"
#include "commands.hpp"
#include "host/plugin_host.hpp"
#include "io/model_loader.hpp"
#include "io/safetensors.hpp"
#include "train/process_setup.hpp"

namespace bertx::cli {

namespace {

struct ForwardArgs {
  std::string model_dir, inputs, out, head = "pretraining";
  std::string precision = "fp32";  // precision_flag_choices(); outputs are written as float32
  std::vector<std::string> extra_weights;
  bool grads = false;
  bool head_given = false;  // --head on the command line (else a folder without cls.* runs as the encoder)
};

const at::Tensor* find(const TensorMap& m, const char* name) {
  auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}

void run_forward(ForwardArgs a) {
  PluginHost host;
  host.scan(PluginHost::default_search_path());
  LoadedModel loaded = load_model_folder(
      host, a.model_dir, ModelFolderOptions{a.head, a.extra_weights, /*encoder_fallback=*/!a.head_given});
  Model* model = loaded.model.get();
  const std::string& head = loaded.head;
  const ExecutionPolicy policy = make_policy({precision_from_flag(a.precision, "forward"), at::Device(at::kCPU),
                                              a.grads ? PolicyUse::Training : PolicyUse::Inference},
                                             "forward --precision");
  model->prepare(policy);
  if (policy.quantization == Quantization::Int8Dynamic)
    spdlog::info("int8 linears: {}, CPU ISA {}, activations quantized per token to +-{}", ops::gemm_library(),
                 ops::gemm_isa(), ops::int8_activation_levels());

  TensorMap in = load_safetensors(a.inputs);
  Batch batch;
  for (const char* k : {"input_ids", "token_type_ids", "attention_mask"})
    if (auto* t = find(in, k)) batch.tensors[k] = t->to(at::kLong);
  if (!batch.has("input_ids")) throw Error(a.inputs + ": no tensor 'input_ids' (B, S)");

  TensorMap out;
  std::optional<ExecutionScope> scope(std::in_place, policy);
  if (policy.autocast == at::kBFloat16)
    if (const std::string w = bf16_emulation_warning(cpu_bf16()); !w.empty()) spdlog::warn("{}", w);
  std::optional<at::NoGradGuard> no_grad;  // int8 linears run without autograd (fp32 keeps the autograd GEMMs)
  if (policy.quantization != Quantization::None) no_grad.emplace();
  EncoderOutput enc = model->encode(batch, /*all_hidden_states=*/true);
  for (std::size_t i = 0; i < enc.hidden_states.size(); ++i)
    out["hidden_states." + std::to_string(i)] = enc.hidden_states[i];
  out["sequence_output"] = enc.sequence_output;
  if (enc.pooled_output.defined()) out["pooled_output"] = enc.pooled_output;

  at::Tensor loss;
  if (head == "pretraining") {
    const at::Tensor* pairs = find(in, "masked_lm_positions");  // (N, 2) rows of (batch, position)
    if (pairs) {
      at::Tensor sel = enc.sequence_output.index({pairs->select(1, 0), pairs->select(1, 1)});  // (N, H)
      out["mlm_logits"] = model->mlm_logits(sel.unsqueeze(0), {}).squeeze(0);                  // (N, V)
    } else {
      out["mlm_logits"] = model->mlm_logits(enc.sequence_output, {});  // (B, S, V)
    }
    out["nsp_logits"] = model->nsp_logits(enc.pooled_output);
    const at::Tensor* labels = find(in, "masked_lm_labels");
    const at::Tensor* nsp = find(in, "next_sentence_label");
    if (!nsp) nsp = find(in, "next_sentence_labels");
    if (labels) {
      // Loss through the fast path: logits only where labels != -100.
      at::Tensor where = labels->ne(losses::kIgnoreIndex).nonzero();  // (M, 2)
      at::Tensor sel = enc.sequence_output.index({where.select(1, 0), where.select(1, 1)});
      at::Tensor target = labels->index({where.select(1, 0), where.select(1, 1)});
      out["mlm_loss"] = losses::mlm(model->mlm_logits(sel.unsqueeze(0), {}).squeeze(0), target);
      loss = out["mlm_loss"];
    }
    if (nsp) {
      out["nsp_loss"] = losses::classification(out["nsp_logits"], nsp->to(at::kLong));
      loss = loss.defined() ? loss + out["nsp_loss"] : out["nsp_loss"];
    }
    if (labels && nsp) out["total_loss"] = loss;
  } else if (head == "qa") {
    at::Tensor logits = model->span_logits(enc.sequence_output);  // (B, S, 2)
    out["start_logits"] = logits.select(-1, 0).contiguous();
    out["end_logits"] = logits.select(-1, 1).contiguous();
    const at::Tensor *s = find(in, "start_positions"), *e = find(in, "end_positions");
    if (s && e) loss = out["loss"] = losses::span(out["start_logits"], out["end_logits"], *s, *e);
  } else if (head == "classification") {
    out["logits"] = model->classifier_logits(enc.pooled_output);
    const at::Tensor* labels = find(in, "labels");
    if (!labels) labels = find(in, "cls_labels");
    if (labels) loss = out["loss"] = losses::classification(out["logits"], *labels);
  }

  if (a.grads) {
    if (!loss.defined()) throw Error(a.inputs + ": --grads needs labels in the inputs to define a loss");
    loss.backward();
    for (const auto& item : model->module().named_parameters(true))
      out["grad." + item.key()] = item.value().grad().defined() ? item.value().grad() : at::zeros_like(item.value());
  }
  scope.reset();
  for (auto& [k, v] : out) v = v.detach().to(at::kFloat).contiguous();
  save_safetensors(a.out, out, {{"format", "pt"}, {"producer", "bertx forward"}});
  std::cout << "wrote " << out.size() << " tensors to " << a.out << "\n";
}

}  // namespace

void add_forward_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ForwardArgs>();
  CLI::App* cmd =
      app.add_subcommand("forward", "run a model folder on input tensors and write every output (parity checks)");
  cmd->add_option("--model", a->model_dir,
                  "model folder: config.json + model.safetensors (or weights.safetensors), a bertx checkpoint "
                  "root/step folder; a sentence-transformers folder: its encoder; Google's TF BERT (bert_config.json "
                  "+ *.ckpt.index); NVIDIA's ckpt_N.pt")
      ->required();
  cmd->add_option("--inputs", a->inputs, "safetensors with input_ids, token_type_ids, attention_mask [, labels]")
      ->required();
  cmd->add_option("--out", a->out, "output safetensors")->required();
  cmd->add_option("--head", a->head,
                  "pretraining | qa | classification | none (the encoder alone, as transformers' BertModel)")
      ->check(CLI::IsMember({"pretraining", "qa", "classification", "none"}))
      ->capture_default_str();
  cmd->add_option("--weights", a->extra_weights,
                  "extra weight files (heads), default: qa_head/cls_head.safetensors in the folder");
  cmd->add_option("--precision", a->precision,
                  precision_flag_choices() + " (on the CPU; outputs written as float32; --grads: not int8)")
      ->capture_default_str();
  cmd->add_flag("--grads", a->grads, "also write grad.<parameter> of the loss for every parameter");
  cmd->callback([a, cmd, &exit_code] {
    at::manual_seed(0);
    a->head_given = cmd->count("--head") > 0;
    run_forward(*a);
    exit_code = 0;
  });
}

}  // namespace bertx::cli
