// bertx/execution.hpp - the execution policy: one typed answer to "how does this run compute", built once from the
// experiment's [train] section or a command's --precision flag, and read by training set-up, observers, the memory
// estimate, bench, forward and the model (Model::prepare). Why: a precision used to be three knobs (an enum,
// use_pure_fp16, fp32_params) read in ten files, and each command parsed its own precision strings; adding int8 or
// a CUDA kernel now touches the policy and the op (bertx/ops.hpp dispatches on device x dtype), not every caller.
// Implemented in libbertx_ops.so (core/src/ops/execution.cpp).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "bertx/precision.hpp"
#include "bertx/version.hpp"

namespace bertx {

// How the encoder's linear layers are stored and multiplied.
enum class Quantization {
  None,         // in the compute dtype (float32, or the autocast dtype)
  Int8Dynamic,  // int8 weights per output channel, activations quantized per token at run time (ops::QuantizedWeight)
};

// Whether a parameter named `name` is kept float32 under half weights: it contains one of `fp32_params`.
BERTX_EXPORT bool kept_fp32(const std::vector<std::string>& fp32_params, const std::string& name);

// What the policy is for: training refuses int8; inference refuses nothing it can run.
enum class PolicyUse { Training, Inference };

struct ExecutionPolicy {
  Precision precision = Precision::Fp32;        // the choice it was built from (its name is in run records)
  c10::Device device = c10::Device(c10::kCPU);  // where the model and its batches live
  std::optional<c10::ScalarType> autocast;      // autocast dtype around forward + loss (fp16 / bf16); none: off
  bool tf32 = false;                            // CUDA float32 matmuls on TF32 tensor cores
  bool half_weights = false;                    // weights stored in the autocast dtype (use_pure_fp16, --half-weights)
  std::vector<std::string> fp32_params{"LayerNorm"};  // half_weights: parameter-name substrings kept in float32
  bool master_weights = false;                     // training with half weights: float32 master copies in the optimizer
  bool loss_scaling = false;                       // dynamic loss scaling (fp16 training)
  Quantization quantization = Quantization::None;  // Int8Dynamic: int8 encoder linears (CPU inference)

  // Under half_weights, whether parameter `name` stays float32 (it contains an fp32_params entry).
  bool keeps_fp32(const std::string& name) const { return kept_fp32(fp32_params, name); }
  // Bytes per activation element the forward keeps: 2 under autocast, else 4 (the memory estimate's e).
  int activation_bytes() const { return autocast ? 2 : 4; }
  // One line for logs and run records, e.g. "amp-bf16 on cpu (bf16 autocast, half weights; fp32: LayerNorm)".
  BERTX_EXPORT std::string describe() const;
};

struct PolicyRequest {
  Precision precision = Precision::Fp32;              // the named choice
  c10::Device device = c10::Device(c10::kCPU);        // the device picked for the run
  PolicyUse use = PolicyUse::Inference;               // training or inference
  bool half_weights = false;                          // use_pure_fp16 (training) / --half-weights (inference)
  std::vector<std::string> fp32_params{"LayerNorm"};  // kept float32 under half_weights
};

// The policy for a request, or a one-line bertx::Error naming `where` (e.g. "[train] precision") and what is
// allowed: amp needs CUDA; int8 is for inference on the CPU; half weights need amp or amp-bf16.
BERTX_EXPORT ExecutionPolicy make_policy(const PolicyRequest& request, const std::string& where);

// A --precision flag's text: fp32, tf32, amp, amp-bf16, int8, or the aliases fp16 and bf16. Throws naming `where`
// and the choices.
BERTX_EXPORT Precision precision_from_flag(const std::string& text, const std::string& where);
// "fp32 | tf32 | amp (fp16) | amp-bf16 (bf16) | int8": the flags' help text, from option_names(Precision).
BERTX_EXPORT std::string precision_flag_choices();

// Sets what the policy fixes for the whole process (CUDA TF32 matmuls). Call once after the device is chosen.
BERTX_EXPORT void apply_process_wide(const ExecutionPolicy& policy);

// RAII around a forward (+ loss): the policy's autocast on for its device while it lives, off after.
class BERTX_EXPORT ExecutionScope {
 public:
  explicit ExecutionScope(const ExecutionPolicy& policy);
  ~ExecutionScope();
  ExecutionScope(const ExecutionScope&) = delete;
  ExecutionScope& operator=(const ExecutionScope&) = delete;

 private:
  std::optional<c10::DeviceType> autocast_device_;
};

}  // namespace bertx
