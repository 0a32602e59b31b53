// test_onnx_export.cpp - `bertx export onnx` below the model (core/src/export): a tiny BERT with known weights
// written for each head and read back through ONNX's own protobuf schema (inputs, outputs, opset, the stored
// weights transposed for MatMul), the Triton config.pbtxt text, the repository swap and every refusal. The
// numbers an exported real model computes are checked against `bertx forward` with ONNX Runtime by
// tools/real/onnx_parity.py (ctest real_onnx_parity).
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <numeric>

#include <onnx/onnx_pb.h>

#include "bertx/error.hpp"
#include "export/onnx_bert.hpp"
#include "export/triton_repo.hpp"
#include "test_util.hpp"

using namespace bertx;
using namespace bertx::exporter;
using bertx::test::error_of;
using bertx::test::read_text;
using bertx::test::TempDir;

namespace {

// A 1-layer BERT, H 4, 2 heads, I 8, V 10: every weight filled with its element index + a per-tensor offset.
struct TinyBert {
  BertDims dims{10, 4, 1, 2, 8, 6, 2, "gelu", 1e-12};
  std::map<std::string, std::pair<std::vector<std::int64_t>, std::vector<float>>> w;
  void add(const std::string& name, std::vector<std::int64_t> shape) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> v(static_cast<std::size_t>(n));
    std::iota(v.begin(), v.end(), static_cast<float>(w.size()) * 100.0f);
    w[name] = {std::move(shape), std::move(v)};
  }
  void linear(const std::string& p, std::int64_t in, std::int64_t out) {
    add(p + ".weight", {out, in});
    add(p + ".bias", {out});
  }
  TinyBert() {
    const std::string e = "bert.embeddings.";
    add(e + "word_embeddings.weight", {10, 4});
    add(e + "position_embeddings.weight", {6, 4});
    add(e + "token_type_embeddings.weight", {2, 4});
    add(e + "LayerNorm.weight", {4}), add(e + "LayerNorm.bias", {4});
    const std::string l = "bert.encoder.layer.0.";
    for (const char* q : {"query", "key", "value"}) linear(l + "attention.self." + q, 4, 4);
    linear(l + "attention.output.dense", 4, 4);
    add(l + "attention.output.LayerNorm.weight", {4}), add(l + "attention.output.LayerNorm.bias", {4});
    linear(l + "intermediate.dense", 4, 8);
    linear(l + "output.dense", 8, 4);
    add(l + "output.LayerNorm.weight", {4}), add(l + "output.LayerNorm.bias", {4});
    linear("bert.pooler.dense", 4, 4);
    linear("qa_outputs", 4, 2);
    linear("classifier", 4, 3);
    linear("cls.predictions.transform.dense", 4, 4);
    add("cls.predictions.transform.LayerNorm.weight", {4}), add("cls.predictions.transform.LayerNorm.bias", {4});
    add("cls.predictions.bias", {10});
    linear("cls.seq_relationship", 4, 2);
  }
  WeightLookup lookup() const {
    return [this](const std::string& name) -> std::optional<WeightView> {
      auto it = w.find(name);
      if (it == w.end()) return std::nullopt;
      return WeightView{it->second.first, it->second.second.data()};
    };
  }
};

onnx::ModelProto read_model(const std::string& path) {
  onnx::ModelProto m;
  REQUIRE(m.ParseFromString(read_text(path)));
  return m;
}

std::vector<std::string> names(const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& vs) {
  std::vector<std::string> out;
  for (const auto& v : vs) out.push_back(v.name());
  return out;
}

const onnx::TensorProto* initializer(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

}  // namespace

TEST_CASE("each head's graph: v2 input names, dynamic axes, opset 17, its outputs and dims") {
  TinyBert bert;
  TempDir dir;
  const std::map<std::string, std::vector<std::string>> outputs{
      {"none", {"last_hidden_state", "pooler_output"}},
      {"qa", {"start_logits", "end_logits"}},
      {"classification", {"logits"}},
      {"pretraining", {"prediction_logits", "seq_relationship_logits"}}};
  for (const auto& [head, want] : outputs) {
    CAPTURE(head);
    const std::string path = (dir.path / (head + ".onnx")).string();
    const OnnxExportResult r = write_onnx_bert(bert.dims, bert.lookup(), {head, 3, "tiny", "test"}, path);
    const onnx::ModelProto m = read_model(path);
    CHECK(m.opset_import(0).version() == 17);
    CHECK(m.producer_name() == "bertx");
    CHECK(names(m.graph().input()) == std::vector<std::string>{"input_ids", "attention_mask", "token_type_ids"});
    CHECK(names(m.graph().output()) == want);
    const auto& ids = m.graph().input(0).type().tensor_type();
    CHECK(ids.elem_type() == onnx::TensorProto_DataType_INT64);
    CHECK(ids.shape().dim(0).dim_param() == "batch");
    CHECK(ids.shape().dim(1).dim_param() == "sequence");
    REQUIRE(r.outputs.size() == want.size());
    CHECK(r.outputs[0].triton_type == "TYPE_FP32");
    CHECK(r.nodes == m.graph().node_size());
    CHECK(r.bytes == static_cast<std::int64_t>(std::filesystem::file_size(path)));
    CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
    if (head == "classification") CHECK(r.outputs[0].dims == std::vector<std::int64_t>{-1, 3});
    if (head == "pretraining") CHECK(r.outputs[0].dims == std::vector<std::int64_t>{-1, -1, 10});
    if (head == "none") CHECK(r.outputs[0].dims == std::vector<std::int64_t>{-1, -1, 4});
  }
}

