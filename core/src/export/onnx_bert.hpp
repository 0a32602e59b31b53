// onnx_bert.hpp - a BERT encoder and its head as an ONNX model (opset 17, fp32), for ONNX Runtime, TensorRT and
// Triton's onnxruntime back-end. The graph is laid out as transformers' classic exporter laid out BERT (MatMul + Add
// per linear, Reshape/Transpose heads, Div by sqrt(d), additive mask (1 - mask) * -10000, Softmax, erf GELU,
// LayerNormalization), the pattern ONNX Runtime's BERT optimizer fuses into Attention / SkipLayerNormalization.
// Inputs: input_ids, attention_mask, token_type_ids, int64 (batch, sequence), the v2 serving protocol's names;
// both axes dynamic. No LibTorch here: the weights come through a lookup (cmd_export.cpp reads them from the model).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace bertx::exporter {

// The architecture numbers the graph needs (Hugging Face config.json names).
struct BertDims {
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t max_position_embeddings = 0;
  std::int64_t type_vocab_size = 0;
  std::string hidden_act = "gelu";  // gelu (erf) | gelu_new / gelu_tanh / gelu_pytorch_tanh | relu
  double layer_norm_eps = 1e-12;
};

// One fp32 weight, row-major, as the model holds it (HF names; linears (out, in)). `data` outlives the export.
struct WeightView {
  std::vector<std::int64_t> shape;
  const float* data = nullptr;
};
using WeightLookup = std::function<std::optional<WeightView>(const std::string& hf_name)>;

// A graph input or output: its name, element type ("TYPE_INT64" / "TYPE_FP32", Triton's spelling) and dims,
// -1 where dynamic (the first is always the batch axis).
struct TensorSpec {
  std::string name;
  std::string triton_type;
  std::vector<std::int64_t> dims;
};

struct OnnxExportOptions {
  std::string head = "none";  // qa | classification | pretraining | none (encoder: last_hidden_state [+ pooler_output])
  std::int64_t num_labels = 0;   // classification: rows of classifier.weight
  std::string source;            // what was exported (written into the model's doc_string and metadata)
  std::string producer_version;  // bertx's version, written as producer_version
};

struct OnnxExportResult {
  std::vector<TensorSpec> inputs, outputs;
  std::int64_t nodes = 0;
  std::int64_t parameters = 0;  // floats stored as initializers
  std::int64_t bytes = 0;       // size of the written file
};

// Builds the model, checks it with ONNX's checker and writes it to `path` (through path.part, renamed when whole).
// Throws bertx::Error naming the missing weight, a shape that disagrees with `dims`, or a checker complaint.
OnnxExportResult write_onnx_bert(const BertDims& dims, const WeightLookup& weights, const OnnxExportOptions& options,
                                 const std::string& path);

}  // namespace bertx::exporter
