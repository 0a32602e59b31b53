// cmd_bench_inference.cpp - `bertx bench infer --task squad` (alias `bench inference`): inference throughput
// and latency of a BERT model with the SQuAD head, as the seeds' inference benchmarks report them: after
// warm-up iterations, each timed iteration is one forward pass (encoder + span logits, eval mode, no
// autograd) on a batch of random tokens, synchronised with the device; prints sequences/s and latency
// average, p50, p90, p95, p99 (ms), then one JSON line (sequences_per_second, step_ms_median, latency
// percentiles, peak_rss_mb, the process settings) for scripts.
// Weights are random unless --weights is given: timing does not depend on them. Batches are full length unless
// --lengths names a file of real sequence lengths (e.g. SQuAD windows' token counts; tools/bench/compare makes
// one from the SQuAD dev set): batches then cycle through them, right-padded to --seq-len as run_squad pads.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <cstdio>
#include <numeric>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include "bertx/compat.hpp"
#include "bertx/error.hpp"
#include "bertx/execution.hpp"
#include "bertx/ops.hpp"
#include "bertx/model.hpp"
#include "commands.hpp"
#include "host/plugin_host.hpp"
#include "train/process_setup.hpp"
#include "train/bench_stats.hpp"
#include "train/op_profile.hpp"
#include "io/interop.hpp"
#include "io/weights.hpp"

namespace bertx::cli {

namespace {

struct InferenceArgs {
  std::string task = "squad";  // the head timed (squad: span logits)
  std::string preset =
      "bert-large-uncased";        // [model] preset of the bert plugin, "custom" (reads --config) or an HF folder
  std::string config;              // Hugging Face config.json (with --preset custom)
  std::string weights;             // optional .safetensors / HF folder / checkpoint folder
  std::int64_t batch_size = 8;     // sequences per forward pass
  std::int64_t seq_len = 384;      // tokens per sequence (SQuAD's max_seq_length)
  std::int64_t warmup = 10;        // untimed iterations first (allocator, kernels, caches)
  std::int64_t iterations = 50;    // timed iterations
  std::string device = "auto";     // auto (CUDA when available) | cpu | cuda
  std::string precision = "fp32";  // precision_flag_choices(): fp32 | amp (fp16, CUDA) | amp-bf16 (bf16) | int8 (CPU)
  int threads = 0;                 // CPU threads; 0 = one per core
  bool profile = false;            // time every operator over the timed iterations
  bool half_weights = false;       // with bf16/fp16: weights converted once (LayerNorm stays fp32)
  std::string lengths;             // file of real tokens per sequence, one per line; empty: all full
  bool padded = false;             // compute on the padding too ([model] unpadded = false), for ablation
};

// The lengths file: one integer in [1, seq_len] per line (blank lines skipped).
std::vector<std::int64_t> read_lengths(const std::string& path, std::int64_t seq_len) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) throw Error("bench infer: cannot open --lengths " + path);
  std::vector<std::int64_t> out;
  char line[256];
  for (int n = 1; std::fgets(line, sizeof line, f); ++n) {
    const std::string text = line;
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    long long v = 0;
    char rest = 0;
    if (std::sscanf(line, "%lld %c", &v, &rest) != 1 || v < 1 || v > seq_len) {
      std::fclose(f);
      throw Error(path + ":" + std::to_string(n) + ": expected one sequence length in [1, " + std::to_string(seq_len) +
                  "] (--seq-len)");
    }
    out.push_back(v);
  }
  std::fclose(f);
  if (out.empty()) throw Error("bench infer: --lengths " + path + " has no lengths");
  return out;
}