TEST_CASE("linear weights are stored transposed for MatMul, embeddings and biases as they are") {
  TinyBert bert;
  TempDir dir;
  const std::string path = (dir.path / "m.onnx").string();
  write_onnx_bert(bert.dims, bert.lookup(), {"none", 0, "tiny", "test"}, path);
  const onnx::ModelProto m = read_model(path);
  const auto& [shape, values] = bert.w.at("bert.encoder.layer.0.intermediate.dense.weight");  // (8, 4)
  const onnx::TensorProto* t = initializer(m, "bert.encoder.layer.0.intermediate.dense.weight_t");
  REQUIRE(t);
  REQUIRE(t->dims_size() == 2);
  CHECK(t->dims(0) == 4);
  CHECK(t->dims(1) == 8);
  const float* stored = reinterpret_cast<const float*>(t->raw_data().data());
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 4; ++c) CHECK(stored[c * 8 + r] == values[static_cast<std::size_t>(r * 4 + c)]);
  const onnx::TensorProto* emb = initializer(m, "bert.embeddings.word_embeddings.weight");
  REQUIRE(emb);
  CHECK(emb->raw_data() ==
        std::string(reinterpret_cast<const char*>(bert.w.at("bert.embeddings.word_embeddings.weight").second.data()),
                    40 * sizeof(float)));
  (void)shape;
}

TEST_CASE("a missing or misshapen weight, a bad head count: one line naming it, nothing written") {
  TempDir dir;
  const std::string path = (dir.path / "m.onnx").string();
  {
    TinyBert bert;
    bert.w.erase("qa_outputs.bias");
    CHECK(error_of([&] {
            write_onnx_bert(bert.dims, bert.lookup(), {"qa", 0, "t", ""}, path);
          }) == "the model has no weight 'qa_outputs.bias' (the ONNX graph of head 'qa' needs it)");
  }
  {
    TinyBert bert;
    bert.w["classifier.weight"].first = {3, 5};
    CHECK(error_of([&] {
            write_onnx_bert(bert.dims, bert.lookup(), {"classification", 3, "t", ""}, path);
          }) == "weight 'classifier.weight' is (3, 5), the config says (3, 4)");
  }
  {
    TinyBert bert;
    bert.dims.num_attention_heads = 3;
    CHECK(error_of([&] {
            write_onnx_bert(bert.dims, bert.lookup(), {"none", 0, "t", ""}, path);
          }) == "hidden_size 4 is not a multiple of num_attention_heads 3");
  }
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("config.pbtxt: onnxruntime platform, dims without the batch axis, Triton's batching knobs") {
  const std::vector<TensorSpec> in{{"input_ids", "TYPE_INT64", {-1, -1}}}, out{{"logits", "TYPE_FP32", {-1, 3}}};
  CHECK(triton_config("mrpc", in, out, serve::BatchingOptions{16, 250, 64}, "from x") ==
        "# from x\n"
        "name: \"mrpc\"\nplatform: \"onnxruntime_onnx\"\nmax_batch_size: 16\n"
        "input [\n  {\n    name: \"input_ids\"\n    data_type: TYPE_INT64\n    dims: [ -1 ]\n  }\n]\n"
        "output [\n  {\n    name: \"logits\"\n    data_type: TYPE_FP32\n    dims: [ 3 ]\n  }\n]\n"
        "dynamic_batching {\n  max_queue_delay_microseconds: 250\n"
        "  default_queue_policy {\n    max_queue_size: 64\n  }\n}\n");
  CHECK(triton_config("m", in, out, serve::BatchingOptions{}, "c").find("default_queue_policy") == std::string::npos);
}

TEST_CASE("the repository: NAME/config.pbtxt + NAME/1/model.onnx, replaced whole, bad names refused") {
  TinyBert bert;
  TempDir dir;
  auto write = [&](const std::string& head) {
    return [&bert, head](const std::string& path) {
      return write_onnx_bert(bert.dims, bert.lookup(), {head, 3, "tiny", "test"}, path);
    };
  };
  const std::string repo = dir.path.string();
  write_triton_repository(repo, "tiny", serve::BatchingOptions{}, "c", write("qa"));
  CHECK(std::filesystem::is_regular_file(dir.path / "tiny" / "1" / "model.onnx"));
  CHECK(read_text((dir.path / "tiny" / "config.pbtxt").string()).find("name: \"start_logits\"") != std::string::npos);
  write_triton_repository(repo, "tiny", serve::BatchingOptions{}, "c", write("classification"));
  CHECK(read_text((dir.path / "tiny" / "config.pbtxt").string()).find("name: \"logits\"") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.path / "tiny.part"));
  // A failed export leaves the previous model in place.
  bert.w.erase("classifier.bias");
  CHECK(error_of([&] {
          write_triton_repository(repo, "tiny", serve::BatchingOptions{}, "c", write("classification"));
        }).find("classifier.bias") != std::string::npos);
  CHECK(read_text((dir.path / "tiny" / "config.pbtxt").string()).find("name: \"logits\"") != std::string::npos);
  for (const char* bad : {"a/b", "", "..", "sp ace"})
    CHECK(error_of([&] { write_triton_repository(repo, bad, serve::BatchingOptions{}, "c", write("qa")); }) ==
          "--name '" + std::string(bad) + "': a Triton model name is letters, digits, '_', '-' and '.' only");
}
