// onnx_bert.cpp - see onnx_bert.hpp. B batch, S sequence, H hidden, N heads, D = H / N, I intermediate, V vocab.
// Each layer is written in the order and shape of transformers' classic export, because ONNX Runtime's optimizer
// (onnxruntime/transformers/fusion_attention.py) matches exactly that: q/v Reshape -> Transpose(0,2,1,3), k
// Transpose(0,2,3,1), MatMul -> Div -> Add(mask) -> Softmax -> MatMul, mask Unsqueeze -> Unsqueeze -> Cast ->
// Sub(1, .) -> Mul(-10000), the attention output Add feeding the residual Add before LayerNormalization; and
// (fusion_embedlayer.py) position ids sliced from a constant by Shape(input_ids) -> Gather(1) -> Unsqueeze.
#include "export/onnx_bert.hpp"

#include <cmath>
#include <exception>
#include <set>

#include <onnx/checker.h>

#include "base/fs_util.hpp"
#include "bertx/error.hpp"
#include "export/onnx_graph.hpp"

namespace bertx::exporter {

namespace {

constexpr auto kFloat = onnx::TensorProto_DataType_FLOAT;
constexpr auto kInt64 = onnx::TensorProto_DataType_INT64;
// A single protobuf message cannot exceed 2 GiB; the weights and the graph must fit in one (no external data).
constexpr std::int64_t kMaxBytes = (std::int64_t{1} << 31) - (std::int64_t{64} << 20);

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "(";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + ")";
}

class BertGraph {
 public:
  BertGraph(onnx::GraphProto* g, const BertDims& d, const WeightLookup& w, const std::string& head)
      : g_(g), d_(d), w_(w), head_(head) {}

  void build(const OnnxExportOptions& o, std::vector<TensorSpec>& inputs, std::vector<TensorSpec>& outputs) {
    const std::int64_t H = d_.hidden_size, V = d_.vocab_size;
    for (const char* name : {"input_ids", "attention_mask", "token_type_ids"}) {
      g_.input(name, kInt64, {"batch", "sequence"});
      inputs.push_back({name, "TYPE_INT64", {-1, -1}});
    }
    std::string x = embeddings();              // (B, S, H)
    const std::string mask = additive_mask();  // (B, 1, 1, S)
    for (std::int64_t i = 0; i < d_.num_hidden_layers; ++i)
      x = layer("bert.encoder.layer." + std::to_string(i), x, mask);

    auto out = [&](const std::string& name, std::vector<std::int64_t> dims) {
      std::vector<std::string> names{"batch"};
      for (std::size_t i = 1; i < dims.size(); ++i) names.push_back(dims[i] < 0 ? "sequence" : "");
      g_.output(name, kFloat, names, dims);
      outputs.push_back({name, "TYPE_FP32", dims});
    };
    // Classification and NSP read the pooled [CLS]; the plain encoder outputs it when the model has a pooler.
    const bool has_pooler = head_ == "classification" || head_ == "pretraining" ||
                            (head_ == "none" && w_("bert.pooler.dense.weight").has_value());
    const std::string pooled = has_pooler ? pooler(x) : "";  // (B, H)
    if (head_ == "qa") {
      const std::string logits = linear("qa_outputs", x, H, 2);  // (B, S, 2)
      g_.op("Gather", "start_logits", {logits, g_.int_scalar("qa.start", 0)}, {{"axis", std::int64_t{2}}});
      g_.op("Gather", "end_logits", {logits, g_.int_scalar("qa.end", 1)}, {{"axis", std::int64_t{2}}});
      out("start_logits", {-1, -1}), out("end_logits", {-1, -1});
    } else if (head_ == "classification") {
      linear("classifier", pooled, H, o.num_labels, "logits");  // (B, C)
      out("logits", {-1, o.num_labels});
    } else if (head_ == "pretraining") {
      const std::string p = "cls.predictions.transform";
      const std::string t = layer_norm(p + ".LayerNorm", activation(p, linear(p + ".dense", x, H, H)));
      // The decoder is tied to the word embeddings (as in BERT): (H, V) = their transpose, folded by the runtime.
      const std::string decoder =
          g_.op("Transpose", "cls.predictions.decoder.weight_t", {"bert.embeddings.word_embeddings.weight"},
                {{"perm", std::vector<std::int64_t>{1, 0}}});
      const std::string scores = g_.op("MatMul", "cls.predictions.decoder/MatMul", {t, decoder});  // (B, S, V)
      g_.op("Add", "prediction_logits", {scores, weight("cls.predictions.bias", {V})});
      linear("cls.seq_relationship", pooled, H, 2, "seq_relationship_logits");  // (B, 2)
      out("prediction_logits", {-1, -1, V}), out("seq_relationship_logits", {-1, 2});
    } else {
      g_.op("Identity", "last_hidden_state", {x});
      out("last_hidden_state", {-1, -1, H});
      if (has_pooler) {
        g_.op("Identity", "pooler_output", {pooled});
        out("pooler_output", {-1, H});
      }
    }
  }

