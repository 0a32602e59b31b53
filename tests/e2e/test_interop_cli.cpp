// test_interop_cli.cpp - `bertx forward` straight on Google TF / BioBERT / NVIDIA checkpoint folders and `bertx
// convert` to Hugging Face folders, against transformers' outputs for the same tiny model (tests/fixtures/interop,
// written by tools/interop/make_fixtures.py); a plain encoder folder running as the encoder; a bertx checkpoint
// converted.
#include "doctest_torch.hpp"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "io/safetensors.hpp"
#include "test_util.hpp"

using namespace bertx;
namespace fs = std::filesystem;

static const std::string kFix = std::string(BERTX_SOURCE_DIR) + "/tests/fixtures/interop";
static const std::string kRef = kFix + "/reference";

static double max_abs(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Runs `bertx forward` on `model` and returns the largest difference to transformers' outputs over `keys`.
static double forward_diff(const std::string& model, const test::TempDir& d, std::string* output = nullptr,
                           const std::vector<std::string>& keys = {"hidden_states.0", "hidden_states.1",
                                                                   "hidden_states.2", "sequence_output",
                                                                   "pooled_output", "mlm_logits", "nsp_logits"}) {
  const std::string out = d / "out.safetensors";
  auto r = test::run_command(std::string(BERTX_BIN) + " forward --model " + model + " --inputs " + kRef +
                             "/inputs.safetensors --out " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  if (output) *output = r.output;
  const TensorMap got = load_safetensors(out), ref = load_safetensors(kRef + "/expected.safetensors");
  double worst = 0;
  for (const auto& k : keys) {
    INFO(k);
    REQUIRE(got.count(k) == 1);
    worst = std::max(worst, max_abs(got.at(k), ref.at(k)));
  }
  return worst;
}

TEST_CASE("bertx forward runs Google TF, BioBERT and NVIDIA checkpoint folders as transformers does") {
  test::TempDir d;
  for (const char* dir : {"/reference", "/google", "/biobert_v1.1_pubmed", "/nvidia", "/nvidia_module"}) {
    std::string output;
    const double diff = forward_diff(kFix + dir, d, &output);
    MESSAGE(std::string(dir) << ": max |bertx - transformers| = " << diff);
    CHECK(diff <= 1e-5);
    if (std::string(dir).rfind("/nvidia", 0) == 0) CHECK(output.find("trimmed to the 99 tokens") != std::string::npos);
  }
}

TEST_CASE("bertx convert writes each format as a Hugging Face folder that runs like the reference") {
  test::TempDir d;
  const TensorMap ref = load_safetensors(kRef + "/model.safetensors");
  for (const char* dir : {"/google", "/biobert_v1.1_pubmed", "/nvidia/ckpt_8.pt", "/nvidia_module"}) {
    INFO(dir);
    const std::string out = d / "hf";
    fs::remove_all(out);
    auto r = test::run_command(std::string(BERTX_BIN) + " convert " + kFix + dir + " " + out);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    for (const char* f : {"config.json", "model.safetensors", "vocab.txt"}) CHECK(fs::is_regular_file(out + "/" + f));
    CHECK(nlohmann::json::parse(test::read_text(out + "/config.json"))["vocab_size"] == 99);
    const TensorMap got = load_safetensors(out + "/model.safetensors");
    for (const auto& [name, t] : ref) {
      INFO(name);
      REQUIRE(got.count(name) == 1);
      CHECK(max_abs(got.at(name), t) == 0.0);
    }
    CHECK(forward_diff(out, d) <= 1e-5);
  }
}

TEST_CASE("bertx convert takes --config/--vocab, and refuses what it cannot read in one line") {
  test::TempDir d;
  fs::create_directories(d / "bare");
  fs::copy_file(kFix + "/nvidia/ckpt_8.pt", d / "bare/ckpt_8.pt");
  auto r = test::run_command(std::string(BERTX_BIN) + " convert " + (d / "bare/ckpt_8.pt") + " " + (d / "o1"));
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("pass --config") != std::string::npos);
  r = test::run_command(std::string(BERTX_BIN) + " convert " + (d / "bare") + " " + (d / "o2") + " --config " + kFix +
                        "/nvidia/bert_config.json --vocab " + kFix + "/nvidia/vocab.txt");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(forward_diff(d / "o2", d) <= 1e-5);
  r = test::run_command(std::string(BERTX_BIN) + " convert " + kFix + "/tf2_object " + (d / "o3") + " --config " +
                        kFix + "/google/bert_config.json");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("TF2 object-based checkpoint") != std::string::npos);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
}

