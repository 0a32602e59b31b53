// memory_estimate.cpp - see memory_estimate.hpp. Byte counts per BERT layer for one sequence of S tokens,
// hidden H, A heads, intermediate I, e bytes per activation element (4 fp32, 2 under autocast):
//   attention: inputs of Q/K/V projections, Q, K, V, output projection input  5e * S*H
//              scores softmax output + dropout output (e each) + dropout mask (1)  (2e + 1) * A*S*S
//              dropout mask after the output projection                          1 * S*H
//   MLP:       input e*H, GELU input and output e*I each, dropout mask 1*H       (e*H + 2e*I + H) * S
//   LayerNorm: two inputs, kept in fp32 (autocast runs LayerNorm in fp32)        8 * S*H
// (Korthikanti et al.'s 34*S*H + 5*A*S^2 for e = 2 and I = 4H, with 2-byte LayerNorm inputs.)
#include "train/memory_estimate.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/module.h>

#include "bertx/error.hpp"
#include "bertx/model.hpp"
#include "bertx/optimizer.hpp"
#include "bertx/task.hpp"
#include "host/distill_options.hpp"
#include "host/train_options.hpp"
#include "io/model_loader.hpp"
#include "train/train_state.hpp"

namespace bertx {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Optimizer state per parameter, in fp32 slots, measured: one step of the real optimizer on a 4x4 tensor.
double optimizer_slots(const PluginHost& host, const ComponentConfig& optim) {
  auto opt = host.create<Optimizer>(Kind::Optimizer, optim.type, optim.options);
  at::Tensor p = at::ones({4, 4}).set_requires_grad(true);  // (4, 4)
  p.mutable_grad() = at::full({4, 4}, 0.5);
  opt->add_param_group(ParamGroup{{"probe.weight"}, {p}, 0.01});
  opt->step(1e-3);
  double bytes = 0;
  for (const auto& [name, t] : opt->state_dict())
    if (t.numel() == p.numel()) bytes += static_cast<double>(t.numel() * static_cast<std::int64_t>(t.element_size()));
  return bytes / static_cast<double>(p.numel() * 4);
}

// The sequence length the experiment trains at: --seq-len, else a [data] option that names it.
std::int64_t sequence_length(const ResolvedConfig& c, std::int64_t override_len, std::string& source) {
  if (override_len > 0) {
    source = "--seq-len";
    return override_len;
  }
  const Options& data = component(c, "data").options;
  for (const char* key : {"seq_len", "max_seq_length"})
    if (data.has(key)) {
      source = std::string("[data] ") + key;
      return data.get_int(key);
    }
  source = "assumed (the [data] reader does not name it; pass --seq-len)";
  return 128;
}

double physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / kGiB); }

}  // namespace

double activation_bytes_per_sequence(std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                                     std::int64_t intermediate, std::int64_t vocab, std::int64_t seq_len,
                                     std::int64_t predictions, int element_bytes, bool checkpointing) {
  const double S = static_cast<double>(seq_len), H = static_cast<double>(hidden), A = static_cast<double>(heads),
               I = static_cast<double>(intermediate), e = element_bytes;
  const double attention = 5 * e * S * H + (2 * e + 1) * A * S * S + S * H;
  const double mlp = (e * H + 2 * e * I + H) * S;
  const double layer_norms = 8 * S * H;
  const double layer = attention + mlp + layer_norms;
  // Embeddings: sum (fp32), LayerNorm input (fp32), dropout mask, output: 13 bytes per element.
  const double embeddings = 13 * S * H;
  // Pre-training head at the P gathered positions: transform input/GELU/LayerNorm (fp32) and the fp32
  // logits plus their log-softmax, (P, V) each.
  const double P = static_cast<double>(predictions);
  const double head = P * H * (e + 2 * e + 4) + P * static_cast<double>(vocab) * 8;
  // Checkpointing keeps each layer's input (fp32 LayerNorm output) and recomputes one layer at a time.
  const double encoder =
      checkpointing ? static_cast<double>(layers) * 4 * S * H + layer : static_cast<double>(layers) * layer;
  return embeddings + encoder + head;
}