  std::int64_t parameters() const { return g_.parameters(); }

 private:
  WeightView need(const std::string& name, const std::vector<std::int64_t>& shape) {
    std::optional<WeightView> v = w_(name);
    if (!v) throw Error("the model has no weight '" + name + "' (the ONNX graph of head '" + head_ + "' needs it)");
    if (v->shape != shape)
      throw Error("weight '" + name + "' is " + shape_text(v->shape) + ", the config says " + shape_text(shape));
    return *v;
  }
  std::string weight(const std::string& name, const std::vector<std::int64_t>& shape) {
    const WeightView v = need(name, shape);
    return g_.weight(name, v.shape, v.data);
  }

  // x (.., in) @ W^T + b -> (.., out); W stored transposed (in, out) for MatMul, as exporters store it.
  std::string linear(const std::string& p, const std::string& x, std::int64_t in, std::int64_t out,
                     const std::string& result = "") {
    const WeightView w = need(p + ".weight", {out, in});
    const std::string wt = g_.weight(p + ".weight_t", w.shape, w.data, /*transpose=*/true);
    const std::string y = g_.op("MatMul", p + "/MatMul", {x, wt});
    return g_.op("Add", result.empty() ? p + "/Add" : result, {y, weight(p + ".bias", {out})});
  }

  std::string layer_norm(const std::string& p, const std::string& x) {
    const std::int64_t H = d_.hidden_size;
    return g_.op("LayerNormalization", p + "/LayerNormalization",
                 {x, weight(p + ".weight", {H}), weight(p + ".bias", {H})},
                 {{"axis", std::int64_t{-1}}, {"epsilon", static_cast<float>(d_.layer_norm_eps)}});
  }

  std::string scalar(const std::string& name, float v) {
    const std::string n = "const." + name;
    if (constants_.insert(n).second) g_.float_scalar(n, v);
    return n;
  }

  std::string activation(const std::string& p, const std::string& x) {
    if (d_.hidden_act == "relu") return g_.op("Relu", p + "/Relu", {x});
    if (d_.hidden_act == "gelu") {  // x * (1 + erf(x / sqrt(2))) * 0.5
      const std::string e = g_.op("Erf", p + "/Erf", {g_.op("Div", p + "/Div", {x, scalar("sqrt2", std::sqrt(2.0f))})});
      const std::string m = g_.op("Mul", p + "/Mul", {x, g_.op("Add", p + "/Add", {e, scalar("one", 1.0f)})});
      return g_.op("Mul", p + "/Mul_1", {m, scalar("half", 0.5f)});
    }
    // tanh approximation: 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))
    const std::string cube = g_.op("Pow", p + "/Pow", {x, scalar("three", 3.0f)});
    const std::string inner = g_.op("Add", p + "/Add", {x, g_.op("Mul", p + "/Mul", {cube, scalar("c0", 0.044715f)})});
    const std::string t =
        g_.op("Tanh", p + "/Tanh",
              {g_.op("Mul", p + "/Mul_1", {inner, scalar("c1", static_cast<float>(std::sqrt(2.0 / M_PI)))})});
    const std::string m = g_.op("Mul", p + "/Mul_2", {x, g_.op("Add", p + "/Add_1", {t, scalar("one", 1.0f)})});
    return g_.op("Mul", p + "/Mul_3", {m, scalar("half", 0.5f)});
  }

