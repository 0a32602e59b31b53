// test_forward_cli.cpp - `bertx forward` on the golden model folder, checked against the golden outputs
// from outside the process, exactly as a user would run a parity check.
#include "doctest_torch.hpp"

#include "io/safetensors.hpp"
#include "test_util.hpp"

using namespace bertx;

static const std::string kGolden = std::string(BERTX_SHARED_DIR) + "/golden/model";

static double max_abs(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

TEST_CASE("bertx forward --head pretraining --grads reproduces the golden outputs and gradients") {
  test::TempDir d;
  auto r = test::run_command(std::string(BERTX_BIN) + " forward --model " + kGolden + " --inputs " + kGolden +
                             "/inputs.safetensors --out " + (d / "out.safetensors") + " --grads");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  TensorMap out = load_safetensors(d / "out.safetensors"),
            ref = load_safetensors(kGolden + "/pretraining_outputs.safetensors");
  TensorMap grads = load_safetensors(kGolden + "/pretraining_grads.safetensors");
  TensorMap in = load_safetensors(kGolden + "/inputs.safetensors");
  for (const char* k : {"hidden_states.0", "hidden_states.1", "hidden_states.2", "pooled_output", "nsp_logits",
                        "mlm_loss", "nsp_loss", "total_loss"}) {
    INFO(k);
    REQUIRE(out.count(k) == 1);
    CHECK(max_abs(out.at(k), ref.at(k)) <= 1e-5);
  }
  // masked_lm_positions are given: mlm_logits holds the (N, V) rows at those (batch, position) pairs.
  at::Tensor pairs = in.at("masked_lm_positions");
  at::Tensor expected = ref.at("mlm_logits").index({pairs.select(1, 0), pairs.select(1, 1)});
  CHECK(max_abs(out.at("mlm_logits"), expected) <= 3e-5);
  int n = 0;
  for (const auto& [name, g] : grads) {
    INFO(name);
    REQUIRE(out.count("grad." + name) == 1);
    CHECK(max_abs(out.at("grad." + name), g) <= 1e-4);
    ++n;
  }
  CHECK(n == 46);
}

TEST_CASE("bertx forward --head qa and --head classification reproduce the golden heads") {
  test::TempDir d;
  for (std::string head : {"qa", "classification"}) {
    auto r = test::run_command(std::string(BERTX_BIN) + " forward --model " + kGolden + " --inputs " + kGolden +
                               "/inputs.safetensors --out " + (d / head) + ".safetensors --head " + head + " --grads");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    TensorMap out = load_safetensors(d / head + ".safetensors");
    TensorMap ref = load_safetensors(kGolden + (head == "qa" ? "/qa_outputs.safetensors" : "/cls_outputs.safetensors"));
    for (const auto& [name, t] : ref) {
      INFO(head << " " << name);
      REQUIRE(out.count(name) == 1);
      CHECK(max_abs(out.at(name), t) <= (name.rfind("grad.", 0) == 0 ? 1e-4 : 1e-5));
    }
  }
}

TEST_CASE("bertx forward on a folder without weights fails with one line naming the folder") {
  test::TempDir d;
  test::write_text(d / "m/config.json", test::read_text(kGolden + "/config.json"));
  auto r = test::run_command(std::string(BERTX_BIN) + " forward --model " + (d / "m") + " --inputs " + kGolden +
                             "/inputs.safetensors --out " + (d / "o.safetensors"));
  CHECK(r.exit_code == 2);
  CHECK(r.output ==
        "bertx: error: " + (d / "m") + ": no model.safetensors or weights.safetensors in this model folder\n");
}

TEST_CASE(
    "a sentence-transformers folder with a bare BertModel checkpoint loads its encoder and --head none equals the "
    "golden") {
  // The golden encoder as transformers' BertModel saves it (no "bert." prefix, no pre-training head) in the
  // layout of older sentence-transformers releases: modules.json naming the encoder's subfolder.
  test::TempDir d;
  TensorMap bare;
  for (const auto& [k, v] : load_safetensors(kGolden + "/weights.safetensors"))
    if (k.rfind("bert.", 0) == 0) bare[k.substr(5)] = v;
  REQUIRE(bare.count("embeddings.word_embeddings.weight") == 1);
  test::write_text(d / "st/0_BERT/config.json", test::read_text(kGolden + "/config.json"));
  save_safetensors(d / "st/0_BERT/model.safetensors", bare, {{"format", "pt"}});
  test::write_text(d / "st/modules.json",
                   R"([{"idx": 0, "name": "0", "path": "0_BERT", "type": "sentence_transformers.models.Transformer"},
                       {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])");
  auto r = test::run_command(std::string(BERTX_BIN) + " forward --model " + (d / "st") + " --inputs " + kGolden +
                             "/inputs.safetensors --out " + (d / "o.safetensors") + " --head none");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  TensorMap out = load_safetensors(d / "o.safetensors"),
            ref = load_safetensors(kGolden + "/pretraining_outputs.safetensors");
  CHECK(out.count("mlm_logits") == 0);  // the encoder alone
  for (const char* k : {"hidden_states.0", "hidden_states.1", "hidden_states.2", "sequence_output", "pooled_output"}) {
    INFO(k);
    REQUIRE(out.count(k) == 1);
    CHECK(max_abs(out.at(k), ref.at(k)) <= 1e-5);
  }

  // A modules.json without a Transformer module is refused in one line naming it.
  test::write_text(d / "st/modules.json",
                   R"([{"idx": 0, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])");
  r = test::run_command(std::string(BERTX_BIN) + " forward --model " + (d / "st") + " --inputs " + kGolden +
                        "/inputs.safetensors --out " + (d / "o.safetensors") + " --head none");
  CHECK(r.exit_code == 2);
  CHECK(r.output == "bertx: error: " + (d / "st/modules.json") +
                        ": no sentence_transformers.models.Transformer module (bertx loads the BERT encoder of a "
                        "sentence-transformers folder, not its other modules)\n");
}