TEST_CASE("a plain encoder folder (BertModel weights, no head) runs in bertx forward as the encoder") {
  test::TempDir d;
  TensorMap enc;
  for (const auto& [name, t] : load_safetensors(kRef + "/model.safetensors"))
    if (name.rfind("bert.", 0) == 0) enc[name.substr(5)] = t;  // AutoModel's names: no "bert." prefix
  fs::create_directories(d / "enc");
  save_safetensors(d / "enc/model.safetensors", enc);
  fs::copy_file(kRef + "/config.json", d / "enc/config.json");
  std::string output;
  CHECK(forward_diff(d / "enc", d, &output, {"hidden_states.2", "sequence_output", "pooled_output"}) <= 1e-5);
  CHECK(output.find("running it as the encoder alone") != std::string::npos);
  CHECK(load_safetensors(d / "out.safetensors").count("mlm_logits") == 0);
  // Asked for the pre-training head by name, the missing head is still an error.
  auto r = test::run_command(std::string(BERTX_BIN) + " forward --model " + (d / "enc") + " --inputs " + kRef +
                             "/inputs.safetensors --out " + (d / "o.safetensors") + " --head pretraining");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("no weights for 'cls.") != std::string::npos);
}

TEST_CASE("bertx run fine-tunes from a BioBERT-layout TF checkpoint folder as from_pretrained") {
  test::TempDir d;
  const std::string bio = kFix + "/biobert_v1.1_pubmed";
  auto r = test::run_command(
      std::string(BERTX_BIN) + " run " + BERTX_SOURCE_DIR +
      "/experiments/tiny_finetune.toml --set train.from_pretrained=" + bio +
      " --set model.preset=custom --set model.config=" + bio + "/bert_config.json --set data.vocab=" + bio +
      "/vocab.txt --set data.data_dir=" + BERTX_SOURCE_DIR +
      "/experiments/data/tiny_pairs --set data.max_seq_length=32" +
      " --set train.max_steps=2 --set train.batch_size=4 --set train.eval=false --set run.output_dir=" + (d / "run") +
      " --set run.store=" + (d / "runs.db") + " --set run.threads=1");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("initial weights from " + bio + "/model.ckpt-1000000") != std::string::npos);
}

TEST_CASE("bertx convert takes a bertx checkpoint and writes the model its run built, head and vocab included") {
  test::TempDir d;
  // Two steps of the SQuAD smoke experiment (its data paths are relative to the source tree).
  auto r = test::run_command(std::string("cd ") + BERTX_SOURCE_DIR + " && " + BERTX_BIN +
                             " run experiments/squad_cpu_smoke.toml --set run.output_dir=" + (d / "run") +
                             " --set run.store=" + (d / "runs.db") +
                             " --set train.max_steps=2 --set train.epochs=0 --set train.eval=false"
                             " --set train.predict=false --set run.threads=1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string root = d / "run/bert/squad";
  // From the source tree too: the run's config.toml names its vocab relative to where the run started.
  r = test::run_command(std::string("cd ") + BERTX_SOURCE_DIR + " && " + BERTX_BIN + " convert " + root + " " +
                        (d / "hf"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("head qa") != std::string::npos);
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt"})
    CHECK(fs::is_regular_file(fs::path(d / "hf") / f));
  // The converted folder computes what the checkpoint computes.
  for (const std::string& model : {root, std::string(d / "hf")}) {
    r = test::run_command(std::string(BERTX_BIN) + " forward --head qa --model " + model + " --inputs " + kRef +
                          "/inputs.safetensors --out " + (d / (model == root ? "a.safetensors" : "b.safetensors")));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  }
  const TensorMap a = load_safetensors(d / "a.safetensors"), b = load_safetensors(d / "b.safetensors");
  for (const char* k : {"start_logits", "end_logits"}) {
    INFO(k);
    REQUIRE(a.count(k) == 1);
    REQUIRE(b.count(k) == 1);
    CHECK(max_abs(a.at(k), b.at(k)) == 0.0);
  }
}

TEST_CASE("a folder with tokenizer.json and no vocab.txt (transformers 5) converts with its vocab.txt") {
  test::TempDir d;
  fs::create_directories(d / "t5");
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(kRef + "/" + f, fs::path(d / "t5") / f);
  const std::string vocab = test::read_text(kRef + "/vocab.txt");
  nlohmann::json map = nlohmann::json::object();
  std::int64_t id = 0;
  for (std::size_t pos = 0; pos < vocab.size(); ++id) {
    const std::size_t nl = vocab.find('\n', pos);
    map[vocab.substr(pos, nl - pos)] = id;
    pos = nl == std::string::npos ? vocab.size() : nl + 1;
  }
  test::write_text(d / "t5/tokenizer.json", nlohmann::json{{"model", {{"type", "WordPiece"}, {"vocab", map}}}}.dump());
  auto r = test::run_command(std::string(BERTX_BIN) + " convert " + (d / "t5") + " " + (d / "hf"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(test::read_text(d / "hf/vocab.txt") == vocab);
  CHECK(forward_diff(d / "hf", d) <= 1e-5);
}
