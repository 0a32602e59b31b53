// quantized.cpp - int8 model folders: quantize / dequantize the encoder's linear weights by name (quantized.hpp).
#include "io/quantized.hpp"

#include <regex>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "bertx/ops.hpp"

namespace bertx {

namespace {
const char* const kScale = "_scale";
}

bool quantizable_linear(const std::string& name) {
  static const std::regex re(
      R"((bert\.)?encoder\.layer\.[0-9]+\.(attention\.self\.(query|key|value)|attention\.output\.dense|intermediate\.dense|output\.dense)\.weight)");
  return std::regex_match(name, re);
}

bool quantized_linear_part(const std::string& name) {
  const std::size_t n = std::char_traits<char>::length(kScale);
  const bool scale = name.size() > n && name.compare(name.size() - n, n, kScale) == 0;
  return quantizable_linear(scale ? name.substr(0, name.size() - n) : name);
}

TensorMap quantize_linears(const TensorMap& tensors, const std::string& where) {
  TensorMap out;
  for (const auto& [name, t] : tensors) {
    if (!quantizable_linear(name) || t.scalar_type() == at::kChar) {
      out[name] = t;
      continue;
    }
    if (t.dim() != 2)
      throw Error(where + ": tensor '" + name + "' is a linear weight but has " + std::to_string(t.dim()) +
                  " dimensions, expected (out, in)");
    const ops::QuantizedWeight q(t);
    out[name] = q.values();
    out[name + kScale] = q.scales();
  }
  return out;
}

int dequantize_linears(TensorMap& tensors, const std::string& where) {
  std::vector<std::string> replaced;
  for (auto& [name, t] : tensors) {
    if (t.scalar_type() != at::kChar) continue;
    const auto s = tensors.find(name + kScale);
    if (s == tensors.end())
      throw Error(where + ": int8 tensor '" + name + "' has no '" + name + kScale +
                  "' (float32 scales per output channel, as bertx quantize writes)");
    try {
      t = ops::QuantizedWeight(t, s->second).dequantized();
    } catch (const Error& e) {
      throw Error(where + ": tensor '" + name + "': " + e.what());
    }
    replaced.push_back(name);
  }
  for (const auto& name : replaced) tensors.erase(name + kScale);
  return static_cast<int>(replaced.size());
}

std::string quantized_config_json(const std::string& config_json, const std::string& where) {
  nlohmann::json j = nlohmann::json::parse(config_json, nullptr, false);
  if (!j.is_object()) throw Error(where + ": config.json is not a JSON object");
  j["quantization_config"] = {
      {"quant_method", "bertx-int8"},
      {"bits", 8},
      {"weights", "int8 symmetric per output channel (<linear>.weight I8 + <linear>.weight_scale F32)"},
      {"activations", "dynamic, per token, symmetric (quantized at run time)"},
      {"modules", "encoder layers' query, key, value, attention output, intermediate and output linears"}};
  return j.dump(2) + "\n";
}

}  // namespace bertx