  std::string embeddings() {
    const std::string p = "bert.embeddings";
    const std::int64_t H = d_.hidden_size;
    // position ids: the first S of a constant (1, max_position) 0, 1, 2, ... (the Slice ORT's embedding fusion reads)
    std::vector<std::int64_t> all_positions(static_cast<std::size_t>(d_.max_position_embeddings));
    for (std::size_t i = 0; i < all_positions.size(); ++i) all_positions[i] = static_cast<std::int64_t>(i);
    const std::string shape = g_.op("Shape", p + "/Shape", {"input_ids"});
    const std::string seq =
        g_.op("Gather", p + "/Gather", {shape, g_.int_scalar(p + ".seq_axis", 1)}, {{"axis", std::int64_t{0}}});
    const std::string ends = g_.op("Unsqueeze", p + "/Unsqueeze", {seq, g_.ints(p + ".axis0", {0})});
    const std::string positions =
        g_.op("Slice", p + "/position_ids",
              {g_.int_matrix(p + ".position_ids", {1, d_.max_position_embeddings}, all_positions),
               g_.ints(p + ".start", {0}), ends, g_.ints(p + ".axis1", {1}), g_.ints(p + ".step", {1})});  // (1, S)
    const std::string words = g_.op("Gather", p + "/word_embeddings/Gather",
                                    {weight(p + ".word_embeddings.weight", {d_.vocab_size, H}), "input_ids"});
    const std::string types =
        g_.op("Gather", p + "/token_type_embeddings/Gather",
              {weight(p + ".token_type_embeddings.weight", {d_.type_vocab_size, H}), "token_type_ids"});
    const std::string pos =
        g_.op("Gather", p + "/position_embeddings/Gather",
              {weight(p + ".position_embeddings.weight", {d_.max_position_embeddings, H}), positions});
    const std::string sum = g_.op("Add", p + "/Add_1", {g_.op("Add", p + "/Add", {words, types}), pos});
    return layer_norm(p + ".LayerNorm", sum);
  }

  // (1 - mask) * -10000 broadcast over heads and queries: (B, 1, 1, S), as transformers' classic BERT wrote it.
  std::string additive_mask() {
    const std::string p = "bert.extended_attention_mask";
    const std::string u1 = g_.op("Unsqueeze", p + "/Unsqueeze", {"attention_mask", g_.ints(p + ".axis1", {1})});
    const std::string u2 = g_.op("Unsqueeze", p + "/Unsqueeze_1", {u1, g_.ints(p + ".axis2", {2})});
    const std::string f = g_.op("Cast", p + "/Cast", {u2}, {{"to", std::int64_t{kFloat}}});
    const std::string inv = g_.op("Sub", p + "/Sub", {scalar("one", 1.0f), f});
    return g_.op("Mul", p + "/Mul", {inv, scalar("mask_value", -10000.0f)});
  }

