// model_runner.cpp - a served model's forward pass on a batch of sequences (model_runner.hpp).
#include "serve/model_runner.hpp"

#include <optional>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "bertx/compat.hpp"
#include "bertx/error.hpp"
#include "bertx/execution.hpp"
#include "bertx/model.hpp"
#include "io/model_loader.hpp"

namespace bertx::serve {

namespace {

at::Tensor as_tensor(const std::vector<std::int64_t>& v, std::int64_t rows, std::int64_t cols) {
  return at::from_blob(const_cast<std::int64_t*>(v.data()), {rows, cols}, at::kLong).clone();
}

OutputTensor output(const char* name, const at::Tensor& t, bool per_token) {
  const at::Tensor c = t.detach().to(at::kFloat).contiguous();  // (B, X)
  OutputTensor o{name, c.size(0), c.size(1), {}, per_token};
  o.data.assign(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  return o;
}

}  // namespace

ServedModel load_served_model(PluginHost& host, const ServedModelOptions& options, std::int64_t max_batch_size) {
  const std::string head = options.task == "squad"            ? "qa"
                           : options.task == "classification" ? "classification"
                                                              : "auto";
  const ExecutionPolicy policy =
      make_policy({precision_from_flag(options.precision, "bertx serve"), at::Device(at::kCPU), PolicyUse::Inference},
                  "bertx serve --precision");
  LoadedModel loaded = load_model_folder(host, options.path, ModelFolderOptions{head, {}});
  if (loaded.head != "qa" && loaded.head != "classification")
    throw Error(options.path + ": no span QA or classification head in this folder (serve needs one; got " +
                loaded.head + ")");
  ServedModel m;
  m.name = options.name, m.path = options.path;
  m.task = loaded.head == "qa" ? "squad" : "classification";
  const EncoderConfig& c = loaded.model->config();
  m.limits = ModelLimits{
      c.vocab_size, c.type_vocab_size, c.max_position_embeddings, max_batch_size,
      m.task == "squad" ? std::vector<std::string>{"start_logits", "end_logits"} : std::vector<std::string>{"logits"}};
  m.vocab = loaded.vocab;
  m.do_lower_case = loaded.do_lower_case ? static_cast<int>(*loaded.do_lower_case) : -1;
  m.num_labels = loaded.num_labels;
  const bool squad = m.task == "squad";
  std::shared_ptr<Model> model = loaded.model;
  model->prepare(policy);  // int8: the encoder's linears quantized once, here
  m.runner = [model, squad, policy](const Sequences& s) {
    c10::InferenceMode guard;
    ExecutionScope scope(policy);
    Batch batch;
    batch.tensors["input_ids"] = as_tensor(s.input_ids, s.rows, s.cols);
    batch.tensors["attention_mask"] = as_tensor(s.attention_mask, s.rows, s.cols);
    batch.tensors["token_type_ids"] = as_tensor(s.token_type_ids, s.rows, s.cols);
    batch.padding_unread = true;  // padded positions' outputs are not part of the answer
    const EncoderOutput enc = model->encode(batch);
    std::vector<OutputTensor> out;
    if (squad) {
      const at::Tensor logits = model->span_logits(enc.sequence_output);  // (B, S, 2)
      out.push_back(output("start_logits", logits.select(-1, 0), true));
      out.push_back(output("end_logits", logits.select(-1, 1), true));
    } else {
      out.push_back(output("logits", model->classifier_logits(enc.pooled_output), false));  // (B, C)
    }
    return out;
  };
  return m;
}

}  // namespace bertx::serve
