// memory_estimate.hpp - `bertx run --dry-run`'s memory estimate per device: weights, gradients, optimizer
// state, activations for the micro-batch and sequence length, and the largest micro-batch that fits.
//
// Parameters are counted on the real model (built by its plugin, heads attached by the task) and the
// optimizer's state slots are measured by one step of the real optimizer plugin on a small tensor, so
// both follow whatever plugins the experiment names. Activations are analytic (BERT's layer, as in
// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", with
// PyTorch's 1-byte dropout masks, fp32 LayerNorm inputs under autocast and the explicit attention
// path's (B, heads, S, S) scores): an upper bound where a fused attention kernel is used.
#pragma once
#include <cstdint>
#include <string>

#include "host/config.hpp"
#include "host/plugin_host.hpp"

namespace bertx {

struct MemoryEstimate {
  std::int64_t parameters = 0;          // trainable parameters (encoder + the task's heads)
  std::int64_t batch = 0;               // micro-batch per device
  std::int64_t seq_len = 0;             // tokens per sequence
  std::int64_t predictions = 0;         // masked positions per sequence (pre-training), 0 otherwise
  std::string seq_len_source;           // where seq_len came from ("--seq-len", "[data] seq_len", "assumed")
  double optimizer_slots = 0;           // optimizer state bytes per parameter / 4 (Adam, LAMB: 2)
  double weights = 0;                   // bytes: fp32 weights (+ the fp16/bf16 copies autocast caches)
  double gradients = 0;                 // bytes: fp32 gradients
  double optimizer_state = 0;           // bytes
  double activations_per_sequence = 0;  // bytes saved for backward per sequence of the micro-batch
  double runtime = 0;                   // bytes: CUDA context and library workspaces (0 on the CPU)
  std::int64_t teacher_parameters = 0;  // [distill] teacher's parameters (0: no distillation)
  double teacher = 0;                   // bytes: the teacher's weights (+ autocast's half copies), in `total`
  double total = 0;                     // bytes: all of the above for `batch`
  double device_memory = 0;             // bytes available on the device
  std::string device_memory_source;     // "--device-memory-gb", "physical RAM", "assumed 80 GiB (A100/H100)"
  std::int64_t largest_batch = 0;       // largest micro-batch whose total fits in 90% of device_memory
};

// Activation bytes saved for backward by one sequence (the analytic part; exposed for tests).
// element_bytes: 4 (fp32/tf32) or 2 (autocast); checkpointing: only layer inputs kept, plus one layer's
// recomputation working set.
double activation_bytes_per_sequence(std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                                     std::int64_t intermediate, std::int64_t vocab, std::int64_t seq_len,
                                     std::int64_t predictions, int element_bytes, bool checkpointing);

// seq_len_override / device_memory_gb: 0 = derive (see the struct's *_source fields).
// A [distill] teacher is loaded to count it: its weights, and per sequence the hidden states / attention scores the
// losses keep (it runs without gradients, so nothing else of its forward stays).
MemoryEstimate estimate_memory(const ResolvedConfig& config, const PluginHost& host, std::int64_t seq_len_override,
                               double device_memory_gb);

// Human-readable lines, each starting with "# " (the dry run prints them after the resolved TOML).
std::string format_memory_estimate(const MemoryEstimate& m);

}  // namespace bertx
