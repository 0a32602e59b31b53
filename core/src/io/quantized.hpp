// quantized.hpp - int8 model folders (`bertx quantize`): the encoder's linear weights stored as int8 values with
// one float32 scale per output channel, 4x smaller than float32 for the linears, and read back by every command
// that loads a folder. Layout, in model.safetensors beside the unchanged tensors:
//   <linear>.weight        I8  (out, in)   ops::QuantizedWeight's values
//   <linear>.weight_scale  F32 (out)       its scales (w ~= values * scale[row])
// and config.json's "quantization_config" {"quant_method": "bertx-int8", ...}. The int8 values are exactly those
// a float32 folder gets quantized to at load time under --precision int8 (the same ops::QuantizedWeight).
#pragma once
#include <string>

#include "io/safetensors.hpp"

namespace bertx {

// True for the name of an encoder layer's linear weight (query, key, value, attention output, intermediate, output),
// with or without the "bert." prefix: the tensors `bertx quantize` stores in int8.
bool quantizable_linear(const std::string& name);
// True for a quantized linear's part in an int8 folder: its int8 weight or that weight's "<name>_scale".
bool quantized_linear_part(const std::string& name);

// The tensors with every quantizable float weight replaced by its int8 values and a "<name>_scale" entry; the rest
// unchanged. Throws naming the tensor when one is not 2-D.
TensorMap quantize_linears(const TensorMap& tensors, const std::string& where);

// Replaces each int8 "<name>" that has a "<name>_scale" by values x scale (float32) and drops the scale: what
// load_weights copies into a float32 model. Returns how many it replaced; an int8 tensor without its scale, or a
// scale of the wrong shape, throws naming `where` and the tensor.
int dequantize_linears(TensorMap& tensors, const std::string& where);

// config.json text with "quantization_config" added (the JSON of `config_json`, which must be an object).
std::string quantized_config_json(const std::string& config_json, const std::string& where);

}  // namespace bertx