  std::string layer(const std::string& p, const std::string& x, const std::string& mask) {
    const std::int64_t H = d_.hidden_size, N = d_.num_attention_heads, D = H / N, I = d_.intermediate_size;
    const std::string a = p + ".attention.self";
    if (heads_shape_.empty()) {
      heads_shape_ = g_.ints("const.heads_shape", {0, 0, N, D});
      merged_shape_ = g_.ints("const.merged_shape", {0, 0, H});
    }
    auto heads = [&](const std::string& name, std::vector<std::int64_t> perm) {  // (B, S, H) -> (B, N, S, D)
      const std::string r =
          g_.op("Reshape", a + "/" + name + "/Reshape", {linear(a + "." + name, x, H, H), heads_shape_});
      return g_.op("Transpose", a + "/" + name + "/Transpose", {r}, {{"perm", std::move(perm)}});
    };
    const std::string q = heads("query", {0, 2, 1, 3});                 // (B, N, S, D)
    const std::string k = heads("key", {0, 2, 3, 1});                   // (B, N, D, S)
    const std::string v = heads("value", {0, 2, 1, 3});                 // (B, N, S, D)
    const std::string scores = g_.op("MatMul", a + "/MatMul", {q, k});  // (B, N, S, S)
    const std::string scaled =
        g_.op("Div", a + "/Div", {scores, scalar("sqrt_head_dim", std::sqrt(static_cast<float>(D)))});
    const std::string probs =
        g_.op("Softmax", a + "/Softmax", {g_.op("Add", a + "/Add", {scaled, mask})}, {{"axis", std::int64_t{-1}}});
    const std::string ctx = g_.op("MatMul", a + "/MatMul_1", {probs, v});  // (B, N, S, D)
    const std::string t =
        g_.op("Transpose", a + "/Transpose", {ctx}, {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
    const std::string merged = g_.op("Reshape", a + "/Reshape", {t, merged_shape_});  // (B, S, H)
    const std::string o = p + ".attention.output";
    const std::string h1 =
        layer_norm(o + ".LayerNorm", g_.op("Add", o + "/residual", {linear(o + ".dense", merged, H, H), x}));
    const std::string inner =
        activation(p + ".intermediate", linear(p + ".intermediate.dense", h1, H, I));  // (B, S, I)
    const std::string out = p + ".output";
    return layer_norm(out + ".LayerNorm", g_.op("Add", out + "/residual", {linear(out + ".dense", inner, I, H), h1}));
  }

  std::string pooler(const std::string& x) {  // tanh(dense(x[:, 0])): (B, H)
    const std::string first =
        g_.op("Gather", "bert.pooler/Gather", {x, g_.int_scalar("bert.pooler.first", 0)}, {{"axis", std::int64_t{1}}});
    return g_.op("Tanh", "bert.pooler/Tanh", {linear("bert.pooler.dense", first, d_.hidden_size, d_.hidden_size)});
  }

  GraphWriter g_;
  const BertDims& d_;
  const WeightLookup& w_;
  std::string head_;
  std::string heads_shape_, merged_shape_;
  std::set<std::string> constants_;
};

}  // namespace

OnnxExportResult write_onnx_bert(const BertDims& dims, const WeightLookup& weights, const OnnxExportOptions& options,
                                 const std::string& path) {
  if (dims.num_attention_heads <= 0 || dims.hidden_size % dims.num_attention_heads != 0)
    throw Error("hidden_size " + std::to_string(dims.hidden_size) + " is not a multiple of num_attention_heads " +
                std::to_string(dims.num_attention_heads));
  onnx::ModelProto model;
  model.set_ir_version(onnx::IR_VERSION);
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);  // LayerNormalization
  model.set_producer_name("bertx");
  model.set_producer_version(options.producer_version);
  model.set_doc_string("BERT (" + options.head + " head) exported by bertx from " + options.source);
  for (const auto& [k, v] : {std::pair<std::string, std::string>{"source", options.source},
                             {"head", options.head},
                             {"hidden_act", dims.hidden_act}}) {
    onnx::StringStringEntryProto* p = model.add_metadata_props();
    p->set_key(k), p->set_value(v);
  }
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("bert");
  OnnxExportResult r;
  BertGraph bert(graph, dims, weights, options.head);
  bert.build(options, r.inputs, r.outputs);
  r.nodes = graph->node_size();
  r.parameters = bert.parameters();
  if (r.parameters * 4 > kMaxBytes)
    throw Error(path + ": " + std::to_string(r.parameters) +
                " fp32 weights do not fit one ONNX file (protobuf's 2 GiB limit; external data is not written)");
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw Error(path + ": ONNX's checker refused the exported graph: " + e.what());
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw Error(path + ": the ONNX model could not be serialized");
  r.bytes = static_cast<std::int64_t>(bytes.size());
  write_file_atomic(path, bytes);
  return r;
}

}  // namespace bertx::exporter