MemoryEstimate estimate_memory(const ResolvedConfig& config, const PluginHost& host, std::int64_t seq_len_override,
                               double device_memory_gb) {
  const TrainOptions t = train_options_from(config.sections.at("train"));
  const ComponentConfig &model_cfg = component(config, "model"), &task_cfg = component(config, "task");
  MemoryEstimate m;
  m.batch = t.batch_size;
  m.seq_len = sequence_length(config, seq_len_override, m.seq_len_source);

  // The real parameter count: the model as its plugin builds it, with the task's heads.
  at::NoGradGuard no_grad;
  auto model = host.create<Model>(Kind::Model, model_cfg.type, model_cfg.options);
  auto task = host.create<Task>(Kind::Task, task_cfg.type, task_cfg.options);
  m.predictions = task->predictions_per_sequence(component(config, "data").options);
  task->attach(*model);
  for (const auto& p : model->module().parameters(true)) m.parameters += p.numel();
  const EncoderConfig& ec = model->config();
  if (m.seq_len > ec.max_position_embeddings)
    throw Error(fmt::format("sequence length {} ({}) exceeds the model's max_position_embeddings {}", m.seq_len,
                            m.seq_len_source, ec.max_position_embeddings));

  // The device the estimate is for: the CPU when the run says so (or int8, a CPU policy), else a CUDA device (an
  // fp16 recipe is estimated on a machine without one, as the dry run's memory figures are for the GPU it will run on).
  const bool on_cpu = config.run.device == "cpu" || t.precision == Precision::Int8;
  const ExecutionPolicy policy = policy_of(t, on_cpu ? at::Device(at::kCPU) : at::Device(at::kCUDA));
  const bool autocast = policy.autocast.has_value();
  const bool checkpointing =
      model_cfg.options.has("activation_checkpointing") && model_cfg.options.get_bool("activation_checkpointing");
  const double n = static_cast<double>(m.parameters);
  m.optimizer_slots = optimizer_slots(host, component(config, "optimizer"));
  if (policy.half_weights) {    // half weights + fp32 masters; half gradients during backward (they become fp32 after
    m.weights = n * 2 + n * 4;  // it, when the activations are freed: n x 4 < activations for any real batch)
    m.gradients = n * 2;
  } else {
    m.weights = n * 4 + (autocast ? n * 2 : 0);  // fp32 weights + autocast's cached half copies
    m.gradients = n * 4;
  }
  m.optimizer_state = n * 4 * m.optimizer_slots;
  m.activations_per_sequence =
      activation_bytes_per_sequence(ec.num_hidden_layers, ec.hidden_size, ec.num_attention_heads, ec.intermediate_size,
                                    ec.vocab_size, m.seq_len, m.predictions, policy.activation_bytes(), checkpointing);
  const DistillOptions distill = distill_options_from(config.sections.at("distill"));
  if (!distill.teacher.empty()) {
    ModelFolderOptions folder;
    folder.head = "auto";
    const LoadedModel teacher = load_model_folder(host, distill.teacher, folder);
    for (const auto& p : teacher.model->module().parameters(true)) m.teacher_parameters += p.numel();
    m.teacher = static_cast<double>(m.teacher_parameters) * (autocast ? 6 : 4);
    const EncoderConfig& tc = teacher.model->config();
    const double S = static_cast<double>(m.seq_len), L = static_cast<double>(tc.num_hidden_layers);
    if (distill.hidden_weight > 0 || distill.embedding_weight > 0)
      m.activations_per_sequence += (L + 1) * S * static_cast<double>(tc.hidden_size) * 4;
    if (distill.attention_weight > 0)
      m.activations_per_sequence += L * static_cast<double>(tc.num_attention_heads) * S * S * 4;
    if ((distill.hidden_weight > 0 || distill.embedding_weight > 0) && tc.hidden_size != ec.hidden_size)
      m.activations_per_sequence +=  // the student's states through fit_dense, kept for its backward
          static_cast<double>(ec.num_hidden_layers + 1) * S * static_cast<double>(tc.hidden_size) * 4;
  }
  const bool cuda = config.run.device == "cuda";
  m.runtime = cuda ? 1.0 * kGiB : 0.0;  // CUDA context + cuBLAS/cuDNN workspaces, about 1 GiB
  const double fixed = m.weights + m.gradients + m.optimizer_state + m.runtime + m.teacher;
  m.total = fixed + m.activations_per_sequence * static_cast<double>(m.batch);

  if (device_memory_gb > 0) {
    m.device_memory = device_memory_gb * kGiB;
    m.device_memory_source = "--device-memory-gb";
  } else if (cuda) {
    m.device_memory = 80 * kGiB;
    m.device_memory_source = "assumed 80 GiB (A100/H100; --device-memory-gb to change)";
  } else {
    m.device_memory = physical_memory();
    m.device_memory_source = "physical RAM";
  }
  const double room = 0.9 * m.device_memory - fixed;  // 10% for fragmentation and temporaries
  m.largest_batch = room > 0 ? static_cast<std::int64_t>(std::floor(room / m.activations_per_sequence)) : 0;
  return m;
}

std::string format_memory_estimate(const MemoryEstimate& m) {
  std::string s = fmt::format("# memory estimate per device: {} parameters, micro-batch {} x seq {} ({}){}\n",
                              m.parameters, m.batch, m.seq_len, m.seq_len_source,
                              m.predictions ? fmt::format(", {} predictions", m.predictions) : "");
  s += fmt::format("#   weights {}, gradients {}, optimizer state {} ({:.3g} fp32 slots/parameter){}\n", gib(m.weights),
                   gib(m.gradients), gib(m.optimizer_state), m.optimizer_slots,
                   m.runtime > 0 ? ", CUDA runtime " + gib(m.runtime) : "");
  if (m.teacher_parameters > 0)
    s += fmt::format("#   distillation teacher {} parameters: {}\n", m.teacher_parameters, gib(m.teacher));
  s += fmt::format("#   activations {} ({:.1f} MiB per sequence)\n",
                   gib(m.activations_per_sequence * static_cast<double>(m.batch)),
                   m.activations_per_sequence / (1024.0 * 1024.0));
  s += fmt::format("#   total {} of {} ({}): {}; largest micro-batch that fits: {}\n", gib(m.total),
                   gib(m.device_memory), m.device_memory_source,
                   m.total <= 0.9 * m.device_memory ? "fits" : "DOES NOT FIT", m.largest_batch);
  return s;
}

}  // namespace bertx