void bench_inference(const InferenceArgs& a) {
  const bool cuda = torch::cuda::is_available();
  if (a.device == "cuda" && !cuda)
    throw Error("bench inference: --device cuda but no CUDA device is available to this LibTorch");
  const at::Device device =
      (a.device == "cuda" || (a.device == "auto" && cuda)) ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  const ExecutionPolicy policy =
      make_policy({precision_from_flag(a.precision, "bench infer"), device, PolicyUse::Inference, a.half_weights},
                  "bench infer --precision");
  const ProcessSettings process = apply_threads(a.threads);

  PluginHost host;
  host.scan(PluginHost::default_search_path());
  std::map<std::string, OptionValue> set{{"preset", a.preset}};
  if (!a.config.empty()) set["config"] = a.config;
  std::string config = a.config;
  if (std::filesystem::is_directory(a.preset)) {  // --model DIR: its config.json (and --weights DIR if wanted)
    config = config_file_in(a.preset);
    if (!std::filesystem::exists(config))
      throw Error("bench infer: --model " + a.preset +
                  " is a folder without config.json (expected a preset or a Hugging Face folder)");
    set = {{"preset", std::string("custom")}, {"config", config}};
  }
  if (a.padded) set["unpadded"] = false;
  const std::string type = model_type_for(host, config);
  auto model = host.create<Model>(Kind::Model, type, host.options_for(Kind::Model, type, set));
  model->add_head(Head::SpanQA);
  if (!a.weights.empty()) {
    const ModelSource source = find_model_source(a.weights);  // HF, Google TF, or NVIDIA .pt
    load_weights(model->module(), load_model_weights(source), source.weights);
  }
  model->module().to(device);
  model->module().eval();
  if (policy.half_weights) {  // what a server does once: autocast then has no weight to cast per forward
    at::NoGradGuard no_grad;
    for (const auto& p : model->module().named_parameters(true)) {
      if (!policy.keeps_fp32(p.key())) p.value().set_data(p.value().to(*policy.autocast));
    }
  }
  model->prepare(policy);
  const std::int64_t B = a.batch_size, S = a.seq_len, V = model->config().vocab_size;
  if (S > model->config().max_position_embeddings)
    throw Error("bench inference: --seq-len " + std::to_string(S) + " > the model's max_position_embeddings " +
                std::to_string(model->config().max_position_embeddings));

  // The batches: one of full length, or the cycle through --lengths (batch i takes lengths i*B .. i*B+B-1 mod n).
  const std::vector<std::int64_t> lengths =
      a.lengths.empty() ? std::vector<std::int64_t>{S} : read_lengths(a.lengths, S);
  const auto n_lengths = static_cast<std::int64_t>(lengths.size());
  const std::int64_t n_batches = n_lengths / std::gcd(n_lengths, B);
  at::manual_seed(1);
  std::vector<Batch> batches;
  std::int64_t real_tokens = 0;
  for (std::int64_t i = 0; i < n_batches; ++i) {
    at::Tensor len = at::empty({B, 1}, at::kLong);  // (B, 1)
    for (std::int64_t b = 0; b < B; ++b) len[b][0] = lengths[static_cast<std::size_t>((i * B + b) % n_lengths)];
    const at::Tensor pos = at::arange(S, at::kLong).unsqueeze(0);  // (1, S)
    const at::Tensor mask = pos.lt(len).to(at::kLong);             // (B, S)
    real_tokens += mask.sum().item<std::int64_t>();
    Batch batch;
    batch.tensors["input_ids"] =
        (at::randint(std::min<std::int64_t>(999, V - 1), V, {B, S}, at::kLong) * mask).to(device);  // [PAD] = 0
    batch.tensors["token_type_ids"] = (pos.ge(len / 3).to(at::kLong) * mask).to(device);  // question, then context
    batch.tensors["attention_mask"] = mask.to(device);
    batches.push_back(std::move(batch));
  }
  const double real_fraction = static_cast<double>(real_tokens) / static_cast<double>(n_batches * B * S);
  std::size_t next = 0;

  auto forward = [&] {
    at::NoGradGuard no_grad;
    ExecutionScope scope(policy);
    const Batch& batch = batches[next++ % batches.size()];
    at::Tensor logits = model->span_logits(model->encode(batch).sequence_output);  // (B, S, 2)
    if (device.is_cuda()) torch::cuda::synchronize();
    return logits;
  };
  std::printf(
      "inference bench: bert %s, span head, batch %lld x %lld tokens (%.0f%% real, %s), %s, %d threads, %lld "
      "warm-up + %lld timed iterations\n",
      a.preset.c_str(), static_cast<long long>(B), static_cast<long long>(S), 100.0 * real_fraction,
      a.padded ? "computed padded" : "padding skipped where worth it", policy.describe().c_str(), at::get_num_threads(),
      static_cast<long long>(a.warmup), static_cast<long long>(a.iterations));
  if (policy.autocast == at::kBFloat16 && !device.is_cuda())
    if (const std::string w = bf16_emulation_warning(process.cpu_bf16); !w.empty())
      std::printf("warning: %s\n", w.c_str());
  for (std::int64_t i = 0; i < a.warmup; ++i) forward();
  std::vector<double> ms;
  std::optional<OpProfile> profile;
  if (a.profile) profile.emplace();
  for (std::int64_t i = 0; i < a.iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    forward();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  if (profile)
    std::printf("operators per iteration (%lld iterations; profiled iterations run slower):\n%s\n",
                static_cast<long long>(a.iterations), profile->table(25, static_cast<double>(a.iterations)).c_str());
  const double avg = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  std::printf("sequences/s %.2f\nlatency avg %.3f ms, p50 %.3f ms, p90 %.3f ms, p95 %.3f ms, p99 %.3f ms\n",
              static_cast<double>(B) * 1000.0 / avg, avg, percentile(ms, 0.5), percentile(ms, 0.9),
              percentile(ms, 0.95), percentile(ms, 0.99));
  const double median = percentile(ms, 0.5);
  nlohmann::json j{
      {"task", a.task},
      {"sequences_per_second", static_cast<double>(B) * 1000.0 / median},
      {"step_ms_median", median},
      {"latency_ms_avg", avg},
      {"latency_ms_p50", median},
      {"latency_ms_p90", percentile(ms, 0.9)},
      {"latency_ms_p95", percentile(ms, 0.95)},
      {"latency_ms_p99", percentile(ms, 0.99)},
      {"peak_rss_mb", peak_rss_mb()},
      {"half_weights", a.half_weights},
      {"precision", enum_name(policy.precision)},
      {"execution", policy.describe()},
      {"gemm_isa", ops::gemm_isa()},
      {"int8_activation_levels", policy.quantization == Quantization::Int8Dynamic ? ops::int8_activation_levels() : 0},
      {"real_token_fraction", real_fraction},
      {"padded", a.padded},
      {"process", nlohmann::json::parse(process.json())}};
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

void add_bench_inference_command(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<InferenceArgs>();
  CLI::App* cmd = bench.add_subcommand("infer", "forward-pass throughput and latency percentiles (BERT + SQuAD head)");
  cmd->alias("inference");
  cmd->add_option("--task", a->task, "head to time")->check(CLI::IsMember({"squad"}));
  cmd->add_option("--model,--preset", a->preset,
                  "bert plugin preset (tiny, bert-base-uncased, ...; custom: --config) or HF folder");
  cmd->add_option("--config", a->config, "Hugging Face config.json, with --preset custom");
  cmd->add_option("--weights", a->weights, "weights to load (.safetensors or model folder); default random");
  cmd->add_option("--batch,--batch-size", a->batch_size, "sequences per forward pass")->check(CLI::PositiveNumber);
  cmd->add_option("--seq-len", a->seq_len, "tokens per sequence")->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", a->warmup, "untimed iterations first")->check(CLI::NonNegativeNumber);
  cmd->add_option("--steps,--iterations", a->iterations, "timed iterations")->check(CLI::PositiveNumber);
  cmd->add_option("--device", a->device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--precision", a->precision, precision_flag_choices());
  cmd->add_option("--threads", a->threads, "CPU threads (0: the CPUs this process may use)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--half-weights", a->half_weights,
                "with bf16/fp16: convert the weights once (LayerNorm stays fp32) instead of "
                "autocast casting them every forward");
  cmd->add_flag("--profile", a->profile, "time every operator over the timed iterations and print the table");
  cmd->add_option("--lengths", a->lengths,
                  "file of real tokens per sequence, one per line: batches cycle through them, "
                  "right-padded to --seq-len (default: every sequence full)");
  cmd->add_flag("--padded", a->padded,
                "compute on the padding too ([model] unpadded = false), to measure what skipping it saves");
  cmd->callback([a, &exit_code] {
    bench_inference(*a);
    exit_code = 0;
  });
}

}  // namespace bertx::cli
