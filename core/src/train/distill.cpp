// distill.cpp - the [distill] section, the distillation losses and the Distiller (distill.hpp says what each is).
#include "train/distill.hpp"

#include <cmath>
#include <regex>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/module.h>

#include "bertx/error.hpp"
#include "host/plugin_host.hpp"
#include "io/model_loader.hpp"

namespace bertx {

namespace {

// The teacher's name of a student parameter under init_layers: bert.encoder.layer.<i>. -> layer <init[i] - 1>.
std::string teacher_name(const std::string& name, const std::vector<std::int64_t>& layers) {
  static const std::regex layer(R"(^bert\.encoder\.layer\.(\d+)\.(.*)$)");
  std::smatch m;
  if (!std::regex_match(name, m, layer)) return name;
  const std::size_t i = std::stoul(m[1].str());
  return "bert.encoder.layer." + std::to_string(layers.at(i) - 1) + "." + m[2].str();
}

std::int64_t parameter_count(Model& model) {
  std::int64_t n = 0;
  for (const auto& p : model.module().parameters(true)) n += p.numel();
  return n;
}

}  // namespace

namespace distill {

at::Tensor soft_loss(const at::Tensor& student, const at::Tensor& teacher, double temperature, const at::Tensor& mask) {
  at::Tensor s = student.to(at::kFloat), t = teacher.detach().to(at::kFloat);  // (N, C)
  if (mask.defined()) s = s.index({mask}), t = t.index({mask});
  if (s.size(0) == 0) return at::zeros({}, s.options());
  if (s.size(-1) == 1) return at::mse_loss(s, t);  // regression
  const at::Tensor log_s = at::log_softmax(s / temperature, -1), log_t = at::log_softmax(t / temperature, -1);
  return (log_t.exp() * (log_t - log_s)).sum(-1).mean() * (temperature * temperature);
}

at::Tensor mse(const at::Tensor& student, const at::Tensor& teacher) {
  return at::mse_loss(student.to(at::kFloat), teacher.detach().to(at::kFloat));
}

at::Tensor attention_mse(const at::Tensor& student, const at::Tensor& teacher, const at::Tensor& attention_mask) {
  const at::Tensor masked = (attention_mask == 0).view({attention_mask.size(0), 1, 1, attention_mask.size(1)});
  return mse(student.masked_fill(masked, 0), teacher.masked_fill(masked, 0));  // (B, h, S, S)
}

std::vector<std::int64_t> layer_map(const std::vector<double>& map, std::int64_t student_layers,
                                    std::int64_t teacher_layers, const std::string& key) {
  std::vector<std::int64_t> out;
  if (map.empty()) {
    for (std::int64_t i = 1; i <= student_layers; ++i)
      out.push_back(std::max<std::int64_t>(1, i * teacher_layers / student_layers));
    return out;
  }
  if (static_cast<std::int64_t>(map.size()) != student_layers)
    throw Error(fmt::format("[distill] {}: {} entries for a student of {} layers (one teacher layer per student layer)",
                            key, map.size(), student_layers));
  for (double v : map) {
    if (v != std::floor(v) || v < 1 || v > static_cast<double>(teacher_layers))
      throw Error(fmt::format("[distill] {}: {} is not a teacher layer (integers 1..{})", key, v, teacher_layers));
    out.push_back(static_cast<std::int64_t>(v));
  }
  return out;
}

}  // namespace distill

Distiller::Distiller(const PluginHost& host, const DistillOptions& options, Task& task, Model& student,
                     const at::Device& device)
    : options_(options) {
  ModelFolderOptions folder;
  folder.head = "auto";
  teacher_ = load_model_folder(host, options_.teacher, folder).model;
  const std::int64_t before = parameter_count(*teacher_);
  task.attach(*teacher_);
  if (parameter_count(*teacher_) != before && options_.soft_weight > 0)
    throw Error("[distill] teacher " + options_.teacher +
                ": its checkpoint has no head for the run's task (attaching it added parameters); distill from a "
                "teacher fine-tuned for this task, or set soft_weight = 0 for the intermediate losses alone");
  for (auto& p : teacher_->module().parameters(true)) p.set_requires_grad(false);
  teacher_->module().to(device);
  teacher_->module().eval();

  const EncoderConfig &s = student.config(), &t = teacher_->config();
  map_ = distill::layer_map(options_.layer_map, s.num_hidden_layers, t.num_hidden_layers, "layer_map");
  if (options_.attention_weight > 0 && s.num_attention_heads != t.num_attention_heads)
    throw Error(
        fmt::format("[distill] attention_weight: the student has {} attention heads, the teacher {}: the "
                    "scores are matched head by head (a narrower student keeps the teacher's head count)",
                    s.num_attention_heads, t.num_attention_heads));
  if ((options_.hidden_weight > 0 || options_.embedding_weight > 0) && s.hidden_size != t.hidden_size) {
    if (student.module().named_children().contains("fit_dense"))
      throw Error("[distill] the student already has a module named fit_dense: the projection's name is taken");
    // TinyBERT's W_h: y = x W^T + b, W (Ht, Hs) ~ N(0, initializer_range), b = 0, as BERT's linears start.
    at::NoGradGuard no_grad;
    fit_ = std::make_shared<torch::nn::Module>("fit_dense");
    fit_->register_parameter("weight", at::empty({t.hidden_size, s.hidden_size}).normal_(0, s.initializer_range));
    fit_->register_parameter("bias", at::zeros({t.hidden_size}));
    student.module().register_module("fit_dense", fit_);
  }
}

std::string Distiller::projection() const {
  if (!fit_) return "";
  auto p = fit_->named_parameters(false);
  const at::Tensor& w = p["weight"];
  return fmt::format("fit_dense {} -> {}", w.size(1), w.size(0));
}

at::Tensor Distiller::to_teacher_width(const at::Tensor& student_states) const {
  if (!fit_) return student_states;
  auto p = fit_->named_parameters(false);
  return at::linear(student_states, p["weight"], p["bias"]);  // (..., Hs) -> (..., Ht)
}

std::int64_t Distiller::teacher_parameters() const { return parameter_count(*teacher_); }

void Distiller::init_student(Model& student) const {
  if (options_.init_layers.empty()) return;
  const EncoderConfig &s = student.config(), &t = teacher_->config();
  const auto layers = distill::layer_map(options_.init_layers, s.num_hidden_layers, t.num_hidden_layers, "init_layers");
  at::NoGradGuard no_grad;
  auto from = teacher_->module().named_parameters(true);
  for (auto& item : student.module().named_parameters(true)) {
    const std::string name = teacher_name(item.key(), layers);
    const at::Tensor* src = from.find(name);
    if (!src) continue;  // a head the teacher has not: the student's own initialisation
    if (src->sizes() != item.value().sizes())
      throw Error(
          fmt::format("[distill] init_layers: the student's {} is {}, the teacher's {} is {}: the student must "
                      "keep the teacher's widths to start from its layers",
                      item.key(), c10::str(item.value().sizes()), name, c10::str(src->sizes())));
    item.value().copy_(*src);
  }
}

StepOutput Distiller::step(Task& task, Model& student, const Batch& batch) {
  const DistillOptions& o = options_;
  const bool states = o.hidden_weight > 0 || o.embedding_weight > 0, scores = o.attention_weight > 0;
  EncoderOutput t;
  std::map<std::string, at::Tensor> teacher_out;
  {
    at::NoGradGuard no_grad;
    t = teacher_->encode(batch, states, scores);
    if (o.soft_weight > 0) teacher_out = task.heads(*teacher_, batch, t).outputs;
  }
  const EncoderOutput s = student.encode(batch, states, scores);
  StepOutput out = task.heads(student, batch, s);
  out.metrics["hard_loss"] = out.loss.detach();
  at::Tensor loss = out.loss.to(at::kFloat) * o.hard_weight;
  auto add = [&](const char* name, double weight, const at::Tensor& term) {
    out.metrics[std::string("kd_") + name + "_loss"] = term.detach();
    loss = loss + term * weight;
  };
  if (o.soft_weight > 0) {
    at::Tensor soft = at::zeros({}, loss.options());
    for (const auto& [name, teacher_logits] : teacher_out) {
      if (name.size() > 5 && name.compare(name.size() - 5, 5, "_mask") == 0) continue;
      const auto student_logits = out.outputs.find(name);
      if (student_logits == out.outputs.end())
        throw Error("[distill] the task's heads gave the teacher an output '" + name + "' but not the student");
      const auto mask = out.outputs.find(name + "_mask");
      soft = soft + distill::soft_loss(student_logits->second, teacher_logits, o.temperature,
                                       mask == out.outputs.end() ? at::Tensor() : mask->second);
    }
    add("soft", o.soft_weight, soft);
  }
  if (o.embedding_weight > 0)
    add("embedding", o.embedding_weight, distill::mse(to_teacher_width(s.hidden_states[0]), t.hidden_states[0]));
  if (o.hidden_weight > 0 || o.attention_weight > 0) {
    at::Tensor hidden = at::zeros({}, loss.options()), attention = at::zeros({}, loss.options());
    for (std::size_t i = 0; i < map_.size(); ++i) {
      const auto j = static_cast<std::size_t>(map_[i]);  // teacher layer, 1-based = its hidden_states index
      if (o.hidden_weight > 0)
        hidden = hidden + distill::mse(to_teacher_width(s.hidden_states[i + 1]), t.hidden_states[j]);
      if (o.attention_weight > 0)
        attention = attention + distill::attention_mse(s.attention_scores[i], t.attention_scores[j - 1],
                                                       batch.at("attention_mask"));
    }
    if (o.hidden_weight > 0) add("hidden", o.hidden_weight, hidden);
    if (o.attention_weight > 0) add("attention", o.attention_weight, attention);
  }
  out.loss = loss;
  out.metrics["loss"] = loss.detach();
  return out;
}

}  // namespace bertx
