// execution.cpp - bertx/execution.hpp: building and checking an ExecutionPolicy, and entering it (autocast, TF32).
#include "bertx/execution.hpp"

#include <algorithm>

#include <ATen/ATen.h>

#include "bertx/compat.hpp"
#include "bertx/error.hpp"

namespace bertx {

std::string ExecutionPolicy::describe() const {
  std::string out = enum_name(precision) + " on " + device.str();
  std::vector<std::string> parts;
  if (autocast) parts.push_back(std::string(*autocast == at::kHalf ? "fp16" : "bf16") + " autocast");
  if (tf32) parts.push_back("TF32 matmuls");
  if (half_weights) {
    std::string kept;
    for (const auto& p : fp32_params) kept += (kept.empty() ? "" : ", ") + p;
    parts.push_back("pure half weights" + (kept.empty() ? std::string() : "; fp32: " + kept));
  }
  if (master_weights) parts.push_back("fp32 master weights");
  if (loss_scaling) parts.push_back("dynamic loss scaling");
  if (quantization == Quantization::Int8Dynamic)
    parts.push_back("int8 linears, per-channel weights, per-token dynamic activations");
  if (!parts.empty()) {
    out += " (";
    for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
    out += ")";
  }
  return out;
}

ExecutionPolicy make_policy(const PolicyRequest& r, const std::string& where) {
  const std::string name = "\"" + enum_name(r.precision) + "\"";
  ExecutionPolicy p;
  p.precision = r.precision;
  p.device = r.device;
  switch (r.precision) {
    case Precision::Fp32:
      break;
    case Precision::Tf32:
      p.tf32 = r.device.is_cuda();  // TF32 exists on CUDA only; on the CPU tf32 computes in float32
      break;
    case Precision::Amp:
      if (!r.device.is_cuda())
        throw Error(where + " = " + name + " (fp16 autocast) needs CUDA; use \"amp-bf16\" (bf16) on the CPU");
      p.autocast = at::kHalf;
      p.loss_scaling = r.use == PolicyUse::Training;
      break;
    case Precision::AmpBf16:
      p.autocast = at::kBFloat16;
      break;
    case Precision::Int8:
      if (r.use == PolicyUse::Training)
        throw Error(
            where + " = " + name +
            " is for inference (forward, bench infer, serve, a run with do_train = false); train in fp32, tf32, "
            "amp or amp-bf16");
      if (!r.device.is_cpu())
        throw Error(where + " = " + name + " runs on the CPU (oneDNN's int8 GEMMs); this run is on " + r.device.str());
      p.quantization = Quantization::Int8Dynamic;
      break;
  }
  if (r.half_weights) {
    if (!p.autocast)
      throw Error(where +
                  ": half weights (use_pure_fp16 / --half-weights) need \"amp\" (fp16) or \"amp-bf16\" (bf16), "
                  "got " +
                  name);
    p.half_weights = true;
    p.fp32_params = r.fp32_params;
    p.master_weights = r.use == PolicyUse::Training;
  }
  return p;
}

Precision precision_from_flag(const std::string& text, const std::string& where) {
  if (text == "fp16") return Precision::Amp;
  if (text == "bf16") return Precision::AmpBf16;
  for (const auto& [value, n] : option_names(Precision{}))
    if (n == text) return value;
  throw Error(where + ": --precision '" + text + "': expected " + precision_flag_choices());
}

std::string precision_flag_choices() {
  std::string out;
  for (const auto& [value, n] : option_names(Precision{})) {
    out += (out.empty() ? "" : " | ") + n;
    if (value == Precision::Amp) out += " (fp16)";
    if (value == Precision::AmpBf16) out += " (bf16)";
  }
  return out;
}

void apply_process_wide(const ExecutionPolicy& policy) {
  if (policy.device.is_cuda()) compat::set_cuda_tf32(policy.tf32);
}

bool kept_fp32(const std::vector<std::string>& fp32_params, const std::string& name) {
  return std::any_of(fp32_params.begin(), fp32_params.end(),
                     [&](const std::string& s) { return name.find(s) != std::string::npos; });
}

ExecutionScope::ExecutionScope(const ExecutionPolicy& policy) {
  if (!policy.autocast) return;
  compat::set_autocast(policy.device.type(), true, *policy.autocast);
  autocast_device_ = policy.device.type();
}

ExecutionScope::~ExecutionScope() {
  if (autocast_device_) compat::set_autocast(*autocast_device_, false, at::kFloat);
}

}  // namespace bertx
